//! The toolbox API against real sandboxes: files, execute, sessions, PTY.

use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

use crate::support::{eventually, fast, T};

pub async fn upload(t: &T, id: &str, path: &str, bytes: Vec<u8>) -> u16 {
    let part = reqwest::multipart::Part::bytes(bytes).file_name("f");
    let form = reqwest::multipart::Form::new().part("file", part);
    let url = format!("{}?path={}", t.tb_url(id, "/files/upload"), path);
    t.http
        .post(url)
        .bearer_auth(t.sim.api_key())
        .multipart(form)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn uploaded_files_land_in_an_isolated_sandbox_where_commands_really_run() {
    let t = T::start(fast());
    let id = t.create(json!({ "env": { "FROM_CREATE": "yes" } })).await;
    assert_eq!(
        upload(
            &t,
            &id,
            "/home/daytona/src/deep/hello.txt",
            b"hello sandbox\n".to_vec()
        )
        .await,
        200
    );
    let (code, out) = t
        .exec(
            &id,
            "cat /home/daytona/src/deep/hello.txt; stat -c %U src/deep/hello.txt",
        )
        .await;
    assert_eq!((code, out.as_str()), (0, "hello sandbox\ndaytona\n"));
    let dl = t
        .tb(
            &id,
            Method::GET,
            "/files/download?path=/home/daytona/src/deep/hello.txt",
            None,
        )
        .await;
    assert_eq!((dl.status, dl.body.as_str()), (200, "hello sandbox\n"));

    let (code, out) = t.exec(&id, "id -un; pwd; echo $HOME $FROM_CREATE").await;
    assert_eq!(
        (code, out.as_str()),
        (0, "daytona\n/home/daytona\n/home/daytona yes\n")
    );
    // the runner's checkout and the host's /tmp do not exist inside
    let marker = std::env::temp_dir().join(format!("rfs-sim-host-marker-{}", std::process::id()));
    std::fs::write(&marker, "host").unwrap();
    let checkout = env!("CARGO_MANIFEST_DIR");
    let (code, out) = t
        .exec(&id, &format!("test -e '{checkout}' && echo checkout; test -e '{}' && echo hosttmp; ps -o pid= | wc -l; exit 5", marker.display()))
        .await;
    std::fs::remove_file(&marker).unwrap();
    assert_eq!(code, 5);
    assert!(
        !out.contains("checkout") && !out.contains("hosttmp"),
        "{out}"
    );
    // own pid namespace: only this sandbox's few processes
    assert!(out.trim().parse::<u32>().unwrap() < 10, "{out}");

    let other = t.create(json!({})).await;
    let (code, _) = t
        .exec(&other, "test -e /home/daytona/src/deep/hello.txt")
        .await;
    assert_eq!(code, 1, "sandboxes do not share files");
    // missing files: empty-body 404
    let nf = t
        .tb(&id, Method::GET, "/files/download?path=/nope", None)
        .await;
    assert_eq!((nf.status, nf.body.as_str()), (404, ""));
    let mk = t
        .tb(
            &id,
            Method::POST,
            "/files/folder?path=/home/daytona/made/here&mode=755",
            None,
        )
        .await;
    assert_eq!(mk.status, 201);
    assert_eq!(t.exec(&id, "test -d /home/daytona/made/here").await.0, 0);
}

#[tokio::test]
async fn execute_in_a_missing_cwd_answers_the_misleading_zsh_error() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/execute",
            Some(json!({ "command": "echo hi", "cwd": "/home/daytona/missing" })),
        )
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({ "exitCode": -1, "result": "fork/exec /usr/bin/zsh: no such file or directory" })
    );
    let ok = t
        .tb(
            &id,
            Method::POST,
            "/process/execute",
            Some(json!({ "command": "pwd; echo $A", "cwd": "/tmp", "envs": { "A": "b" } })),
        )
        .await
        .json();
    assert_eq!(ok, json!({ "exitCode": 0, "result": "/tmp\nb\n" }));
    let blank = t
        .tb(
            &id,
            Method::POST,
            "/process/execute",
            Some(json!({ "command": "  " })),
        )
        .await;
    assert_eq!(blank.status, 400);
    assert_eq!(blank.json()["code"], "BAD_REQUEST");
}

#[tokio::test]
async fn execute_timeout_is_408_and_kills_the_process_group() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    let started = Instant::now();
    let r = t
        .tb(
            &id,
            Method::POST,
            "/process/execute",
            Some(json!({ "command": "sleep 30 & sleep 31; echo never", "timeout": 1 })),
        )
        .await;
    assert_eq!(r.status, 408);
    let v = r.json();
    assert_eq!(v["code"], "REQUEST_TIMEOUT");
    assert_eq!(v["message"], "request timeout: command execution timeout");
    assert!(started.elapsed() < Duration::from_secs(10));
    let (_, ps) = t.exec(&id, "ps -o args").await;
    assert!(
        !ps.contains("sleep 30") && !ps.contains("sleep 31"),
        "the whole group was killed: {ps}"
    );
}

