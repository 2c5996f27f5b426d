//! The toolbox daemon's session behaviours that rfs depends on, each
//! read from the daemon's source (daytonaio/daytona v0.190.0; files named
//! on each test and in the README) and held here against the server.

use std::time::{Duration, Instant};

use futures_util::StreamExt;
use reqwest::Method;
use serde_json::json;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{eventually, fast, T};

/// A sandbox with session `s`; returns its id.
async fn with_session(t: &T) -> String {
    let id = t.create(json!({})).await;
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/session",
            Some(json!({ "sessionId": "s" })),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    id
}

/// Start `command` asynchronously in session `s` (extra request fields in `more`).
async fn start(t: &T, id: &str, command: &str, more: serde_json::Value) -> String {
    let mut body = json!({ "command": command, "runAsync": true });
    if let Some(m) = more.as_object() {
        for (k, v) in m {
            body[k] = v.clone();
        }
    }
    let r = t
        .tb(id, Method::POST, "/process/session/s/exec", Some(body))
        .await;
    assert_eq!(r.status, 202, "{}", r.body);
    r.json()["cmdId"].as_str().unwrap().to_string()
}

/// Follow command `cmd`'s log with `headers`: (frames, close frame, when
/// each frame came).
async fn follow(
    t: &T,
    id: &str,
    cmd: &str,
    headers: &[(&str, &str)],
) -> (
    Vec<Vec<u8>>,
    Option<tokio_tungstenite::tungstenite::protocol::CloseFrame>,
    Vec<Instant>,
) {
    let url = t
        .tb_url(
            id,
            &format!("/process/session/s/command/{cmd}/logs?follow=true"),
        )
        .replace("http://", "ws://");
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert(
        "Authorization",
        format!("Bearer {}", t.sim.api_key()).parse().unwrap(),
    );
    for (k, v) in headers {
        let name: reqwest::header::HeaderName = k.parse().unwrap();
        req.headers_mut().insert(name, v.parse().unwrap());
    }
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let (mut frames, mut at) = (vec![], vec![]);
    while let Some(msg) = ws.next().await {
        match msg.unwrap() {
            Message::Binary(b) => {
                frames.push(b.to_vec());
                at.push(Instant::now());
            }
            Message::Close(c) => return (frames, c, at),
            _ => {}
        }
    }
    (frames, None, at)
}

const SPLIT: &[(&str, &str)] = &[("X-Daytona-SDK-Version", "0.190.0")];

async fn status(t: &T, id: &str, cmd: &str) -> serde_json::Value {
    t.tb(
        id,
        Method::GET,
        &format!("/process/session/s/command/{cmd}"),
        None,
    )
    .await
    .json()
}

async fn input(t: &T, id: &str, cmd: &str, data: &str) -> crate::support::Resp {
    t.tb(
        id,
        Method::POST,
        &format!("/process/session/s/command/{cmd}/input"),
        Some(json!({ "data": data })),
    )
    .await
}

/// apps/daemon/pkg/session/input.go: input is appended to the command's
/// log as stdout (`\x01\x01\x01`, a newline added) unless the command was
/// started with `suppressInputEcho: true`. The daemon writes the pipe
/// first and the log after (input.go:52-67), so the command's answer may
/// be logged before the echo: the order of the two records is not fixed
/// (asserting it made this test fail now and then, once in this CI).
#[tokio::test]
async fn input_is_echoed_into_the_log_as_stdout_unless_suppressed() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    for (suppress, want) in [
        (false, &b"\x01\x01\x01hello\n\x01\x01\x01got hello\n"[..]),
        (true, &b"\x01\x01\x01got hello\n"[..]),
    ] {
        let cmd = start(
            &t,
            &id,
            "read l; echo \"got $l\"",
            json!({ "suppressInputEcho": suppress }),
        )
        .await;
        // The command's input FIFO is made by the shell running it.
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert_eq!(input(&t, &id, &cmd, "hello").await.status, 204);
        let (frames, _, _) = follow(&t, &id, &cmd, SPLIT).await;
        // Each record, in any order (the echo races the answer).
        let records = |b: &[u8]| {
            let mut r: Vec<String> = String::from_utf8_lossy(b)
                .split("\x01\x01\x01")
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect();
            r.sort();
            r
        };
        assert_eq!(
            records(&frames.concat()),
            records(want),
            "suppressInputEcho: {suppress}"
        );
    }
}

