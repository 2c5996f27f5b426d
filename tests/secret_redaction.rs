//! Secrets that used to escape redaction (issue #20, class 5): a
//! multi-line secret printed line by line, and a secret used as a sandbox
//! label. Each on every provider.

mod common;
use common::*;

/// A key-shaped secret: PEM armour around base64 lines.
const KEY_LINES: &[&str] = &[
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW",
    "QyNTUxOQAAACBq7x0b0S0m3K9c2Vj0a1u5R8h0zZl7xvQy5rXo1b7nUQAAAJgAAAAAAAAA",
    "-----END OPENSSH PRIVATE KEY-----",
];

fn assert_nowhere(out: &RunOut, needle: &str) {
    assert!(
        !out.stdout.contains(needle),
        "{needle} on stdout:\n{}",
        out.stdout
    );
    assert!(
        !out.stderr.contains(needle),
        "{needle} on stderr:\n{}",
        out.stderr
    );
    for f in files_under(&out.out_dir) {
        let text = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
        assert!(
            !text.contains(needle),
            "{needle} leaked into {}",
            f.display()
        );
    }
}

provider_tests! {
    fn a_multi_line_secret_is_redacted_line_by_line_in_console_and_logs(rfs: &Rfs) {
        let repo = Repo::new();
        let key = format!("{}\n", KEY_LINES.join("\n"));
        let out = rfs.run_with(
            repo.path(),
            r#"let k = arg("DEPLOY_KEY");
            let r = step("cat-key", "printf '%s' \"$K\"; printf '%s' \"$K\" >&2", #{ env: #{ K: k } });
            print(r.stdout);"#,
            &["--var", &format!("DEPLOY_KEY={key}")],
        );
        out.assert_code(0);
        for line in &KEY_LINES[1..3] {
            assert_nowhere(&out, line);
        }
        assert!(out.stdout.contains("[REDACTED]"), "{}", out.stdout);
        rfs.assert_no_leftovers();
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn a_secret_as_a_label_value_is_refused_and_never_reaches_the_provider(rfs: &Rfs) {
        let repo = Repo::new();
        let secret = "s3cr3t-label-value-9f8e7d";
        let out = rfs.run_with(
            repo.path(),
            r#"sandbox(#{ labels: #{ owner: arg("API_TOKEN") } });
            step("never", "echo ran");"#,
            &["--var", &format!("API_TOKEN={secret}")],
        );
        out.assert_code(3);
        assert!(out.stderr.contains("would publish a secret"), "{}", out.stderr);
        assert!(!out.stdout.contains("ran"), "{}", out.stdout);
        assert_nowhere(&out, secret);
        assert!(out.entries("placement").is_empty(), "no sandbox was created");
        rfs.assert_no_leftovers();
    }
}
