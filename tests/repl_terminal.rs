//! `rfs repl` end to end through a real PTY (the terminal session rfs
//! itself uses for attach()/assert_screen()): multi-line input, typeahead
//! and pastes while a step runs, tab completion, Ctrl-C during a long step,
//! meta-commands, `:save` replayed by `rfs run`, Ctrl-D cleanup.

mod common;
use common::*;

use std::path::PathBuf;
use std::time::Duration;

use rfs::provider::local::pty::spawn_local_pty;
use rfs::provider::PtyRequest;
use rfs::terminal::{Pattern, SessionOptions, TerminalSession};

const COLS: u16 = 140;
const ROWS: u16 = 60;

struct Repl {
    s: TerminalSession,
    out_dir: PathBuf,
}

async fn start(rfs: &Rfs, repo: &Repo, extra: &[&str]) -> Repl {
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let mut argv = vec![
        rfs_bin().display().to_string(),
        "repl".into(),
        "--out".into(),
        out_dir.display().to_string(),
    ];
    argv.extend(extra.iter().map(|s| s.to_string()));
    let req = PtyRequest {
        argv,
        cwd: repo.path().display().to_string(),
        env: vec![
            ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".into(), rfs.state.path().display().to_string()),
            ("TERM".into(), "xterm-256color".into()),
            ("LANG".into(), "C.UTF-8".into()),
            (
                "RFS_STATE_DIR".into(),
                rfs.state.path().display().to_string(),
            ),
            ("RELAYFLOWS_SANDBOX_PROVIDER".into(), "local".into()),
        ],
        cols: COLS,
        rows: ROWS,
    };
    let channel = spawn_local_pty(&req).await.expect("spawn rfs repl");
    let s = TerminalSession::start(
        &tokio::runtime::Handle::current(),
        channel,
        SessionOptions::new(COLS, ROWS),
    )
    .expect("session");
    let r = Repl { s, out_dir };
    r.expect("rfs> ").await;
    r
}

impl Repl {
    async fn expect(&self, text: &str) -> String {
        self.expect_within(text, 20.0).await
    }

    async fn expect_within(&self, text: &str, secs: f64) -> String {
        match self
            .s
            .wait_for(&Pattern::text(text).timeout(Duration::from_secs_f64(secs)))
            .await
        {
            Ok(o) => o.screen.text(),
            Err(e) => panic!("{e}"),
        }
    }

    async fn expect_re(&self, re: &str) -> String {
        match self
            .s
            .wait_for(&Pattern::regex(re).unwrap().timeout(Duration::from_secs(20)))
            .await
        {
            Ok(o) => o.screen.text(),
            Err(e) => panic!("{e}"),
        }
    }

    /// Wait for an idle prompt (the last line is the prompt, unchanged
    /// for a moment).
    async fn idle(&self) {
        let p = Pattern::regex(r"^rfs> ?$")
            .unwrap()
            .on_row(-1)
            .stable_for(Duration::from_millis(300))
            .timeout(Duration::from_secs(20));
        if let Err(e) = self.s.wait_for(&p).await {
            panic!("{e}");
        }
    }

    fn send(&self, text: &str) {
        self.s.send(text).unwrap();
    }

    /// Ctrl-D at an empty prompt; the session must end by itself.
    async fn quit(&self) -> Option<i32> {
        self.idle().await;
        self.send("\x04");
        self.s
            .wait_exit(Duration::from_secs(60))
            .await
            .expect("repl exits")
            .exit
    }

    fn journal_kinds(&self) -> Vec<String> {
        std::fs::read_to_string(self.out_dir.join("journal.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                v["kind"].as_str().unwrap().to_owned()
            })
            .collect()
    }
}

/// The provider's inventory, read off the test's runtime thread.
fn leftovers(rfs: &Rfs) -> Vec<String> {
    std::thread::scope(|s| s.spawn(|| rfs.leftovers()).join().unwrap())
}

#[track_caller]
fn no_leftovers(rfs: &Rfs) {
    let left = leftovers(rfs);
    assert!(left.is_empty(), "sandboxes left behind: {left:?}");
}

