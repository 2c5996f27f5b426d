//! Follow-ups of issue #30: what the journal and the console say about a
//! run hold no secret and no live control character.
//!
//! - a secret `rev` that resolves is redacted in `source.resolved`, on
//!   the first bind and on a re-sync;
//! - `attach.assert`'s `screen_digest` is the digest of the redacted
//!   screen (as its snapshot and the recording show it), so it cannot be
//!   used to test guesses of a secret, and the report finds that screen;
//! - `rfs run`'s final error print makes the error's text inert.

mod common;
use common::*;

use sha2::Digest as _;
use std::path::Path;

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

#[test]
fn a_secret_rev_that_resolves_is_redacted_in_source_resolved_and_on_resync() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (first, next) = ("deploy-s3cr3t-first-71", "deploy-s3cr3t-next-72");
    repo.git(&["branch", first]);
    repo.write("v", "2\n");
    repo.commit("two");
    repo.git(&["branch", next]);
    let out = rfs.run_with(
        repo.path(),
        r#"sync_source(#{ rev: arg("DEPLOY_TOKEN") });
        step("at first", "test ! -e v");
        sync_source(#{ rev: arg("NEXT_TOKEN") });
        step("at next", "test -e v");"#,
        &[
            "--var",
            &format!("DEPLOY_TOKEN={first}"),
            "--var",
            &format!("NEXT_TOKEN={next}"),
        ],
    );
    out.assert_code(0);
    let resolved = out.entries("source.resolved");
    assert_eq!(resolved.len(), 2, "a bind and a re-sync: {resolved:?}");
    for r in &resolved {
        assert_eq!(r["rev"], "[REDACTED]", "{r}");
    }
    assert_eq!(out.entries("source.resync").len(), 1);
    for (f, text) in bundle_files(&out.out_dir) {
        for secret in [first, next] {
            assert!(!text.contains(secret), "{secret} in {}", f.display());
        }
    }
    for secret in [first, next] {
        assert!(!out.stdout.contains(secret) && !out.stderr.contains(secret));
    }
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

const SECRET: &str = "hunter22";

fn sha256(s: &str) -> String {
    hex::encode(sha2::Sha256::digest(s.as_bytes()))
}

#[test]
fn an_assert_screen_digest_is_of_the_redacted_screen_not_of_the_secret() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"
        let t = attach("sh");
        t.send("printf '%s\\n' " + arg("API_TOKEN") + "; echo drawn\n");
        assert_screen(t, #{ text: "drawn", row: -2 });
        t.close();
        "#,
        &["--var", &format!("API_TOKEN={SECRET}")],
    );
    out.assert_code(0);
    let a = &out.entries("attach.assert")[0];
    let digest = a["screen_digest"].as_str().unwrap();
    let snap =
        std::fs::read_to_string(out.out_dir.join(a["snapshot"]["path"].as_str().unwrap())).unwrap();
    let rows: Vec<&str> = snap
        .lines()
        .skip(1)
        .map(|l| l.split_once('|').unwrap().1)
        .collect();
    let text = rows.join("\n");
    assert!(text.contains("[REDACTED]"), "{snap}");
    // A guess of the secret does not give the journaled digest; the
    // redacted screen (its snapshot's rows) does.
    assert_ne!(sha256(&text.replace("[REDACTED]", SECRET)), digest);
    assert_eq!(sha256(&text), digest);
    // The report finds that screen in the (redacted) recording.
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    let at = html.find("id=\"session-1-assert-1\"").unwrap();
    let figure = &html[at..at + html[at..].find("</figure>").unwrap()];
    assert!(figure.contains("<svg"), "{figure}");
    assert!(figure.contains("[REDACTED]"), "{figure}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

#[test]
fn rfs_runs_final_error_print_shows_control_characters_inert() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"throw "boom \x1b]52;c;SGk=\x07 then\rover\n::error::gotcha";"#,
    );
    assert_ne!(out.code, 0);
    assert!(out.stderr.contains("boom"), "{}", out.stderr);
    for c in ['\u{1b}', '\u{7}', '\r'] {
        assert!(
            !out.stderr.contains(c),
            "{c:?} reached the console: {:?}",
            out.stderr
        );
    }
    assert!(
        !out.stderr.lines().any(|l| l.trim_start().starts_with("::")),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}
