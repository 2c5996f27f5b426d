//! `rfs mcp` holds the trust model against its client (issue #30): what an
//! MCP client sends can only narrow what the person who started rfs
//! allowed. `save` writes only inside the repository (never outside it,
//! into .git or the run's own evidence, through a symlink or onto a
//! special file); `end` while a step runs cancels it and the bundle still
//! verifies; input is bounded and malformed input is answered; a client
//! that leaves before initializing starts nothing; screens are redacted.
//!
//! The client here speaks JSON-RPC over the real binary's stdio line by
//! line, so it can also send what no SDK would (a 17 MiB line, broken
//! JSON) and see the exit code and stderr.

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
    stderr: Option<std::thread::JoinHandle<String>>,
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

/// How the server ended.
struct Ended {
    code: Option<i32>,
    stderr: String,
}

impl Mcp {
    fn start(rfs: &Rfs, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Mcp {
        let mut child = rfs
            .cmd(dir)
            .arg("mcp")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("rfs mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("rfs mcp wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(v).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut stderr, &mut s);
            s
        });
        Mcp {
            stdin: child.stdin.take(),
            child,
            answers,
            held: vec![],
            stderr: Some(stderr),
        }
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().expect("stdin open");
        w.write_all(bytes).unwrap();
        w.flush().unwrap();
    }

    fn send(&mut self, v: Value) {
        let mut line = serde_json::to_vec(&v).unwrap();
        line.push(b'\n');
        self.send_raw(&line);
    }

    /// The next message from the server (bounded).
    fn next(&mut self) -> Value {
        if !self.held.is_empty() {
            return self.held.remove(0);
        }
        self.answers
            .recv_timeout(Duration::from_secs(120))
            .expect("rfs mcp answers within 120 s")
    }

    /// The answer to request `id` (others are kept for later).
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

    fn initialize(&mut self) {
        self.send(json!({
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "rfs-trust-test", "version": "0"}
            }
        }));
        let a = self.answer(0);
        assert!(a["result"]["serverInfo"].is_object(), "{a}");
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    fn request_call(&mut self, id: i64, tool: &str, args: Value) {
        self.send(json!({
            "jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": tool, "arguments": args}
        }));
    }

    /// Call a tool: (is_error, text).
    fn call(&mut self, id: i64, tool: &str, args: Value) -> (bool, String) {
        self.request_call(id, tool, args);
        result_of(&self.answer(id))
    }

    /// Close stdin (the client leaves) and wait (bounded) for the exit.
    fn close(mut self) -> Ended {
        drop(self.stdin.take());
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("rfs mcp did not exit within 120 s of its client leaving");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        Ended {
            code: status.code(),
            stderr: self.stderr.take().unwrap().join().unwrap(),
        }
    }
}

