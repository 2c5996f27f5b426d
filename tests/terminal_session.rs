//! TerminalSession against real programs under a real local PTY.

use std::path::Path;
use std::time::{Duration, Instant};

use rfs::provider::local::pty::spawn_local_pty;
use rfs::provider::PtyRequest;
use rfs::terminal::{FailureKind, Pattern, SessionOptions, TerminalSession};
use serde_json::Value;

const COLS: u16 = 80;
const ROWS: u16 = 24;

fn request(argv: &[&str], cwd: &Path, extra_env: &[(&str, &str)]) -> PtyRequest {
    let mut env = vec![
        (
            "PATH".to_string(),
            "/usr/local/bin:/usr/bin:/bin".to_string(),
        ),
        ("TERM".to_string(), "xterm-256color".to_string()),
        ("HOME".to_string(), cwd.display().to_string()),
        ("PS1".to_string(), "$ ".to_string()),
        ("LANG".to_string(), "C.UTF-8".to_string()),
    ];
    env.extend(
        extra_env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string())),
    );
    PtyRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.display().to_string(),
        env,
        cols: COLS,
        rows: ROWS,
    }
}

async fn start_with(req: PtyRequest, options: SessionOptions) -> TerminalSession {
    let channel = spawn_local_pty(&req).await.expect("spawn pty");
    TerminalSession::start(&tokio::runtime::Handle::current(), channel, options).expect("start")
}

async fn start(argv: &[&str], cwd: &Path) -> TerminalSession {
    start_with(request(argv, cwd, &[]), SessionOptions::new(COLS, ROWS)).await
}

fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s)
}

