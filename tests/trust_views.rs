//! The views of a bundle can be trusted (issue #30): `rfs verify` does
//! not call a view it could not compare verified, a secret drawn on a
//! terminal from pieces reaches no file of the bundle, and verify's
//! messages quote untrusted input within bounds.

mod common;
use common::*;

use std::path::Path;

struct Verified {
    code: i32,
    stdout: String,
    stderr: String,
}

fn verify(rfs: &Rfs, out_dir: &Path, extra: &[&str]) -> Verified {
    let o = rfs
        .cmd(out_dir)
        .arg("verify")
        .args(extra)
        .arg(out_dir)
        .output()
        .expect("rfs runs");
    Verified {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// An ed25519 key without a passphrase, in a fresh folder.
fn signing_key(rfs: &Rfs) -> std::path::PathBuf {
    let dir = rfs.state.path().join(format!("key-{}", uuid_like()));
    std::fs::create_dir_all(&dir).unwrap();
    let key = dir.join("id");
    let st = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "t", "-f"])
        .arg(&key)
        .status()
        .expect("ssh-keygen runs");
    assert!(st.success());
    key
}

/// A signed bundle of a failed run whose EVIDENCE.md is rewritten to say
/// "completed" and stripped of its layout line verified ("not
/// compared"): nothing vouched for what it said. It fails now, naming
/// the file, unless `--allow-unchecked-views`, which says it is NOT
/// CHECKED.
#[test]
fn a_failed_runs_evidence_md_rewritten_to_completed_without_its_layout_line_does_not_verify() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let key = signing_key(&rfs);
    let out = rfs.run_with(
        repo.path(),
        r#"step("broken", "exit 3");"#,
        &["--sign-key", key.to_str().unwrap()],
    );
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.out_dir.join("journal.sig").exists());
    let path = out.out_dir.join("EVIDENCE.md");
    let ev = std::fs::read_to_string(&path).unwrap();
    assert!(ev.contains("failed"), "{ev}");
    let forged = ev
        .replace("\n<!-- rfs-evidence/5 -->\n", "\n")
        .replace("failed", "completed")
        .replace("FAIL", "ok");
    std::fs::write(&path, forged).unwrap();

    let v = verify(&rfs, &out.out_dir, &[]);
    assert_eq!(v.code, 4, "{}\n{}", v.stdout, v.stderr);
    assert!(
        v.stderr
            .contains("EVIDENCE.md: EVIDENCE.md was made by another rfs")
            && v.stderr.contains("cannot vouch for it"),
        "{}",
        v.stderr
    );
    assert!(v.stderr.contains("--allow-unchecked-views"), "{}", v.stderr);
    assert!(!v.stdout.contains("verified"), "{}", v.stdout);

    let v = verify(&rfs, &out.out_dir, &["--allow-unchecked-views"]);
    assert_eq!(v.code, 0, "{}\n{}", v.stdout, v.stderr);
    assert!(
        v.stdout.contains("UNCHECKED: EVIDENCE.md: NOT CHECKED"),
        "{}",
        v.stdout
    );
    assert!(v.stdout.contains("ok: signature: "), "{}", v.stdout);
    let last = v.stdout.lines().last().unwrap();
    assert!(
        last.contains("verified, except EVIDENCE.md") && last.contains("NOT CHECKED"),
        "{last}"
    );
    // The flag allows an unchecked view, not a tampered file.
    std::fs::write(out.out_dir.join("steps/extra.log"), "x").unwrap();
    let v = verify(&rfs, &out.out_dir, &["--allow-unchecked-views"]);
    assert_eq!(v.code, 4, "{}", v.stdout);
    rfs.assert_no_leftovers();
}

/// A report.html claiming another generator, with a script of its own,
/// was "not compared" and the bundle verified: a browser runs the
/// forged page's script. It fails now unless `--allow-unchecked-views`.
#[test]
fn a_report_html_claiming_another_generator_does_not_verify() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), r#"step("x", "echo hi");"#);
    out.assert_code(0);
    let page = out.out_dir.join("report.html");
    let html = std::fs::read_to_string(&page).unwrap();
    let forged = html
        .replacen(" report/", " report/9", 1)
        .replace("<body>", "<body><script>alert('forged')</script>");
    std::fs::write(&page, forged).unwrap();
    let v = verify(&rfs, &out.out_dir, &[]);
    assert_eq!(v.code, 4, "{}\n{}", v.stdout, v.stderr);
    assert!(
        v.stderr.contains("report.html was made by another rfs")
            && v.stderr.contains("report/9")
            && v.stderr.contains("cannot vouch"),
        "{}",
        v.stderr
    );
    let v = verify(&rfs, &out.out_dir, &["--allow-unchecked-views"]);
    assert_eq!(v.code, 0, "{}\n{}", v.stdout, v.stderr);
    assert!(
        v.stdout.contains("UNCHECKED: report.html: NOT CHECKED")
            && v.stdout.contains("do not open it"),
        "{}",
        v.stdout
    );
    // `rfs report` draws it again from the journal; then it verifies.
    let r = rfs
        .cmd(repo.path())
        .arg("report")
        .arg(&out.out_dir)
        .output()
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    let v = verify(&rfs, &out.out_dir, &[]);
    assert_eq!(v.code, 0, "{}\n{}", v.stdout, v.stderr);
    rfs.assert_no_leftovers();
}