fn result_of(a: &Value) -> (bool, String) {
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

/// The one run folder a session made in the state dir.
fn only_run(rfs: &Rfs) -> PathBuf {
    let runs: Vec<_> = std::fs::read_dir(rfs.state.path().join("runs"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(runs.len(), 1, "one run");
    runs[0].path()
}

fn verify(rfs: &Rfs, repo: &Repo, bundle: &Path) -> std::process::Output {
    rfs.cmd(repo.path())
        .arg("verify")
        .arg(bundle)
        .output()
        .unwrap()
}

fn journal_kinds(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// A session ended by `end` and then by the client leaving: exit 0.
fn end_cleanly(mut m: Mcp, id: i64) -> Ended {
    let (err, text) = m.call(id, "end", json!({}));
    assert!(!err, "{text}");
    let ended = m.close();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    ended
}

// --- 1. save writes only inside the repository ---------------------------

#[test]
fn mcp_save_to_an_absolute_path_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("written-by-an-agent.rhai");
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    let (err, text) = m.call(1, "save", json!({"path": target, "overwrite": true}));
    assert!(err, "{text}");
    assert!(
        text.contains("refused")
            && text.contains("absolute")
            && text.contains(&*target.to_string_lossy()),
        "the refusal names the path and why: {text}"
    );
    assert!(!target.exists(), "nothing was written outside");
    // Absolute, even into the repository: a client gives relative paths.
    let inside = repo.path().join("inside.rhai");
    let (err, text) = m.call(2, "save", json!({"path": inside}));
    assert!(err && text.contains("absolute"), "{text}");
    assert!(!inside.exists());
    end_cleanly(m, 3);
    rfs.assert_no_leftovers();
}

#[test]
fn mcp_save_with_dotdot_out_of_the_repository_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let escaped = repo.path().parent().unwrap().join(format!(
        "{}-escaped.rhai",
        repo.path().file_name().unwrap().to_string_lossy()
    ));
    let rel = format!("../{}", escaped.file_name().unwrap().to_string_lossy());
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    let (err, text) = m.call(1, "save", json!({"path": rel, "overwrite": true}));
    assert!(err, "{text}");
    assert!(
        text.contains("outside the repository") && text.contains(&rel),
        "{text}"
    );
    assert!(!escaped.exists(), "nothing was written outside");
    // From a subfolder, `..` that stays inside the repository is fine.
    repo.write("sub/keep.txt", "x\n");
    repo.commit("a subfolder");
    drop(m.close());
    let mut m = Mcp::start(&rfs, &repo.path().join("sub"), &[], &[]);
    m.initialize();
    let (err, text) = m.call(1, "save", json!({"path": "../from-sub.rhai"}));
    assert!(!err, "{text}");
    assert!(repo.path().join("from-sub.rhai").is_file());
    end_cleanly(m, 2);
    rfs.assert_no_leftovers();
}

#[test]
fn mcp_save_into_the_sessions_own_journal_is_refused_and_the_bundle_verifies() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = repo.path().join("evidence");
    let mut m = Mcp::start(&rfs, repo.path(), &["--out", "evidence"], &[]);
    m.initialize();
    let (err, text) = m.call(1, "step", json!({"name": "hello", "command": "echo hi"}));
    assert!(!err, "{text}");
    let before = std::fs::read(out.join("journal.jsonl")).unwrap();
    for (id, path) in [(2, "evidence/journal.jsonl"), (3, "evidence/EVIDENCE.md")] {
        let (err, text) = m.call(id, "save", json!({"path": path, "overwrite": true}));
        assert!(err, "{text}");
        assert!(
            text.contains("output folder") && text.contains(path),
            "{text}"
        );
    }
    let after = std::fs::read(out.join("journal.jsonl")).unwrap();
    assert!(
        after.starts_with(&before),
        "the journal was not overwritten"
    );
    let ended = end_cleanly(m, 4);
    assert!(ended.stderr.is_empty(), "{}", ended.stderr);
    let v = verify(&rfs, &repo, &out);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    rfs.assert_no_leftovers();
}

#[test]
fn mcp_save_into_git_hooks_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    for (id, path) in [(1, ".git/hooks/pre-commit"), (2, ".git/config")] {
        let (err, text) = m.call(id, "save", json!({"path": path, "overwrite": true}));
        assert!(
            err && text.contains(".git") && text.contains(path),
            "{text}"
        );
    }
    assert!(!repo.path().join(".git/hooks/pre-commit").exists());
    end_cleanly(m, 3);
}

#[test]
fn mcp_save_through_a_symlink_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("victim.rhai"), "original\n").unwrap();
    // Committed links: a folder link and a file link, both to outside.
    repo.symlink("linked-dir", &outside.path().to_string_lossy());
    repo.symlink(
        "linked-file.rhai",
        &outside.path().join("victim.rhai").to_string_lossy(),
    );
    repo.commit("links");
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    let (err, text) = m.call(1, "save", json!({"path": "linked-dir/new.rhai"}));
    assert!(
        err && text.contains("symlink") && text.contains("linked-dir"),
        "{text}"
    );
    assert!(!outside.path().join("new.rhai").exists());
    let (err, text) = m.call(
        2,
        "save",
        json!({"path": "linked-file.rhai", "overwrite": true}),
    );
    assert!(err && text.contains("symlink"), "{text}");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("victim.rhai")).unwrap(),
        "original\n"
    );
    end_cleanly(m, 3);
}

#[test]
fn mcp_save_onto_a_fifo_is_refused_without_blocking_the_server() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let fifo = repo.path().join("pipe.rhai");
    nix_mkfifo(&fifo);
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    let started = std::time::Instant::now();
    let (err, text) = m.call(1, "save", json!({"path": "pipe.rhai", "overwrite": true}));
    assert!(
        err && text.contains("FIFO") && text.contains("pipe.rhai"),
        "{text}"
    );
    // The server goes on answering.
    let (err, text) = m.call(2, "journal", json!({"tail": 1}));
    assert!(!err && text.contains("\"kind\""), "{text}");
    assert!(started.elapsed() < Duration::from_secs(30));
    // A socket is refused the same way.
    let _listener = std::os::unix::net::UnixListener::bind(repo.path().join("sock.rhai")).unwrap();
    let (err, text) = m.call(3, "save", json!({"path": "sock.rhai", "overwrite": true}));
    assert!(err && text.contains("socket"), "{text}");
    end_cleanly(m, 4);
}

fn nix_mkfifo(p: &Path) {
    let ok = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap()
        .success();
    assert!(ok, "mkfifo");
}