async fn expect(session: &TerminalSession, pattern: Pattern) -> rfs::terminal::Outcome {
    match session.wait_for(&pattern).await {
        Ok(o) => o,
        Err(e) => panic!("{e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shell_echo_clean_env_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    // A host variable must not leak into the child.
    std::env::set_var("RFS_TEST_HOST_ONLY", "leaked");
    let req = request(&["/bin/sh"], dir.path(), &[("X", "world")]);
    let s = start_with(req, SessionOptions::new(COLS, ROWS)).await;
    expect(&s, Pattern::text("$").timeout(secs(5.0))).await;
    s.send("echo hi-$X; echo v=${RFS_TEST_HOST_ONLY:-unset}; pwd\n")
        .unwrap();
    let out = expect(&s, Pattern::text("hi-world").timeout(secs(5.0))).await;
    let m = out.matched.unwrap();
    assert_eq!(m.col, 0, "{}", out.screen.dump());
    expect(&s, Pattern::text("v=unset")).await;
    let cwd = std::fs::canonicalize(dir.path()).unwrap();
    expect(&s, Pattern::text(cwd.display().to_string())).await;
    s.send("exit 7\n").unwrap();
    let outcome = s.wait_exit(secs(5.0)).await.unwrap();
    assert_eq!(outcome.exit, Some(7));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn full_screen_program_on_alternate_screen() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"printf 'main-screen\n'; printf '\033[?1049h\033[2J\033[H+--box--+\033[12;30HFULLSCREEN'; read x; printf '\033[?1049l'; echo back-$x"#;
    let s = start(&["/bin/sh", "-c", script], dir.path()).await;
    let out = expect(&s, Pattern::text("FULLSCREEN").on_row(11)).await;
    assert!(out.screen.alt_screen);
    assert_eq!(out.matched.unwrap().col, 29);
    assert_eq!(out.screen.line(0), Some("+--box--+"));
    assert!(!out.screen.text().contains("main-screen"));
    s.send("ok").unwrap();
    s.press("Enter").unwrap();
    let out = expect(&s, Pattern::text("back-ok")).await;
    assert!(!out.screen.alt_screen, "{}", out.screen.dump());
    assert_eq!(out.screen.line(0), Some("main-screen"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vi_edits_a_file() {
    let Some(vi) = ["/usr/bin/vi", "/bin/vi"]
        .into_iter()
        .find(|p| Path::new(p).exists())
    else {
        eprintln!("note: vi not installed; the printf-based alternate-screen test covers this");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("note.txt");
    let s = start(&[vi, file.to_str().unwrap()], dir.path()).await;
    let out = expect(&s, Pattern::text("~").on_row(-3).timeout(secs(10.0))).await;
    assert!(out.screen.alt_screen, "{}", out.screen.dump());
    s.send("ihello from rfs").unwrap();
    s.press("Escape").unwrap();
    expect(&s, Pattern::text("hello from rfs").on_row(0)).await;
    s.send(":wq").unwrap();
    s.press("Enter").unwrap();
    let outcome = s.wait_exit(secs(10.0)).await.unwrap();
    assert_eq!(outcome.exit, Some(0));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello from rfs\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn colours_cursor_movement_and_wide_chars() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"printf '\033[2J\033[31mred\033[0m \033[1;44mblue\033[0m\033[5;10Hat-5-10\033[7;1H中文😀x|e\314\201|\033[3;4H'; sleep 30"#;
    let s = start(&["/bin/sh", "-c", script], dir.path()).await;
    let out = expect(&s, Pattern::cursor_at(2, 3).timeout(secs(5.0))).await;
    let screen = out.screen;
    assert_eq!(screen.line(0), Some("red blue"), "{}", screen.dump());
    assert_eq!(screen.line(4), Some("         at-5-10"));
    assert_eq!(screen.line(6), Some("中文😀x|e\u{301}|"));
    let m = Pattern::text("x|").matches(&screen).unwrap();
    assert_eq!((m.row, m.col), (6, 6), "wide chars take two cells");
    assert_eq!(s.cursor(), (2, 3));
    // Negative rows count up from the content bottom (row 6 here).
    assert_eq!(s.line(-1).as_deref(), Some("中文😀x|e\u{301}|"));
    s.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resize_reaches_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(&["/bin/sh"], dir.path()).await;
    s.send("stty size\n").unwrap();
    expect(&s, Pattern::text("24 80")).await;
    s.resize(100, 30).unwrap();
    assert_eq!((s.screen().cols, s.screen().rows), (100, 30));
    s.send("stty size\n").unwrap();
    expect(&s, Pattern::text("30 100")).await;
    assert!(s.resize(0, 5).is_err());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_failure_carries_the_screen_dump() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(&["/bin/sh", "-c", "echo marker-xyz; sleep 30"], dir.path()).await;
    expect(&s, Pattern::text("marker-xyz")).await;
    let started = Instant::now();
    let err = s
        .wait_for(&Pattern::text("never-there").timeout(secs(0.3)))
        .await
        .unwrap_err();
    assert!(started.elapsed() >= secs(0.3));
    assert_eq!(err.kind, FailureKind::Timeout);
    let msg = err.to_string();
    assert!(msg.contains("timed out after"), "{msg}");
    assert!(msg.contains("\"never-there\""), "{msg}");
    assert!(msg.contains("screen 80x24"), "{msg}");
    assert!(msg.contains(" 0 |marker-xyz"), "{msg}");
    assert!(msg.contains("cursor at row 1 col 0"), "{msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn absent_holds_or_fails_when_text_appears() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        &[
            "/bin/sh",
            "-c",
            "echo ready; sleep 0.6; echo boom; sleep 30",
        ],
        dir.path(),
    )
    .await;
    expect(&s, Pattern::text("ready")).await;
    let t = Instant::now();
    let ok = expect(&s, Pattern::text("boom").absent().timeout(secs(0.2))).await;
    assert!(t.elapsed() >= secs(0.2));
    assert!(ok.matched.is_none());
    let err = s
        .wait_for(&Pattern::text("boom").absent().timeout(secs(5.0)))
        .await
        .unwrap_err();
    match &err.kind {
        FailureKind::Appeared(m) => assert_eq!((m.row, m.col), (1, 0)),
        other => panic!("expected Appeared, got {other:?}"),
    }
    assert!(err.elapsed < secs(2.0), "failed fast, not at the timeout");
    assert!(err.to_string().contains(" 1 |boom"), "{err}");
}

/// A session over a hand-made provider channel: `output` chunks, then the
/// channel ends with `exit` as the provider's account of how it ended.
async fn ended_channel(output: &[u8], exit: rfs::provider::ExecOutcome) -> TerminalSession {
    let (input, _ignored) = tokio::sync::mpsc::unbounded_channel();
    let (out_tx, out_rx) = tokio::sync::mpsc::channel(4);
    let (exit_tx, exit_rx) = tokio::sync::oneshot::channel();
    let channel = rfs::provider::PtyChannel {
        input,
        output: out_rx,
        exit: exit_rx,
    };
    let s = TerminalSession::start(
        &tokio::runtime::Handle::current(),
        channel,
        SessionOptions::new(COLS, ROWS),
    )
    .expect("start");
    out_tx.send(output.to_vec()).await.unwrap();
    drop(out_tx);
    exit_tx.send(exit).unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absent_assertion_fails_when_the_connection_is_lost_without_an_exit_status() {
    // Daytona's daemon drops a slow reader (close 1008, no exit code): the
    // program may go on printing unseen, so "absent" proves nothing.
    let s = ended_channel(b"working...\r\n", Default::default()).await;
    let t = Instant::now();
    let err = s
        .wait_for(&Pattern::text("late").absent().timeout(secs(5.0)))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::Lost);
    assert!(t.elapsed() < secs(4.0), "failed when the channel ended");
    let msg = err.to_string();
    assert!(msg.contains("without the program's exit status"), "{msg}");
    assert!(msg.contains("working..."), "screen dump missing: {msg}");
    // Waiting for text on a lost channel says so too.
    let err = s.wait_for(&Pattern::text("late")).await.unwrap_err();
    assert_eq!(err.kind, FailureKind::Lost);

    // A program that exited prints nothing more: absent holds at once.
    let exited = rfs::provider::ExecOutcome {
        exit: Some(0),
        ..Default::default()
    };
    let s = ended_channel(b"working...\r\n", exited).await;
    let t = Instant::now();
    let ok = expect(&s, Pattern::text("late").absent().timeout(secs(5.0))).await;
    assert!(ok.matched.is_none());
    assert!(
        t.elapsed() < secs(4.0),
        "an ended program's absent waited out its timeout"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stable_ms_waits_for_the_screen_to_settle() {
    let dir = tempfile::tempdir().unwrap();
    let script = "for i in 1 2 3 4 5 6 7 8; do printf '\\rtick %s' $i; sleep 0.05; done; sleep 30";
    let s = start(&["/bin/sh", "-c", script], dir.path()).await;
    let quick = expect(&s, Pattern::text("tick")).await;
    assert_ne!(
        quick.screen.line(0),
        Some("tick 8"),
        "without stable_ms the first frame matches"
    );
    let settled = expect(&s, Pattern::text("tick").stable_for(secs(0.25))).await;
    assert_eq!(settled.screen.line(0), Some("tick 8"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn asciicast_recording_is_well_formed() {
    let dir = tempfile::tempdir().unwrap();
    let cast = dir.path().join("session.cast");
    let mut options = SessionOptions::new(COLS, ROWS);
    options.record = Some(cast.clone());
    options.command = Some("/bin/sh".into());
    let s = start_with(request(&["/bin/sh"], dir.path(), &[]), options).await;
    s.send("echo one-$((1+1))\n").unwrap();
    expect(&s, Pattern::text("one-2")).await;
    // Type only at the prompt, so the echo and the output don't interleave.
    expect(&s, Pattern::cursor_at(2, 2)).await;
    s.marker("after echo");
    s.resize(90, 20).unwrap();
    s.send("printf '中\\n'\n").unwrap();
    expect(&s, Pattern::regex("(?m)^中$").unwrap()).await;
    s.close().await.unwrap();

    let text = std::fs::read_to_string(&cast).unwrap();
    let mut lines = text.lines();
    let header: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert_eq!(header["version"], 2);
    assert_eq!(
        (header["width"].as_u64(), header["height"].as_u64()),
        (Some(80), Some(24))
    );
    assert_eq!(header["env"]["TERM"], "xterm-256color");
    assert_eq!(header["command"], "/bin/sh");
    let events: Vec<Value> = lines
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{l}: {e}")))
        .collect();
    let mut last = 0.0;
    let mut output = String::new();
    let mut codes = std::collections::BTreeSet::new();
    for e in &events {
        let arr = e.as_array().unwrap();
        assert_eq!(arr.len(), 3, "{e}");
        let t = arr[0].as_f64().unwrap();
        assert!(t >= last, "time went backwards: {t} < {last}");
        last = t;
        let code = arr[1].as_str().unwrap();
        codes.insert(code.to_string());
        if code == "o" {
            output.push_str(arr[2].as_str().unwrap());
        }
    }
    assert!(
        output.contains("one-2") && output.contains('中'),
        "{output}"
    );
    for code in ["o", "i", "r", "m"] {
        assert!(codes.contains(code), "no {code:?} event in {codes:?}");
    }
    assert!(events.iter().any(|e| e[1] == "m" && e[2] == "after echo"));
    assert!(events.iter().any(|e| e[1] == "r" && e[2] == "90x20"));
    assert!(events
        .iter()
        .any(|e| e[1] == "i" && e[2] == "echo one-$((1+1))\n"));
}

fn process_alive(pid: u32) -> bool {
    // A zombie has exited; only its parent's reaping is outstanding.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let state = stat[stat.rfind(')').unwrap() + 2..].chars().next();
            state != Some('Z')
        }
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_kills_background_jobs_too() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(&["/bin/sh"], dir.path()).await;
    // Interactive sh puts the job in its own process group.
    s.send("sleep 1000 & echo bg=$!\n").unwrap();
    let m = expect(&s, Pattern::regex(r"bg=(\d+)").unwrap())
        .await
        .matched
        .unwrap();
    let pid: u32 = m.text.trim_start_matches("bg=").parse().unwrap();
    assert!(process_alive(pid));
    let outcome = s.close().await.unwrap();
    assert_eq!(outcome.signal, Some(9));
    let deadline = Instant::now() + secs(5.0);
    while process_alive(pid) && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        !process_alive(pid),
        "background sleep {pid} survived close()"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cursor_position_query_gets_a_reply() {
    let dir = tempfile::tempdir().unwrap();
    // Blocks in dd until the terminal answers ESC[3;5R (6 bytes).
    let script = r#"stty -icanon -echo min 1; printf '\033[3;5H\033[6n'; reply=$(dd bs=1 count=6 2>/dev/null); printf '\033[10;1H'; printf 'got:%s' "$reply" | tr '\033' 'E'; sleep 30"#;
    let s = start(&["/bin/sh", "-c", script], dir.path()).await;
    expect(&s, Pattern::text("got:E[3;5R").on_row(9).timeout(secs(5.0))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_reach_the_program_as_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let script = "stty raw -echo; dd bs=1 count=5 2>/dev/null | od -An -tx1; sleep 30";
    let s = start(&["/bin/sh", "-c", script], dir.path()).await;
    // Let stty take effect before typing.
    tokio::time::sleep(Duration::from_millis(200)).await;
    s.press("Up").unwrap();
    s.press("C-a").unwrap();
    s.press("BSpace").unwrap();
    expect(&s, Pattern::text("1b 5b 41 01 7f")).await;
    assert!(s
        .press("NoSuchKey")
        .unwrap_err()
        .to_string()
        .contains("NoSuchKey"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_and_end_of_output() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(&["/bin/sh", "-c", "echo bye; exit 3"], dir.path()).await;
    let outcome = s.wait_exit(secs(5.0)).await.unwrap();
    assert_eq!(outcome.exit, Some(3));
    assert!(!outcome.success());
    let err = s
        .wait_for(&Pattern::text("never").timeout(secs(10.0)))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::Ended, "{err}");
    assert!(err.elapsed < secs(5.0));
    assert_eq!(s.line(0).as_deref(), Some("bye"));
    assert_eq!(s.close().await.unwrap().exit, Some(3));
    assert!(s.send("x").is_err() || s.exit_status().is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_aborts_waits() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = SessionOptions::new(COLS, ROWS);
    let token = options.cancel.clone();
    options.cancel = token.clone();
    let s = start_with(
        request(&["/bin/sh", "-c", "sleep 30"], dir.path(), &[]),
        options,
    )
    .await;
    let t = Instant::now();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        token.cancel();
    });
    let err = s
        .wait_for(&Pattern::text("x").timeout(secs(10.0)))
        .await
        .unwrap_err();
    assert_eq!(err.kind, FailureKind::Cancelled);
    assert!(t.elapsed() < secs(2.0));
    assert!(matches!(
        s.wait_exit(secs(10.0)).await,
        Err(rfs::terminal::TerminalError::Cancelled)
    ));
}

#[test]
fn usable_from_a_thread_outside_the_runtime() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt.handle().clone();
    let dir = tempfile::tempdir().unwrap();
    let req = request(&["/bin/sh"], dir.path(), &[]);
    std::thread::spawn(move || {
        let channel = handle.block_on(spawn_local_pty(&req)).unwrap();
        let s = TerminalSession::start(&handle, channel, SessionOptions::new(COLS, ROWS)).unwrap();
        s.send("echo from-thread\n").unwrap();
        handle
            .block_on(s.wait_for(&Pattern::text("from-thread").on_row(1)))
            .unwrap();
        handle.block_on(s.close()).unwrap();
    })
    .join()
    .unwrap();
}

/// A program that never reads its terminal blocks writes once the PTY's
/// input buffer is full; closing the session must still kill it at once
/// (a kill is never queued behind stuck input).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn close_is_not_blocked_by_input_the_program_never_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = start(
        &[
            "/bin/sh",
            "-c",
            "stty -icanon -echo; echo ready; sleep 1000",
        ],
        dir.path(),
    )
    .await;
    expect(&s, Pattern::text("ready")).await;
    // Far more than a PTY buffers (a few KiB to 64 KiB).
    for _ in 0..64 {
        s.send(&"x".repeat(16 * 1024)).unwrap();
    }
    let t = std::time::Instant::now();
    let outcome = s.close().await.unwrap();
    assert_eq!(outcome.signal, Some(9), "{outcome:?}");
    assert!(outcome.cancelled, "{outcome:?}");
    assert!(t.elapsed() < secs(3.0), "close took {:?}", t.elapsed());
}