/// `rfs verify` quoted a 100 MB journal line whole in its error (and a
/// huge EVIDENCE.md line too): each quote is bounded now.
#[test]
fn rfs_verify_quotes_at_most_200_chars_of_a_100_mb_journal_line() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), r#"step("x", "echo hi");"#);
    out.assert_code(0);

    // A huge line in EVIDENCE.md of this layout: an edit, quoted bounded.
    let ev_path = out.out_dir.join("EVIDENCE.md");
    let ev = std::fs::read_to_string(&ev_path).unwrap();
    let huge = format!("{}\u{1b}]52;c;aGk=\u{7}\n", "E".repeat(1 << 20));
    std::fs::write(&ev_path, format!("{huge}{ev}")).unwrap();
    let v = verify(&rfs, &out.out_dir, &[]);
    assert_eq!(v.code, 4);
    assert!(v.stderr.len() < 8_000, "{} bytes on stderr", v.stderr.len());
    assert!(v.stderr.contains("edited after the run"), "{}", v.stderr);
    assert!(v.stderr.contains("bytes)"), "{}", v.stderr);
    assert!(!v.stderr.contains('\u{1b}'));
    std::fs::write(&ev_path, ev).unwrap();

    // A 100 MB kind on the journal's first line.
    let j_path = out.out_dir.join("journal.jsonl");
    let journal = std::fs::read_to_string(&j_path).unwrap();
    let (first, rest) = journal.split_once('\n').unwrap();
    let mut line: serde_json::Value = serde_json::from_str(first).unwrap();
    let kind = "k".repeat(100 << 20);
    line["kind"] = serde_json::Value::String(kind);
    std::fs::write(&j_path, format!("{line}\n{rest}")).unwrap();
    let v = verify(&rfs, &out.out_dir, &[]);
    assert_eq!(v.code, 4, "{}", &v.stderr[..v.stderr.len().min(2000)]);
    assert!(v.stderr.len() < 8_000, "{} bytes on stderr", v.stderr.len());
    assert!(
        v.stderr.contains(&format!("… ({} bytes)", 100 << 20)),
        "{}",
        v.stderr
    );
    rfs.assert_no_leftovers();
}

/// Every file of the bundle, as text.
fn bundle_files(out_dir: &Path) -> Vec<(std::path::PathBuf, String)> {
    files_under(out_dir)
        .into_iter()
        .map(|f| {
            let t = String::from_utf8_lossy(&std::fs::read(&f).unwrap()).into_owned();
            (f, t)
        })
        .collect()
}

const SECRET: &str = "hunter22";

provider_tests! {
    // A secret typed with a typo fixed by Backspace, and one drawn over
    // a line after `\r`, never came in one piece of the recording's
    // bytes: redacted in the snapshot, journal and EVIDENCE.md, they
    // were drawn in clear in report.html's screens and player frames.
    fn a_secret_assembled_on_the_terminal_reaches_no_file_of_the_bundle(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run_with(
            repo.path(),
            r#"
            let t = attach("sh");
            t.send("echo hunter2X");
            t.press("BSpace");
            t.send("2 | wc -c\n");
            assert_screen(t, "9");
            t.send("printf 'xxxxxx22\\rhunter\\n'; echo drawn\n");
            assert_screen(t, #{ text: "drawn", row: -2 });
            t.close();
            "#,
            &["--var", &format!("API_TOKEN={SECRET}")],
        );
        out.assert_code(0);
        let files = bundle_files(&out.out_dir);
        assert!(files.iter().any(|(f, _)| f.ends_with("report.html")));
        for (f, text) in &files {
            assert!(!text.contains(SECRET), "{SECRET} is drawn in {}", f.display());
        }
        let report = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
        assert!(report.contains("********"), "the mask is drawn where the secret was");
        assert!(!out.stdout.contains(SECRET) && !out.stderr.contains(SECRET));
        let v = rfs.cmd(repo.path()).arg("verify").arg(&out.out_dir).output().unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
        rfs.assert_no_leftovers();
    }

    // `sync_source(#{ rev: arg("TOKEN") })` with a secret var journaled
    // the rev raw in `source.refused`.
    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn a_secret_rev_is_redacted_in_source_refused(rfs: &Rfs) {
        let repo = Repo::new();
        let secret = "no-such-rev-s3cr3t-77";
        let out = rfs.run_with(
            repo.path(),
            r#"sync_source(#{ rev: arg("DEPLOY_TOKEN") });"#,
            &["--var", &format!("DEPLOY_TOKEN={secret}")],
        );
        assert_ne!(out.code, 0);
        let refused = out.entries("source.refused");
        assert_eq!(refused.len(), 1, "{}", out.stderr);
        assert!(
            refused[0]["reason"].as_str().unwrap().contains("[REDACTED]"),
            "{}",
            refused[0]
        );
        for (f, text) in bundle_files(&out.out_dir) {
            assert!(!text.contains(secret), "{secret} in {}", f.display());
        }
        assert!(!out.stderr.contains(secret), "{}", out.stderr);
        rfs.assert_no_leftovers();
    }
}