#[tokio::test]
async fn session_commands_share_a_shell_and_report_exit_codes_and_split_output() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    assert_eq!(
        t.tb(
            &id,
            Method::POST,
            "/process/session",
            Some(json!({ "sessionId": "s" }))
        )
        .await
        .status,
        201
    );
    let dup = t
        .tb(
            &id,
            Method::POST,
            "/process/session",
            Some(json!({ "sessionId": "s" })),
        )
        .await;
    assert_eq!(dup.status, 409);

    let sync = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": "mkdir -p w && cd w && echo out; echo err >&2; (exit 3)" })),
        )
        .await;
    assert_eq!(sync.status, 200);
    let v = sync.json();
    assert_eq!(v["exitCode"], 3);
    assert_eq!(v["stdout"], "out\n");
    assert_eq!(v["stderr"], "err\n");
    assert!(v["output"]
        .as_str()
        .unwrap()
        .contains("\u{1}\u{1}\u{1}out\n"));
    // shell state persists: cwd from the previous command
    let pwd = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": "pwd" })),
        )
        .await
        .json();
    assert_eq!(pwd["stdout"], "/home/daytona/w\n");

    let run = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": "echo a; sleep 0.3; echo b >&2; false", "runAsync": true })),
        )
        .await;
    assert_eq!(run.status, 202);
    let cmd = run.json()["cmdId"].as_str().unwrap().to_string();
    let first = t
        .tb(
            &id,
            Method::GET,
            &format!("/process/session/s/command/{cmd}"),
            None,
        )
        .await
        .json();
    assert!(
        first.get("exitCode").is_none(),
        "no exit code while running: {first}"
    );
    let done = eventually(Duration::from_secs(5), || async {
        t.tb(
            &id,
            Method::GET,
            &format!("/process/session/s/command/{cmd}"),
            None,
        )
        .await
        .json()["exitCode"]
            == 1
    })
    .await;
    assert!(done);
    let logs = t
        .tb(
            &id,
            Method::GET,
            &format!("/process/session/s/command/{cmd}/logs"),
            None,
        )
        .await;
    assert_eq!(logs.json()["stdout"], "a\n");
    assert_eq!(logs.json()["stderr"], "b\n");
    // no SDK version header: combined text, markers stripped
    let url = t.tb_url(&id, &format!("/process/session/s/command/{cmd}/logs"));
    let plain = t.raw(Method::GET, &url, None, &[]).await;
    assert!(plain.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    assert_eq!(plain.body, "a\nb\n");
    let url = t.tb_url(&id, "/process/session/s/exec");
    let old = t
        .raw(
            Method::POST,
            &url,
            Some(json!({ "command": "echo x; sleep 0.2; echo y >&2" })),
            &[],
        )
        .await
        .json();
    assert_eq!(old["output"], "x\ny\n");
    assert!(old["stdout"].is_null());

    let empty = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": "" })),
        )
        .await;
    assert_eq!(
        (empty.status, empty.body.as_str()),
        (400, ""),
        "empty-body error"
    );
    let leader = "test \"$(cut -d' ' -f5 /proc/$$/stat)\" = \"$$\" && echo leader";
    let bg = t
        .tb(
            &id,
            Method::POST,
            "/process/session/s/exec",
            Some(json!({ "command": format!("sleep 7392 >/dev/null 2>&1 & {leader}") })),
        )
        .await
        .json();
    assert_eq!(
        bg["stdout"], "leader\n",
        "the session shell leads its own process group"
    );
    let (_, leader_out) = t.exec(&id, leader).await;
    assert_eq!(leader_out, "leader\n", "so does the execute shell");
    let session = t
        .tb(&id, Method::GET, "/process/session/s", None)
        .await
        .json();
    assert_eq!(session["commands"].as_array().unwrap().len(), 5);
    assert_eq!(
        t.tb(&id, Method::DELETE, "/process/session/s", None)
            .await
            .status,
        204
    );
    assert_eq!(
        t.tb(&id, Method::GET, "/process/session/s", None)
            .await
            .status,
        404
    );
    let killed = eventually(Duration::from_secs(3), || async {
        !t.exec(&id, "ps -o args").await.1.contains("sleep 7392")
    })
    .await;
    assert!(killed, "deleting a session kills its shell's jobs");
}

#[tokio::test]
async fn session_logs_follow_streams_over_a_websocket_until_the_command_ends() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    t.tb(
        &id,
        Method::POST,
        "/process/session",
        Some(json!({ "sessionId": "f" })),
    )
    .await;
    let run = t
        .tb(
            &id,
            Method::POST,
            "/process/session/f/exec",
            Some(json!({ "command": "echo one; sleep 0.4; echo two >&2", "runAsync": true })),
        )
        .await
        .json();
    let cmd = run["cmdId"].as_str().unwrap();
    let url = t
        .tb_url(
            &id,
            &format!("/process/session/f/command/{cmd}/logs?follow=true"),
        )
        .replace("http://", "ws://");
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert(
        "Authorization",
        format!("Bearer {}", t.sim.api_key()).parse().unwrap(),
    );
    req.headers_mut()
        .insert("X-Daytona-SDK-Version", "0.190.0".parse().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    let mut got = Vec::new();
    let mut close = None;
    while let Some(msg) = ws.next().await {
        match msg.unwrap() {
            Message::Binary(b) => got.extend_from_slice(&b),
            Message::Close(c) => {
                close = c;
                break;
            }
            _ => {}
        }
    }
    assert_eq!(got, b"\x01\x01\x01one\n\x02\x02\x02two\n");
    assert_eq!(close.unwrap().code, CloseCode::Normal);
}