#[test]
fn mcp_save_overwriting_replaces_the_file_and_never_writes_through_a_hard_link() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let outside = tempfile::tempdir_in(repo.path().parent().unwrap()).unwrap();
    let other = outside.path().join("other-name.rhai");
    std::fs::write(&other, "kept\n").unwrap();
    // Same filesystem: a hard link inside the repository to a file outside.
    std::fs::hard_link(&other, repo.path().join("saved.rhai")).unwrap();
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    let (err, text) = m.call(1, "save", json!({"path": "saved.rhai"}));
    assert!(err && text.contains("overwrite"), "{text}");
    let (err, text) = m.call(2, "save", json!({"path": "saved.rhai", "overwrite": true}));
    assert!(!err, "{text}");
    assert!(std::fs::read_to_string(repo.path().join("saved.rhai"))
        .unwrap()
        .contains("Saved by rfs mcp"));
    assert_eq!(std::fs::read_to_string(&other).unwrap(), "kept\n");
    end_cleanly(m, 3);
}

#[test]
fn an_mcp_session_whose_sealing_fails_exits_non_zero_and_says_so() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.state.path().join("out-sealing");
    let mut m = Mcp::start(&rfs, repo.path(), &["--out", &out.to_string_lossy()], &[]);
    m.initialize();
    let (err, text) = m.call(1, "step", json!({"name": "hello", "command": "true"}));
    assert!(!err, "{text}");
    // Something outside rfs takes the journal's place: it cannot be sealed.
    std::fs::rename(out.join("journal.jsonl"), out.join("moved.jsonl")).unwrap();
    std::fs::create_dir(out.join("journal.jsonl")).unwrap();
    let (err, text) = m.call(2, "end", json!({}));
    assert!(err, "the end says the evidence is incomplete: {text}");
    assert!(text.contains("sealing its evidence failed"), "{text}");
    let ended = m.close();
    assert_eq!(ended.code, Some(5), "{}", ended.stderr);
    assert!(
        ended.stderr.contains("sealing its evidence failed"),
        "{}",
        ended.stderr
    );
    rfs.assert_no_leftovers();
}

// --- 2. end while a step runs ---------------------------------------------

#[test]
fn mcp_end_while_a_step_runs_cancels_it_and_the_bundle_verifies() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    m.request_call(1, "step", json!({"name": "long", "command": "sleep 61"}));
    let bundle = {
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        loop {
            let runs = rfs.state.path().join("runs");
            if runs.is_dir() && std::fs::read_dir(&runs).unwrap().count() == 1 {
                break only_run(&rfs);
            }
            assert!(std::time::Instant::now() < deadline, "no run folder");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for_journal(&bundle, "step.start");
    let (err, text) = m.call(2, "end", json!({}));
    assert!(!err, "{text}");
    assert!(
        text.contains("interrupted") && text.contains("cancelled"),
        "{text}"
    );
    // The step's own answer: it did not complete.
    let (err, text) = result_of(&m.answer(1));
    assert!(err, "the cancelled step is an error: {text}");
    let ended = m.close();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    let journal = journal_kinds(&bundle);
    let last = journal.last().unwrap();
    assert_eq!(
        last["kind"], "run.end",
        "nothing is journaled after run.end"
    );
    assert_eq!(last["payload"]["outcome"], "interrupted", "{last}");
    assert!(journal.iter().any(|e| e["kind"] == "cleanup.verified"));
    let v = verify(&rfs, &repo, &bundle);
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
    assert!(
        !process_running("sleep\u{0}61"),
        "the step's process was left running"
    );
    rfs.assert_no_leftovers();
}

// --- 3. bounds on input ----------------------------------------------------

#[test]
fn mcp_a_line_over_16_mib_gets_an_error_answer_and_the_session_goes_on() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.initialize();
    let mut huge = br#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"step","arguments":{"name":"x","command":""#.to_vec();
    huge.extend(std::iter::repeat_n(b'a', 17 * 1024 * 1024));
    huge.extend_from_slice(b"\"}}}\n");
    m.send_raw(&huge);
    let a = m.next();
    assert_eq!(a["error"]["code"], -32600, "{a}");
    let msg = a["error"]["message"].as_str().unwrap();
    assert!(msg.contains("16 MiB") && msg.contains("limit"), "{msg}");
    // The next message is read as usual.
    m.send(json!({"jsonrpc": "2.0", "id": 8, "method": "tools/list"}));
    let a = m.answer(8);
    assert!(a["result"]["tools"].is_array(), "{a}");
    end_cleanly(m, 9);
}