/// apps/daemon/internal/util/log_reader.go: a followed log ends only once
/// 50 reads 20 ms apart found nothing and the exit code is there, about a
/// second after the last output; it closes with 1000 and no reason
/// (apps/daemon/pkg/session/log.go).
#[tokio::test]
async fn a_followed_log_closes_about_a_second_after_the_last_output_with_1000() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    let cmd = start(&t, &id, "echo done", json!({})).await;
    let began = Instant::now();
    let (frames, close, at) = follow(&t, &id, &cmd, SPLIT).await;
    let closed = Instant::now();
    assert_eq!(frames.concat(), b"\x01\x01\x01done\n");
    let last = *at.last().unwrap_or(&began);
    assert!(
        closed - last >= Duration::from_millis(900),
        "closed {:?} after the last output",
        closed - last
    );
    let close = close.expect("a close frame");
    assert_eq!(close.code, CloseCode::Normal);
    assert_eq!(close.reason, "");
}

/// apps/daemon/internal/util/log_reader.go and pkg/session/log.go: a
/// follow sends what was logged already, then live output, each read (of
/// at most 1024 bytes) as one binary frame.
#[tokio::test]
async fn a_followed_log_replays_then_streams_in_frames_of_at_most_1024_bytes() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    let cmd = start(
        &t,
        &id,
        "i=0; while [ $i -lt 100 ]; do echo 0123456789012345678901234567890123456789; i=$((i+1)); done; sleep 0.5; echo live",
        json!({}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let (frames, _, _) = follow(&t, &id, &cmd, SPLIT).await;
    assert!(
        frames.iter().all(|f| f.len() <= 1024),
        "{:?}",
        frames.iter().map(Vec::len).collect::<Vec<_>>()
    );
    let all = frames.concat();
    let line = b"\x01\x01\x010123456789012345678901234567890123456789\n";
    assert_eq!(&all[..line.len() * 100], line.repeat(100));
    assert_eq!(&all[line.len() * 100..], b"\x01\x01\x01live\n");
}

/// apps/daemon/pkg/session/execute.go (the labelers' `while read -r line
/// || [ -n "$line" ]; do printf 'PREFIX%s\n'`): each line is prefixed, and
/// a last line without a newline gets one.
#[tokio::test]
async fn each_line_is_prefixed_and_a_last_line_without_newline_gets_one() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    let cmd = start(&t, &id, "printf 'a\\nb'; printf 'e' >&2", json!({})).await;
    let (frames, _, _) = follow(&t, &id, &cmd, SPLIT).await;
    let all = frames.concat();
    let (mut out, mut err) = (vec![], vec![]);
    for rec in all.split_inclusive(|&b| b == b'\n') {
        match &rec[..3] {
            b"\x01\x01\x01" => out.push(rec.to_vec()),
            b"\x02\x02\x02" => err.push(rec.to_vec()),
            _ => panic!("an unprefixed line in {all:?}"),
        }
    }
    assert_eq!(
        out,
        vec![b"\x01\x01\x01a\n".to_vec(), b"\x01\x01\x01b\n".to_vec()]
    );
    assert_eq!(err, vec![b"\x02\x02\x02e\n".to_vec()]);
}

/// apps/daemon/pkg/session/common.go (IsCombinedOutput): the prefixes are
/// kept only for clients sending an SDK version ≥ 0.27 or
/// `X-Daytona-Split-Output: true`; others get them stripped.
#[tokio::test]
async fn prefixes_reach_only_clients_that_want_split_output() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    let cmd = start(&t, &id, "echo o; echo e >&2", json!({})).await;
    for (headers, prefixed) in [
        (&[][..], false),
        (&[("X-Daytona-SDK-Version", "0.20.0")][..], false),
        (&[("X-Daytona-Split-Output", "true")][..], true),
        (SPLIT, true),
    ] {
        let (frames, _, _) = follow(&t, &id, &cmd, headers).await;
        let all = frames.concat();
        assert_eq!(
            all.windows(3)
                .any(|w| w == b"\x01\x01\x01" || w == b"\x02\x02\x02"),
            prefixed,
            "{headers:?}: {all:?}"
        );
    }
}