async fn pty_socket(
    t: &T,
    id: &str,
    pty: &str,
) -> tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    let url = t
        .tb_url(id, &format!("/process/pty/{pty}/connect"))
        .replace("http://", "ws://");
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert(
        "Authorization",
        format!("Bearer {}", t.sim.api_key()).parse().unwrap(),
    );
    let (ws, _) = tokio_tungstenite::connect_async(req).await.unwrap();
    ws
}

/// Read binary frames until `needle` shows up; returns everything read.
async fn read_until<S>(ws: &mut S, needle: &str) -> String
where
    S: futures_util::Stream<Item = Result<Message, tokio_tungstenite::tungstenite::Error>> + Unpin,
{
    let mut seen = String::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !seen.contains(needle) {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, ws.next()).await {
            Ok(Some(Ok(Message::Binary(b)))) => seen.push_str(&String::from_utf8_lossy(&b)),
            Ok(Some(Ok(_))) => {}
            other => panic!("no {needle:?} in {seen:?}: {other:?}"),
        }
    }
    seen
}

#[tokio::test]
async fn pty_websocket_echoes_resizes_by_its_own_call_and_closes_with_the_exit_code() {
    let t = T::start(fast());
    let id = t.create(json!({})).await;
    let created = t
        .tb(
            &id,
            Method::POST,
            "/process/pty",
            Some(json!({ "id": "term", "cols": 80, "rows": 24, "lazyStart": true })),
        )
        .await;
    assert_eq!(created.status, 201);
    assert_eq!(created.json(), json!({ "sessionId": "term" }));
    let mut ws = pty_socket(&t, &id, "term").await;
    let first = ws.next().await.unwrap().unwrap();
    let Message::Text(hello) = first else {
        panic!("first frame is text: {first:?}")
    };
    assert_eq!(
        serde_json::from_str::<Value>(&hello).unwrap(),
        json!({ "type": "control", "status": "connected" })
    );

    ws.send(Message::Text("echo pty-$((40+2))\n".into()))
        .await
        .unwrap();
    read_until(&mut ws, "pty-42").await;
    let resized = t
        .tb(
            &id,
            Method::POST,
            "/process/pty/term/resize",
            Some(json!({ "cols": 100, "rows": 40 })),
        )
        .await;
    assert_eq!(resized.status, 200);
    assert_eq!(
        (
            resized.json()["cols"].clone(),
            resized.json()["rows"].clone()
        ),
        (json!(100), json!(40))
    );
    ws.send(Message::Binary(b"stty size\n".to_vec().into()))
        .await
        .unwrap();
    read_until(&mut ws, "40 100").await;
    ws.send(Message::Text("exit 7\n".into())).await.unwrap();
    let close = loop {
        match ws.next().await {
            Some(Ok(Message::Close(c))) => break c.unwrap(),
            Some(Ok(_)) => continue,
            other => panic!("expected a close frame, got {other:?}"),
        }
    };
    assert_eq!(close.code, CloseCode::Error, "1011 for a non-zero exit");
    assert_eq!(
        serde_json::from_str::<Value>(&close.reason).unwrap(),
        json!({ "exitCode": 7, "exitReason": "non-zero exit" })
    );
    assert!(
        eventually(Duration::from_secs(2), || async {
            t.tb(&id, Method::GET, "/process/pty/term", None)
                .await
                .status
                == 404
        })
        .await
    );

    // clean exit: 1000 and exitCode 0; a bad cwd: 500
    t.tb(
        &id,
        Method::POST,
        "/process/pty",
        Some(json!({ "id": "ok", "lazyStart": true })),
    )
    .await;
    let mut ws = pty_socket(&t, &id, "ok").await;
    ws.next().await;
    ws.send(Message::Text("exit\n".into())).await.unwrap();
    let close = loop {
        if let Some(Ok(Message::Close(c))) = ws.next().await {
            break c.unwrap();
        }
    };
    assert_eq!(close.code, CloseCode::Normal);
    assert_eq!(
        serde_json::from_str::<Value>(&close.reason).unwrap(),
        json!({ "exitCode": 0 })
    );
    let bad = t
        .tb(
            &id,
            Method::POST,
            "/process/pty",
            Some(json!({ "id": "bad", "cwd": "/nope" })),
        )
        .await;
    assert_eq!(bad.status, 500);
    assert_eq!(
        bad.json(),
        json!({ "error": "failed to start PTY session" })
    );
}