fn screen_lines_after(screen: &str, marker: &str) -> Vec<String> {
    let start = screen.find(marker).unwrap_or(0);
    screen[start..].lines().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_bracket_continues_on_next_line_and_invalid_input_is_reported_at_once() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("let xs = [\r");
    r.expect("...> ").await;
    r.send("10, 20,\r");
    r.send("12];\r");
    r.send("let m = #{ total: xs.reduce(|sum, v| sum + v, 0),\r");
    r.send("  note: `two\r");
    r.send("lines` };\r");
    r.send("m\r");
    let screen = r.expect("total: 42,").await;
    assert!(screen.contains("  note: \"two\\nlines\","), "{screen}");
    // Complete but invalid: diagnosed at once, no continuation prompt.
    r.send("let y = 1 1;\r");
    let screen = r.expect("× ").await;
    let after = screen_lines_after(&screen, "let y = 1 1;");
    assert!(after.iter().all(|l| !l.starts_with("...>")), "{screen}");
    r.send("print(`after=${xs.len()}`)\r");
    r.expect("after=3").await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typeahead_and_pastes_while_a_step_runs_are_not_lost_and_run_in_order() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("step(\"slow\", \"sleep 2; echo slept\");\r");
    r.expect("rfs: step `slow` in").await;
    // Typed while the step runs (the terminal holds it).
    r.send("let a = 40;\rlet b = a + 1;\r");
    // A bracketed paste of several lines, also while the step runs.
    r.send("\x1b[200~b += 1;\rprint(`order=${a},${b}`);\r\x1b[201~\r");
    let screen = r.expect("order=40,42").await;
    let slept = screen.find("[slow] slept").expect("step output");
    let order = screen.find("order=40,42").unwrap();
    assert!(slept < order, "{screen}");
    // A paste at an idle prompt (no bracketed paste): every line runs.
    r.send("let c = 1;\rc += 1;\rc += 1;\rprint(`c=${c}`);\r");
    r.expect("c=3").await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_completes_primitives_members_modules_and_commands() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    // A primitive.
    r.send("let sb = sandb\t");
    r.expect("let sb = sandbox").await;
    r.send("();\r");
    // A member of a value rfs returned.
    r.send("print(`p=${sb.provi\t");
    r.expect("sb.provider").await;
    r.send("}`);\r");
    r.expect("p=local").await;
    // A stdlib module inside import "…".
    r.send("import \"rfs/ass\t");
    r.expect("import \"rfs/assert").await;
    r.send("\" as check;\r");
    r.send("check::eq(1, 1); print(\"imported\");\r");
    r.expect("imported").await;
    // The alias stays imported for later inputs.
    r.send("check::eq(2, 2); print(\"still-imported\");\r");
    r.expect("still-imported").await;
    // A meta-command.
    r.send(":jour\t");
    r.expect(":journal").await;
    r.send(" 3\r");
    r.expect_re(r"#\d+ +\d\d:\d\d:\d\d (print|sandbox|placement)")
        .await;
    // A variable in scope.
    r.send("let unusual_name = 7;\r");
    r.send("unusual_n\t");
    r.expect("unusual_name").await;
    r.send("\r");
    r.expect_re(r"(?m)^7$").await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_long_step_cancels_it_and_keeps_the_session() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("let before = sandbox().id;\r");
    r.send("step(\"long\", \"sleep 61\");\r");
    r.expect("rfs: step `long` in").await;
    let t = std::time::Instant::now();
    r.send("\x03");
    r.expect("interrupted").await;
    assert!(t.elapsed() < Duration::from_secs(20));
    // Same session, same sandbox, steps run again.
    r.send("print(`same=${sandbox().id == before}`);\r");
    r.expect("same=true").await;
    // The cancelled command is gone, not left running in the sandbox.
    r.send("step(\"gone\", \"if ps -eo args | grep -q '^[s]leep 61'; then echo sleep-still-running; else echo sleep-gone; fi\");\r");
    r.expect("[gone] sleep-").await;
    r.idle().await;
    let screen = r.s.screen().text();
    assert!(screen.contains("[gone] sleep-gone"), "{screen}");
    r.send("step(\"again\", \"echo again-ok\");\r");
    r.expect("[again] again-ok").await;
    assert_eq!(r.quit().await, Some(0));
    let kinds = r.journal_kinds();
    assert_eq!(kinds.iter().filter(|k| *k == "placement").count(), 1);
    assert!(kinds.contains(&"cleanup.verified".to_string()), "{kinds:?}");
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn save_writes_a_script_that_check_accepts_and_run_reproduces() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("let pin = sync_source();\r");
    r.expect("rfs: synced commit").await;
    r.send("fn shout(s) { s.to_upper() }\r");
    r.send("step(\"fails\", \"exit 3\")\r");
    r.expect("exit 3").await;
    r.send("let r = step(\"greet\", \"cat reproducer-marker.txt\") // the marker\r");
    r.expect("[greet] marker").await;
    r.send("print(`saved-${shout(r.stdout.trimmed())}-${pin.commit}`)\r");
    r.expect("saved-MARKER-").await;
    r.send(":sandbox\r");
    r.expect_re(r"source +commit [0-9a-f]{40}").await;
    let file = rfs.state.path().join("saved.rhai");
    r.send(&format!(":save {}\r", file.display()));
    r.expect("saved 4 inputs").await;
    // Refuses to overwrite without `!`.
    r.send(&format!(":save {}\r", file.display()));
    r.expect(":save! ").await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);

    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.starts_with("// Saved from `rfs repl` by rfs "),
        "{text}"
    );
    assert!(text.contains("// provider: local"), "{text}");
    assert!(
        text.contains(&format!("// commit: {}", repo.head())),
        "{text}"
    );
    let run_id = std::fs::read_to_string(r.out_dir.join("journal.jsonl"))
        .unwrap()
        .lines()
        .next()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["payload"]["run_id"].clone())
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap();
    assert!(text.contains(&format!("// run: {run_id}\n")), "{text}");
    assert!(
        !text.contains("exit 3"),
        "the failed input is not saved: {text}"
    );
    let check = rfs
        .cmd(repo.path())
        .arg("check")
        .arg(&file)
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    let out = rfs.run(repo.path(), &text);
    out.assert_code(0);
    assert!(
        out.stdout
            .contains(&format!("saved-MARKER-{}", repo.head())),
        "{}",
        out.stdout
    );
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_d_destroys_the_sandbox_and_verifies_it_gone_and_keep_keeps_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("let r = step(\"one\", \"echo $RELAYFLOWS_SANDBOX_ID\");\r");
    r.send("r\r");
    // Pretty-printed step result.
    r.expect_re(r"step ok: exit 0, \d+ ms").await;
    r.expect("  stdout:").await;
    assert_eq!(leftovers(&rfs).len(), 1);
    r.send("attach(\"sh\")\r");
    r.send(":screen\r");
    r.expect("session 1 `sh` (live)").await;
    r.expect("cursor at row").await;
    assert_eq!(r.quit().await, Some(0));
    let kinds = r.journal_kinds();
    assert!(kinds.contains(&"cleanup.verified".to_string()), "{kinds:?}");
    assert_eq!(kinds.last().map(String::as_str), Some("run.end"));
    no_leftovers(&rfs);

    // --keep: the sandbox stays and the session says how to remove it.
    let r = start(&rfs, &repo, &["--keep"]).await;
    r.send("step(\"one\", \"true\");\r");
    r.expect("step `one` ok").await;
    r.send(":quit\r");
    r.s.wait_exit(Duration::from_secs(60)).await.unwrap();
    let screen = r.s.screen().text();
    assert!(screen.contains("rfs gc"), "{screen}");
    assert_eq!(leftovers(&rfs).len(), 1);
    let gc = rfs.cmd(repo.path()).args(["gc"]).output().unwrap();
    assert!(gc.status.success(), "{gc:?}");
    no_leftovers(&rfs);
}

