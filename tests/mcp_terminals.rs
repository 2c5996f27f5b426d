//! `rfs mcp`'s terminals under one numbering, and `save` checking what the
//! session saw (issue #32, item 4). `attach` used to return terminal 0
//! while the journal, the recordings and the reports called it session 1,
//! and `terminal: 1` then failed with Rhai's own `Array index 1 out of
//! bounds`; `save` marked every step `allow_failure: true`, so the saved
//! script checked nothing. On every provider.
//!
//! The client speaks JSON-RPC over the real binary's stdio, line by line.

mod common;
use common::*;

use std::io::{BufRead as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{json, Value};

/// An `rfs mcp` process and its protocol.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    answers: mpsc::Receiver<Value>,
    held: Vec<Value>,
    next_id: i64,
}

/// A test that fails leaves no server behind.
impl Drop for Mcp {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

impl Mcp {
    fn start(rfs: &Rfs, dir: &Path) -> Mcp {
        let mut child = rfs
            .cmd(dir)
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("rfs mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut m = Mcp {
            stdin: child.stdin.take(),
            child,
            answers,
            held: vec![],
            next_id: 1,
        };
        m.send(json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "rfs-terminals-test", "version": "0"}
            }
        }));
        let a = m.answer(0);
        assert!(a["result"]["serverInfo"].is_object(), "{a}");
        m.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        m
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(&line).unwrap();
        w.flush().unwrap();
    }

    fn answer(&mut self, id: i64) -> Value {
        if let Some(i) = self.held.iter().position(|v| v["id"] == id) {
            return self.held.remove(i);
        }
        loop {
            let v = self
                .answers
                .recv_timeout(Duration::from_secs(120))
                .unwrap_or_else(|_| panic!("no answer to request {id} within 120 s"));
            if v["id"] == id {
                return v;
            }
            self.held.push(v);
        }
    }

    /// Call a tool: (is_error, text).
    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}
        }));
        let a = self.answer(id);
        let r = &a["result"];
        assert!(r.is_object(), "a tools/call result: {a}");
        let text = r["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| c["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        (r["isError"] == true, text)
    }

    /// A call that must succeed; its text.
    fn ok(&mut self, tool: &str, args: Value) -> String {
        let (err, text) = self.call(tool, args);
        assert!(!err, "{tool}: {text}");
        text
    }

    /// `end`, then the client leaves; the server exits 0.
    fn end(mut self) {
        let text = self.ok("end", json!({}));
        assert!(text.contains("verified gone"), "{text}");
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                assert_eq!(s.code(), Some(0));
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "rfs mcp did not exit within 120 s of its client leaving"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The one run folder a session made in the state dir.
fn only_run(rfs: &Rfs) -> PathBuf {
    let runs: Vec<_> = std::fs::read_dir(rfs.state.path().join("runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1, "one run");
    runs[0].path()
}

fn journal(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Open `sh` and wait for its prompt; the number `attach` gave.
fn attach_sh(m: &mut Mcp) -> i64 {
    let text = m.ok("attach", json!({"command": "sh", "cols": 80, "rows": 12}));
    let t: i64 = text.trim().parse().unwrap_or_else(|_| panic!("{text}"));
    m.ok(
        "assert_screen",
        json!({"terminal": t, "text": "$", "timeout": 30}),
    );
    t
}

provider_tests! {
    fn mcp_terminals_are_numbered_as_the_journal_numbers_them_and_a_wrong_number_names_the_open_ones(rfs: &Rfs) {
        let repo = Repo::new();
        let mut m = Mcp::start(rfs, repo.path());
        let (err, text) = m.call("screen", json!({"terminal": 1}));
        assert!(err, "{text}");
        assert!(
            text.contains("there is no terminal 1") && text.contains("attach"),
            "{text}"
        );
        let first = attach_sh(&mut m);
        assert_eq!(first, 1, "the first terminal is session 1, as the journal says");
        let second = attach_sh(&mut m);
        assert_eq!(second, 2);
        m.ok("send", json!({"terminal": first, "text": "echo in-one-$((40+2))\r"}));
        m.ok(
            "assert_screen",
            json!({"terminal": first, "text": "in-one-42", "timeout": 30}),
        );
        m.ok("send", json!({"terminal": second, "text": "echo in-two-$((40+3))\r"}));
        let screen = {
            m.ok(
                "assert_screen",
                json!({"terminal": second, "text": "in-two-43", "timeout": 30}),
            );
            m.ok("screen", json!({"terminal": second}))
        };
        assert!(screen.contains("in-two-43") && !screen.contains("in-one-42"), "{screen}");
        // A number no terminal has: an error naming the ones there are,
        // never Rhai's own text.
        for wrong in [0, 3, -1] {
            for (tool, args) in [
                ("screen", json!({"terminal": wrong})),
                ("send", json!({"terminal": wrong, "text": "x"})),
                ("assert_screen", json!({"terminal": wrong, "text": "x", "timeout": 1})),
            ] {
                let (err, text) = m.call(tool, args);
                assert!(err, "{tool} {wrong}: {text}");
                assert!(
                    text.contains(&format!("there is no terminal {wrong}"))
                        && text.contains("1 (`sh`), 2 (`sh`)"),
                    "{tool} {wrong}: {text}"
                );
                for rhai in ["Array index", "out of bounds", "line 1, position"] {
                    assert!(!text.contains(rhai), "{tool} {wrong}: {text}");
                }
            }
        }
        m.end();
        // The journal, the recordings and the evidence use the same numbers.
        let bundle = only_run(rfs);
        let starts: Vec<Value> = journal(&bundle)
            .into_iter()
            .filter(|e| e["kind"] == "attach.start")
            .map(|e| e["payload"]["session"].clone())
            .collect();
        assert_eq!(starts, vec![json!(1), json!(2)]);
        for n in [1, 2] {
            assert!(
                bundle.join(format!("terminal/session-{n}.cast")).is_file(),
                "recording of session {n}"
            );
        }
        rfs.assert_no_leftovers();
    }

    fn mcp_save_asserts_what_the_session_saw_succeed(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("needed.txt", "present\n");
        repo.commit("a file a step needs");
        let mut m = Mcp::start(rfs, repo.path());
        let step = m.ok("step", json!({"name": "needs", "command": "cat needed.txt"}));
        assert!(step.contains("\"ok\": true"), "{step}");
        let failing = m.ok("step", json!({"name": "probe", "command": "exit 4"}));
        assert!(failing.contains("\"exit\": 4"), "{failing}");
        let t = attach_sh(&mut m);
        m.ok("send", json!({"terminal": t, "text": "cat needed.txt; echo seen-$((6*7))\r"}));
        m.ok(
            "assert_screen",
            json!({"terminal": t, "text": "seen-42", "timeout": 30}),
        );
        let saved = m.ok("save", json!({"path": "replay.rhai"}));
        assert!(saved.contains("saved 6 calls"), "{saved}");
        m.end();

        let text = std::fs::read_to_string(repo.path().join("replay.rhai")).unwrap();
        // What succeeded must succeed again; what failed is allowed to.
        assert!(
            text.contains("step(\"needs\", \"cat needed.txt\");"),
            "{text}"
        );
        assert!(
            text.contains("(exit 4)")
                && text.contains("step(\"probe\", \"exit 4\", #{ allow_failure: true });"),
            "{text}"
        );
        assert_eq!(text.matches("allow_failure").count(), 1, "{text}");
        assert!(
            text.contains(&format!("let t{t} = attach(\"sh\""))
                && text.contains(&format!("send(t{t}, "))
                && text.contains(&format!("assert_screen(t{t}, #{{ text: \"seen-42\"")),
            "{text}"
        );
        repo.commit("the saved session");
        let out_ok = rfs.state.path().join("replay-ok");
        let ran = rfs
            .cmd(repo.path())
            .args(["run", "replay.rhai", "--out"])
            .arg(&out_ok)
            .output()
            .unwrap();
        assert!(ran.status.success(), "{}", String::from_utf8_lossy(&ran.stderr));

        // The saved script checks: once the step that succeeded fails, the
        // replay fails at it.
        std::fs::remove_file(repo.path().join("needed.txt")).unwrap();
        repo.commit("the file the step needs is gone");
        let out_bad = rfs.state.path().join("replay-bad");
        let ran = rfs
            .cmd(repo.path())
            .args(["run", "replay.rhai", "--out"])
            .arg(&out_bad)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&ran.stderr);
        assert!(!ran.status.success(), "{stderr}");
        assert!(stderr.contains("step `needs` failed"), "{stderr}");
        rfs.assert_no_leftovers();
    }
}