/// apps/daemon/pkg/toolbox/process/session/log.go: for SDK ≥ 0.167 the
/// logs are JSON and `output` keeps the prefix bytes.
#[tokio::test]
async fn json_logs_keep_the_prefixes_in_output_for_sdk_0_167_and_later() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    let cmd = start(&t, &id, "echo o; echo e >&2", json!({})).await;
    assert!(
        eventually(Duration::from_secs(5), || async {
            status(&t, &id, &cmd).await["exitCode"].is_number()
        })
        .await
    );
    let logs = t
        .tb(
            &id,
            Method::GET,
            &format!("/process/session/s/command/{cmd}/logs"),
            None,
        )
        .await
        .json();
    let output = logs["output"].as_str().unwrap();
    assert!(output.contains("\u{1}\u{1}\u{1}o\n"), "{output:?}");
    assert_eq!(logs["stdout"], "o\n");
    assert_eq!(logs["stderr"], "e\n");
}

/// apps/daemon/pkg/session/execute.go: the session's one shell runs its
/// commands in turn: a sync exec waits behind a running async command.
#[tokio::test]
async fn a_sync_exec_waits_behind_a_running_async_command() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    start(&t, &id, "sleep 1", json!({})).await;
    let began = Instant::now();
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": "echo now" })),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(
        began.elapsed() >= Duration::from_millis(800),
        "{:?}",
        began.elapsed()
    );
}

/// apps/daemon/pkg/session/input.go: input to a command that ended is 500
/// (`failed to open input pipe`: its FIFO is gone) until its exit code
/// was read, 410 after.
#[tokio::test]
async fn input_to_an_ended_command_is_500_until_its_exit_code_was_read_then_410() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    let cmd = start(&t, &id, "true", json!({})).await;
    // Ended (the next command of the shell ran), exit code not read.
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": "true" })),
        )
        .await;
    assert_eq!(r.status, 200);
    let r = input(&t, &id, &cmd, "x").await;
    assert_eq!(r.status, 500, "{}", r.body);
    assert!(r.body.contains("failed to open input pipe"), "{}", r.body);
    assert_eq!(status(&t, &id, &cmd).await["exitCode"], 0);
    let r = input(&t, &id, &cmd, "x").await;
    assert_eq!(r.status, 410, "{}", r.body);
}

/// apps/daemon/pkg/session/delete.go: deleting a session sends SIGTERM to
/// its processes, and SIGKILL only after the 5 s grace
/// (DAYTONA_TERMINATION_GRACE_PERIOD).
#[tokio::test]
async fn deleting_a_session_sends_sigterm_then_sigkill_after_5s() {
    let t = T::start(fast());
    let id = with_session(&t).await;
    // One command that says it was terminated, one that ignores SIGTERM.
    start(
        &t,
        &id,
        "trap 'echo term > /tmp/termed; exit 0' TERM; sleep 30 & wait",
        json!({}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    let r = t.tb(&id, Method::DELETE, "/process/session/s", None).await;
    assert_eq!(r.status, 204);
    assert_eq!(t.exec(&id, "cat /tmp/termed").await.1.trim(), "term");
    let quick = began.elapsed();
    assert!(quick < Duration::from_secs(5), "{quick:?}");

    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/session",
            Some(json!({ "sessionId": "s" })),
        )
        .await;
    assert_eq!(r.status, 201);
    start(&t, &id, "trap '' TERM; sleep 30", json!({})).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let began = Instant::now();
    t.tb(&id, Method::DELETE, "/process/session/s", None).await;
    let waited = began.elapsed();
    assert!(
        waited >= Duration::from_millis(4800) && waited < Duration::from_secs(8),
        "{waited:?}"
    );
    assert!(!t.exec(&id, "ps -o args").await.1.contains("sleep 30"));
}