/// The pid of the `rfs repl` writing to `out_dir` (unique in its argv).
fn repl_pid(out_dir: &std::path::Path) -> i32 {
    let o = std::process::Command::new("pgrep")
        .args(["-f", "--", &format!("repl --out {}", out_dir.display())])
        .output()
        .unwrap();
    let pids: Vec<i32> = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    // The repl, not its sandbox's processes (forks sharing its argv).
    let ppid = |pid: i32| -> i32 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        after
            .split_whitespace()
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0)
    };
    let roots: Vec<i32> = pids
        .iter()
        .copied()
        .filter(|p| !pids.contains(&ppid(*p)))
        .collect();
    assert_eq!(roots.len(), 1, "one rfs repl: {pids:?}");
    roots[0]
}

/// Bug: SIGTERM (or SIGHUP, SIGQUIT) only interrupted the current input;
/// at the prompt it did nothing, and a supervisor's SIGTERM never tore
/// the sandbox down. Now it ends the session, at the prompt or in a
/// step, with the verified cleanup, `run.end` interrupted and exit 130.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_repl_session_with_verified_cleanup() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for during_step in [false, true] {
        let r = start(&rfs, &repo, &[]).await;
        r.send("step(\"one\", \"true\");\r");
        r.expect("step `one` ok").await;
        if during_step {
            r.send("step(\"long\", \"sleep 300\");\r");
            r.expect("rfs: step `long` in").await;
        } else {
            r.idle().await;
        }
        let sig = if during_step { "-TERM" } else { "-HUP" };
        let kill = std::process::Command::new("kill")
            .args([sig, &repl_pid(&r.out_dir).to_string()])
            .status()
            .unwrap();
        assert!(kill.success());
        let exit =
            r.s.wait_exit(Duration::from_secs(60))
                .await
                .expect("repl exits");
        assert_eq!(exit.exit, Some(130), "{}", r.s.screen().text());
        let journal = std::fs::read_to_string(r.out_dir.join("journal.jsonl")).unwrap();
        let last: serde_json::Value =
            serde_json::from_str(journal.lines().last().unwrap()).unwrap();
        assert_eq!(last["kind"], "run.end", "{journal}");
        assert_eq!(last["payload"]["outcome"], "interrupted", "{journal}");
        let why = if during_step { "SIGTERM" } else { "SIGHUP" };
        assert!(
            last["payload"]["reason"]
                .as_str()
                .unwrap_or("")
                .contains(why),
            "{journal}"
        );
        assert!(r.journal_kinds().contains(&"cleanup.verified".to_string()));
        no_leftovers(&rfs);
        assert!(!process_running("sleep 300"), "the step's process is gone");
    }
}