#[test]
fn mcp_malformed_json_gets_a_parse_error_answer() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    // Before the session and during it.
    m.send_raw(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"method\": \n");
    let a = m.next();
    assert_eq!(a["error"]["code"], -32700, "{a}");
    assert!(a["id"].is_null(), "{a}");
    m.initialize();
    m.send_raw(b"not json at all\n");
    let a = m.next();
    assert_eq!(a["error"]["code"], -32700, "{a}");
    assert!(
        a["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Parse error"),
        "{a}"
    );
    let (err, text) = m.call(2, "journal", json!({"tail": 1}));
    assert!(!err, "{text}");
    end_cleanly(m, 3);
}

// --- 4. a client that leaves before initialize ------------------------------

#[test]
fn mcp_a_client_closing_before_initialize_exits_zero_quietly() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let m = Mcp::start(&rfs, repo.path(), &[], &[]);
    let ended = m.close();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    assert!(ended.stderr.is_empty(), "quietly: {}", ended.stderr);
    let runs = rfs.state.path().join("runs");
    assert!(
        !runs.exists() || std::fs::read_dir(&runs).unwrap().count() == 0,
        "nothing started, so no run folder"
    );
    // Also after the initialize request, before the initialized notification.
    let mut m = Mcp::start(&rfs, repo.path(), &[], &[]);
    m.send(json!({
        "jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "0"}}
    }));
    let _ = m.answer(0);
    let ended = m.close();
    assert_eq!(ended.code, Some(0), "{}", ended.stderr);
    rfs.assert_no_leftovers();
}

// --- 5. screen is redacted ----------------------------------------------------

#[test]
fn mcp_screen_redacts_secrets() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "secrets = [\"DEPLOY_WORD\"]\n");
    repo.commit("a secret by rfs.toml");
    let mut m = Mcp::start(
        &rfs,
        repo.path(),
        &["--var", "API_TOKEN=vartok-8841", "--secret", "DEPLOY_WORD"],
        &[
            ("DEPLOY_WORD", "tomlword-5512"),
            ("OTHER_SERVICE_TOKEN", "envtok-7730"),
        ],
    );
    m.initialize();
    let (err, text) = m.call(
        1,
        "attach",
        json!({"command": "sh", "cols": 100, "rows": 10}),
    );
    assert!(!err, "{text}");
    let t: i64 = text.trim().parse().unwrap();
    // Each secret is made in the sandbox, so only the output holds it whole.
    let (err, text) = m.call(
        2,
        "send",
        json!({"terminal": t, "text": "printf '%s-%s %s-%s %s-%s all-%s\\n' vartok 8841 tomlword 5512 envtok 7730 shown\r"}),
    );
    assert!(!err, "{text}");
    let (err, text) = m.call(
        3,
        "assert_screen",
        json!({"terminal": t, "text": "all-shown", "timeout": 30}),
    );
    assert!(!err, "{text}");
    let (err, screen) = m.call(4, "screen", json!({"terminal": t}));
    assert!(!err, "{screen}");
    for secret in ["vartok-8841", "tomlword-5512", "envtok-7730"] {
        assert!(!screen.contains(secret), "{secret} on the screen: {screen}");
    }
    assert!(
        screen.matches("[REDACTED]").count() >= 3 && screen.contains("all-shown"),
        "{screen}"
    );
    end_cleanly(m, 5);
    rfs.assert_no_leftovers();
}

/// `rfs mcp` takes the person's ceilings and the repository's rfs.toml
/// `[limits]` as `rfs run` does: a client has no way to ask for more.
#[test]
fn mcp_sessions_get_the_persons_ceilings_and_the_repositorys_limits() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "[limits]\npids = 24\n");
    repo.commit("limits");
    let mut m = Mcp::start(&rfs, repo.path(), &["--max-memory", "64M"], &[]);
    m.initialize();
    let (err, text) = m.call(1, "step", json!({"name": "hello", "command": "echo hi"}));
    assert!(!err, "{text}");
    end_cleanly(m, 2);
    let placed = journal_kinds(&only_run(&rfs))
        .into_iter()
        .find(|e| e["kind"] == "placement")
        .expect("a placement");
    let limits = &placed["payload"]["isolation"]["limits"]["enforced"];
    let by = |kind: &str| {
        let l = limits
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["kind"] == kind);
        l.map(|l| {
            (
                l["value"].as_u64().unwrap(),
                l["by"].as_str().unwrap().to_owned(),
            )
        })
    };
    assert_eq!(by("pids"), Some((24, "rfs.toml".into())), "{limits}");
    assert_eq!(
        by("memory"),
        Some((64 << 20, "--max-memory flag".into())),
        "{limits}"
    );
    rfs.assert_no_leftovers();
}
