//! The worked example of `book/src/sharing-evidence.md`, run as written:
//! its `sh worked-example` blocks, in order, in one bash (`set -eu`), in a
//! fresh repository with the chapter's `proof.rhai` committed, a temporary
//! HOME and the real `rfs` on PATH. Its replay uses Docker.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

/// The fenced blocks of `chapter` whose info string is exactly `info`.
fn blocks(chapter: &str, info: &str) -> Vec<String> {
    let mut out = vec![];
    let mut cur: Option<String> = None;
    for line in chapter.lines() {
        match (&mut cur, line.strip_prefix("```")) {
            (None, Some(i)) if i.trim() == info => cur = Some(String::new()),
            (Some(_), Some("")) => out.push(cur.take().unwrap()),
            (Some(b), _) => {
                b.push_str(line);
                b.push('\n');
            }
            _ => {}
        }
    }
    out
}

#[test]
fn sharing_evidence_worked_example_runs_as_written() {
    if docker_missing() {
        return;
    }
    ensure_docker_image();
    let chapter = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/sharing-evidence.md"),
    )
    .unwrap();
    let proof = blocks(&chapter, "rhai");
    assert_eq!(proof.len(), 1, "one proof in the chapter");
    let shell = blocks(&chapter, "sh worked-example");
    assert_eq!(shell.len(), 3, "the three steps of the worked example");

    let repo = Repo::new();
    repo.write("proof.rhai", &proof[0]);
    repo.commit("the proof");
    let home = tempfile::tempdir().unwrap();
    let state = tempfile::tempdir().unwrap();
    let bin_dir = rfs_bin().parent().unwrap().to_path_buf();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let script = format!("set -eu\n{}", shell.join("\n"));
    let o = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .current_dir(repo.path())
        .env("HOME", home.path())
        .env("PATH", path)
        .env("RFS_STATE_DIR", state.path())
        .env("RFS_DOCKER_IMAGE", DOCKER_TEST_IMAGE)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("RFS_SIGNING_KEY")
        .env_remove("RELAYFLOWS_SANDBOX_PROVIDER")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "the worked example failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
    );
    let all = format!("{stdout}{stderr}");
    for expected in [
        "Good \"rfs\" signature for ci@example.com with ED25519 key SHA256:",
        "ok: signature: valid SSH signature (namespace rfs) over journal.jsonl by ci@example.com",
        "ok: attestation: in-toto Statement matches the journal (2 steps), DSSE signature valid",
        "evidence: verified",
        "all 2 steps match",
    ] {
        assert!(all.contains(expected), "missing {expected:?} in\n{all}");
    }
    let replayed = repo.path().join("replayed/journal.jsonl");
    let first = std::fs::read_to_string(replayed).unwrap();
    let start: serde_json::Value = serde_json::from_str(first.lines().next().unwrap()).unwrap();
    assert_eq!(start["payload"]["provider"], "docker");
    assert!(start["payload"]["replay_of"]["run_id"].is_string());
}