/// Bug: REPL inputs skipped the static checks `rfs check` and `rfs run`
/// make, so a misspelt option key ran a step with the option ignored.
/// Now each input is checked, knowing the session's earlier functions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repl_inputs_get_the_static_checks_of_rfs_check() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("fn twice(x) { x * 2 }\r");
    r.idle().await;
    r.send("step(\"typo\", \"touch ran\", #{ timout: 5 });\r");
    r.expect("unknown option `timout`").await;
    let screen = r.expect("did you mean `timeout`").await;
    // The span points at the key (it used to point past the input's end).
    assert!(screen.contains("[<repl>:1:30]"), "{screen}");
    assert!(screen.contains("╰── here"), "{screen}");
    r.send("stpe(\"x\", \"true\");\r");
    r.expect("did you mean `step`").await;
    r.send("twice(1, 2)\r");
    r.expect("`twice` takes 1 argument, not 2").await;
    // The session's own function is known: this runs.
    r.send("print(`t=${twice(21)}`)\r");
    r.expect("t=42").await;
    assert_eq!(r.quit().await, Some(0));
    let kinds = r.journal_kinds();
    assert!(!kinds.contains(&"step.start".to_string()), "{kinds:?}");
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_lists_every_meta_command_and_journal_n_shows_n_facts() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send(":help\r");
    r.expect(":quit").await;
    let screen = r.s.screen().text();
    for c in [":help", ":sandbox", ":journal", ":screen", ":save", ":quit"] {
        assert!(screen.contains(c), ":help lists {c}: {screen}");
    }
    r.send("print(\"mark-a\"); print(\"mark-b\"); print(\"mark-c\");\r");
    r.expect("mark-c").await;
    r.send(":journal 2\r");
    r.expect_re(r"#\d+ +\d\d:\d\d:\d\d print +text=mark-c")
        .await;
    r.idle().await;
    let screen = r.s.screen().text();
    let shown = screen_lines_after(&screen, ":journal 2")
        .iter()
        .filter(|l| l.starts_with('#'))
        .count();
    assert_eq!(shown, 2, ":journal 2 shows two facts: {screen}");
    assert!(!screen.contains("text=mark-a"), "{screen}");
    r.send(":journal many\r");
    r.expect(":journal takes a number of facts, not `many`")
        .await;
    r.send(":nope\r");
    r.expect("unknown command `:nope`").await;
    // Errors in meta-commands never end the session.
    r.send("print(\"still-here\");\r");
    r.expect("still-here").await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_persists_across_sessions_in_the_state_directory() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("print(\"from-the-first-session\");\r");
    r.expect("from-the-first-session").await;
    assert_eq!(r.quit().await, Some(0));
    assert!(rfs.state.path().join("repl-history").exists());
    let r = start(&rfs, &repo, &[]).await;
    // Up arrow recalls the last input of the earlier session.
    r.send("\x1b[A");
    r.expect("rfs> print(\"from-the-first-session\");").await;
    // Emacs keys: Ctrl-A to the start, Ctrl-K kills the line.
    r.send("\x01\x0b");
    r.send("print(\"edited\" + \"-line\");\r");
    r.expect("edited-line").await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tab_completes_members_of_step_results_and_source_pins() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let r = start(&rfs, &repo, &[]).await;
    r.send("let res = step(\"s\", \"echo hi\");\r");
    r.expect("[s] hi").await;
    r.idle().await;
    r.send("print(`e=${res.exi\t");
    r.expect("res.exit").await;
    r.send("}`);\r");
    r.expect("e=0").await;
    r.send("let pin = sync_source();\r");
    r.expect("rfs: synced commit").await;
    r.idle().await;
    r.send("print(`c=${pin.comm\t");
    r.expect("pin.commit").await;
    r.send("}`);\r");
    r.expect(&format!("c={}", repo.head())).await;
    assert_eq!(r.quit().await, Some(0));
    no_leftovers(&rfs);
}
