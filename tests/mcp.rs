//! `rfs mcp` (issue #24): one session per MCP client over stdio, driven
//! here by the official Python SDK (`pip install mcp`; scripts/test.sh
//! installs it), a client no one here wrote. Every call is journaled,
//! refusals are tool errors with their reasons, secrets are redacted, and
//! a client that goes away mid-step leaves no sandbox behind.

mod common;
use common::*;

use serde_json::Value;

/// Whether the Python SDK is there; says so once when it is not (a
/// failure under `RFS_REQUIRE_MCP=1`, as scripts/test.sh sets).
fn python_sdk() -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", "import mcp"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var("RFS_REQUIRE_MCP").is_ok_and(|v| v == "1") {
            panic!("RFS_REQUIRE_MCP=1 but the Python MCP SDK is missing (pip install mcp; scripts/test.sh installs it)");
        }
        eprintln!("skipping rfs mcp tests: the Python MCP SDK is missing (pip install mcp)");
    }
    ok
}

fn client(rfs: &Rfs, repo: &Repo, mode: &str) -> std::process::Output {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp_client.py");
    let mut c = std::process::Command::new("timeout");
    c.arg("180")
        .arg("python3")
        .arg(script)
        .arg(rfs_bin())
        .arg(mode);
    c.current_dir(repo.path())
        .env("RFS_STATE_DIR", rfs.state.path())
        .env("RELAYFLOWS_SANDBOX_PROVIDER", rfs.prov.name());
    c.output().expect("python3 runs")
}

#[test]
fn an_mcp_client_drives_a_whole_session_and_every_call_is_journaled() {
    if !python_sdk() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let head = repo.head();
    let out = client(&rfs, &repo, "session");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let f: Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
    assert_eq!(
        f["tools"],
        serde_json::json!([
            "assert_screen",
            "attach",
            "end",
            "journal",
            "save",
            "screen",
            "send",
            "step",
            "sync"
        ])
    );
    assert_eq!(f["sync"]["commit"], head.as_str());
    assert_eq!(f["step"]["ok"], true);
    assert_eq!(f["step"]["stderr"], "to-err\n");
    assert!(
        f["step"]["stdout"].as_str().unwrap().contains("marker"),
        "{f}"
    );
    assert_eq!(f["failing_step"]["exit"], 4);
    assert_eq!(f["failing_step"]["ok"], false);
    // A refusal is a tool error whose text says what was refused and why.
    assert_eq!(f["refused"]["is_error"], true);
    let refused = f["refused"]["text"].as_str().unwrap();
    assert!(
        refused.starts_with("refused: ") && !refused.starts_with("refused: refused"),
        "{refused}"
    );
    assert!(
        refused.contains("escapes the synced source root"),
        "{refused}"
    );
    // Secrets: redacted in what the client sees and in the saved script.
    let secret = f["secret_step"].as_str().unwrap();
    assert!(
        secret.contains("token=[REDACTED]") && !secret.contains("hunter2"),
        "{secret}"
    );
    assert_eq!(f["assert"]["is_error"], false);
    assert_eq!(f["assert_fails"]["is_error"], true);
    assert!(
        f["assert_fails"]["text"]
            .as_str()
            .unwrap()
            .contains("from-the-terminal"),
        "the screen dump"
    );
    assert!(f["journal"]
        .as_array()
        .unwrap()
        .iter()
        .any(|l| l.as_str().unwrap().contains("\"kind\":\"attach.assert\"")));
    assert!(f["end"].as_str().unwrap().contains("verified gone"), "{f}");
    assert_eq!(f["after_end"]["is_error"], true);

    // The session is one verifiable bundle; its journal holds every call.
    let runs: Vec<_> = std::fs::read_dir(rfs.state.path().join("runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1);
    let bundle = runs[0].path();
    let journal = std::fs::read_to_string(bundle.join("journal.jsonl")).unwrap();
    assert!(!journal.contains("hunter2"));
    for kind in [
        "source.pin",
        "step.end",
        "refused",
        "attach.start",
        "cleanup.verified",
        "run.end",
    ] {
        assert!(
            journal.contains(&format!("\"kind\":\"{kind}\"")),
            "{kind} in {journal}"
        );
    }
    let v = rfs
        .cmd(repo.path())
        .arg("verify")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));

    // What `save` wrote (inside the repository) runs as it says, once
    // committed.
    let saved = repo.path().join("saved-by-mcp.rhai");
    let text = std::fs::read_to_string(&saved).unwrap();
    assert!(
        !text.contains("hunter2") && text.contains("[REDACTED]"),
        "{text}"
    );
    assert!(
        text.contains("let t1 = attach(\"sh\"") && !text.contains("never-shown"),
        "{text}"
    );
    repo.commit("the script rfs mcp saved");
    let ran = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(&saved)
        .output()
        .unwrap();
    assert!(
        ran.status.success(),
        "{}",
        String::from_utf8_lossy(&ran.stderr)
    );
    rfs.assert_no_leftovers();
}

/// A client that goes away while a step runs: the step is cancelled, the
/// run ends interrupted, and its sandbox is destroyed and verified gone.
#[test]
fn a_client_disconnecting_mid_step_leaves_nothing_behind() {
    if !python_sdk() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = client(&rfs, &repo, "disconnect");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"step_started\": true"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The server ends on its own once its stdin closes.
    let runs: Vec<_> = std::fs::read_dir(rfs.state.path().join("runs"))
        .unwrap()
        .flatten()
        .collect();
    let journal = runs[0].path().join("journal.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let text = loop {
        let t = std::fs::read_to_string(&journal).unwrap();
        if t.contains("\"kind\":\"run.end\"") || std::time::Instant::now() > deadline {
            break t;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(text.contains("\"outcome\":\"interrupted\""), "{text}");
    assert!(text.contains("\"kind\":\"cleanup.verified\""), "{text}");
    assert!(
        !process_running("sleep\u{0}60\u{0}"),
        "the step's process was left running"
    );
    rfs.assert_no_leftovers();
}
