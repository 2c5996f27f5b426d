//! One run lifecycle (issue #33): whatever starts a run — `rfs run`,
//! `rfs test`, `rfs bisect`, `rfs repl`, `rfs mcp`, `rfs run --watch`,
//! `rfs replay` — ends it the same way: sandbox torn down and verified
//! gone, journal closed, attestation sealed, report drawn. So `rfs verify`
//! passes on the bundle of every entry point, on every provider. (A bundle
//! left by `rfs repl` had no attestation, and `rfs verify` rejected it.)

mod common;
use common::*;

use std::io::{BufRead, Write};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

#[track_caller]
fn assert_verifies(rfs: &Rfs, dir: &Path, bundle: &Path, what: &str) {
    let (ok, text) = rfs_verify(rfs, dir, bundle);
    assert!(
        ok,
        "{what} ({}): rfs verify {}:\n{text}",
        rfs.prov.name(),
        bundle.display()
    );
    for f in ["attestation.intoto.json", "report.html", "EVIDENCE.md"] {
        assert!(bundle.join(f).is_file(), "{what}: no {f} in the bundle");
    }
}

fn repo_with_proof() -> Repo {
    let repo = Repo::new();
    repo.write("proofs/a.rhai", "step(\"a\", \"echo proof-a\");\n");
    repo.commit("proofs");
    repo
}

provider_tests! {
    fn rfs_run_bundle_verifies(rfs: &Rfs) {
        let repo = repo_with_proof();
        let out = rfs.run(repo.path(), "step(\"a\", \"echo run\");");
        out.assert_code(0);
        assert_verifies(rfs, repo.path(), &out.out_dir, "rfs run");
        rfs.assert_no_leftovers();
    }

    fn rfs_test_bundles_verify(rfs: &Rfs) {
        let repo = repo_with_proof();
        let suite = rfs.state.path().join("suite").join(uuid_like());
        let out = rfs.cmd(repo.path()).arg("test").arg("--out").arg(&suite).output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_verifies(rfs, repo.path(), &suite.join("proofs-a"), "rfs test");
        rfs.assert_no_leftovers();
    }

    fn rfs_bisect_bundle_verifies(rfs: &Rfs) {
        let repo = Repo::new();
        let good = repo.commit("good");
        repo.write("broken", "");
        repo.commit("bad");
        let proof = rfs.prepare("step(\"check\", \"test ! -e broken\");").0;
        let out_dir = rfs.state.path().join("bisect").join(uuid_like());
        let out = rfs
            .cmd(repo.path())
            .arg("bisect")
            .arg(&good)
            .arg("HEAD")
            .arg(&proof)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
        assert_verifies(rfs, repo.path(), &out_dir, "rfs bisect");
        rfs.assert_no_leftovers();
    }

    fn rfs_repl_bundle_verifies(rfs: &Rfs) {
        let repo = repo_with_proof();
        let out = rfs.repl(repo.path(), b"step(\"a\", \"echo repl\");\n", &[]);
        out.assert_code(0);
        assert_verifies(rfs, repo.path(), &out.out_dir, "rfs repl");
        rfs.assert_no_leftovers();
    }

    fn rfs_mcp_bundle_verifies(rfs: &Rfs) {
        let repo = repo_with_proof();
        let out_dir = rfs.state.path().join("mcp").join(uuid_like());
        let mut child = rfs
            .cmd(repo.path())
            .arg("mcp")
            .arg("--out")
            .arg(&out_dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let send = |stdin: &mut std::process::ChildStdin, msg: serde_json::Value| {
            writeln!(stdin, "{msg}").unwrap();
            stdin.flush().unwrap();
        };
        let mut answer = |id: i64| -> serde_json::Value {
            loop {
                let line = lines.next().expect("an answer").unwrap();
                let v: serde_json::Value = serde_json::from_str(&line).unwrap();
                if v["id"] == id {
                    return v;
                }
            }
        };
        send(&mut stdin, serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05",
            "capabilities": {},
            "clientInfo": {"name": "rfs-test", "version": "0"}
        }}));
        answer(0);
        send(&mut stdin, serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        send(&mut stdin, serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "step", "arguments": {"name": "a", "command": "echo mcp"}}}));
        let step = answer(1);
        assert_ne!(step["result"]["isError"], true, "{step}");
        send(&mut stdin, serde_json::json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "end", "arguments": {}}}));
        let end = answer(2);
        assert_ne!(end["result"]["isError"], true, "{end}");
        drop(stdin);
        let deadline = Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            assert!(Instant::now() < deadline, "rfs mcp did not exit");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "rfs mcp exited {status}");
        assert_verifies(rfs, repo.path(), &out_dir, "rfs mcp");
        rfs.assert_no_leftovers();
    }

    fn rfs_run_watch_bundle_verifies(rfs: &Rfs) {
        let repo = repo_with_proof();
        let (script, out_dir) = rfs.prepare("step(\"a\", \"echo watch\");");
        let child = rfs
            .cmd(repo.path())
            .arg("run")
            .arg(&script)
            .args(["--watch", "--out"])
            .arg(&out_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_journal(&out_dir, "step.end");
        sigint(&child);
        let out = wait_bounded(child, out_dir);
        assert_eq!(out.kinds().last().map(String::as_str), Some("run.end"));
        assert_verifies(rfs, repo.path(), &out.out_dir, "rfs run --watch");
        rfs.assert_no_leftovers();
    }

    fn rfs_replay_bundle_verifies(rfs: &Rfs) {
        let repo = repo_with_proof();
        let first = rfs.run(repo.path(), "step(\"a\", \"echo replay\");");
        first.assert_code(0);
        let replay = rfs.state.path().join("replay").join(uuid_like());
        let out = rfs
            .cmd(repo.path())
            .arg("replay")
            .arg(&first.out_dir)
            .arg("--out")
            .arg(&replay)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        assert_verifies(rfs, repo.path(), &replay, "rfs replay");
        rfs.assert_no_leftovers();
    }
}
