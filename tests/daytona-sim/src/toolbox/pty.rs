//! `/process/pty`: a real PTY running `<shell> -i -l` in the sandbox.
//!
//! WebSocket protocol of the daemon: first a text control frame
//! `{"type":"control","status":"connected"}`, then PTY output as binary
//! frames; every client frame is written raw to the PTY; resize is its own
//! HTTP call; when the shell exits every client gets a close frame, code
//! 1000 for exit 0 and 1011 otherwise, reason `{"exitCode":N,"exitReason":...}`.
//! Output produced while no client is attached is not kept (as upstream).

use super::Tb;
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::Stdio;
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::Path;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::mpsc;

use super::ToolboxState;
use crate::errors;
use crate::isolation::{base_env, kill_session, HOME, SHELL};
use crate::state::{now_rfc3339, AppState};

enum Out {
    /// Output, with when it was read from the PTY (frame latency counts
    /// from then: frames in flight do not wait for each other).
    Data(Vec<u8>, std::time::Instant),
    Close(u16, String),
}

struct Running {
    master: Arc<std::fs::File>,
    input: std_mpsc::Sender<Vec<u8>>,
    pid: i32,
}

pub(crate) struct PtySession {
    info: Mutex<Value>,
    running: Mutex<Option<Running>>,
    used: Mutex<bool>,
    clients: Mutex<Vec<mpsc::Sender<Out>>>,
    env: Vec<(String, String)>,
}

fn set_winsize(fd: i32, cols: u16, rows: u16) -> std::io::Result<()> {
    let ws = libc::winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize struct from the pointer, which outlives the call.
    let r = unsafe { libc::ioctl(fd, libc::TIOCSWINSZ, &ws) };
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn close_reason(code: i32) -> (u16, String) {
    if code == 0 {
        return (1000, json!({ "exitCode": 0 }).to_string());
    }
    let reason = match code {
        130 => "Ctrl+C".to_string(),
        137 => "SIGKILL".to_string(),
        143 => "SIGTERM".to_string(),
        c if c > 128 => format!("signal {}", c - 128),
        _ => "non-zero exit".to_string(),
    };
    (
        1011,
        json!({ "exitCode": code, "exitReason": reason }).to_string(),
    )
}

impl PtySession {
    fn broadcast(&self, out: Out) {
        let mut clients = self.clients.lock().unwrap();
        match out {
            Out::Data(b, at) => clients.retain(|c| match c.try_send(Out::Data(b.clone(), at)) {
                Ok(()) => true,
                Err(mpsc::error::TrySendError::Full(_)) => {
                    // the daemon drops a slow consumer with 1008
                    let c = c.clone();
                    tokio::spawn(async move {
                        let _ = c.send(Out::Close(1008, "slow consumer".into())).await;
                    });
                    false
                }
                Err(_) => false,
            }),
            Out::Close(code, reason) => {
                for c in clients.drain(..) {
                    let _ = c.try_send(Out::Close(code, reason.clone()));
                }
            }
        }
    }

    /// Start the shell on a new PTY (once).
    fn start(
        self: &Arc<Self>,
        tb: &Arc<ToolboxState>,
        rt: tokio::runtime::Handle,
    ) -> std::io::Result<()> {
        let mut used = self.used.lock().unwrap();
        if *used {
            return if self.running.lock().unwrap().is_some() {
                Ok(())
            } else {
                Err(std::io::Error::other(
                    "PTY session has already been used and cannot be restarted",
                ))
            };
        }
        let (cwd, cols, rows, envs) = {
            let info = self.info.lock().unwrap();
            (
                info["cwd"].as_str().unwrap_or(HOME).to_string(),
                info["cols"].as_u64().unwrap_or(80) as u16,
                info["rows"].as_u64().unwrap_or(24) as u16,
                info["envs"].clone(),
            )
        };
        if super::execute::fork_exec_error(&tb.sandbox, &cwd).is_some() {
            return Err(std::io::Error::other("chdir failed"));
        }
        let mut env = self.env.clone();
        if let Some(m) = envs.as_object() {
            env.extend(
                m.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())),
            );
        }
        let env = base_env(&env);
        let pty = nix::pty::openpty(None, None).map_err(std::io::Error::from)?;
        set_winsize(pty.master.as_raw_fd(), cols, rows)?;
        let slave: OwnedFd = pty.slave;
        let mut cmd = tb
            .sandbox
            .command(&cwd, &env, &[SHELL, "-i", "-l"], false)?;
        cmd.stdin(Stdio::from(slave.try_clone()?))
            .stdout(Stdio::from(slave.try_clone()?))
            .stderr(Stdio::from(slave));
        // SAFETY: only async-signal-safe calls (setsid, ioctl) between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::ioctl(0, libc::TIOCSCTTY, 0) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn()?;
        drop(cmd);
        *used = true;
        let pid = child.id() as i32;
        let master = Arc::new(std::fs::File::from(pty.master));
        let (in_tx, in_rx) = std_mpsc::channel::<Vec<u8>>();
        *self.running.lock().unwrap() = Some(Running {
            master: master.clone(),
            input: in_tx,
            pid,
        });
        self.info.lock().unwrap()["active"] = json!(true);
        // input: its own thread, so a program that does not read never blocks anyone else
        let writer = master.clone();
        std::thread::spawn(move || {
            while let Ok(data) = in_rx.recv() {
                if (&*writer).write_all(&data).is_err() {
                    return;
                }
            }
        });
        let (done_tx, done_rx) = std_mpsc::channel::<()>();
        let reader_master = master.clone();
        let me = self.clone();
        let rt2 = rt.clone();
        std::thread::spawn(move || {
            let _guard = rt2.enter();
            let mut buf = vec![0u8; 32 * 1024];
            loop {
                match (&*reader_master).read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => me.broadcast(Out::Data(buf[..n].to_vec(), std::time::Instant::now())),
                }
            }
            let _ = done_tx.send(());
        });
        let me = self.clone();
        let tb = tb.clone();
        std::thread::spawn(move || {
            let _guard = rt.enter();
            let status = child.wait();
            // let the reader drain what the shell wrote last
            let _ = done_rx.recv_timeout(Duration::from_millis(300));
            let code = match status {
                Ok(s) => s
                    .code()
                    .unwrap_or_else(|| s.signal().map(|n| 128 + n).unwrap_or(1)),
                Err(_) => 1,
            };
            me.finish(&tb, code);
        });
        Ok(())
    }

    fn finish(self: &Arc<Self>, tb: &ToolboxState, code: i32) {
        let running = self.running.lock().unwrap().take();
        if running.is_none() {
            return;
        }
        self.info.lock().unwrap()["active"] = json!(false);
        let (close, reason) = close_reason(code);
        self.broadcast(Out::Close(close, reason));
        let id = self.info.lock().unwrap()["id"]
            .as_str()
            .unwrap_or("")
            .to_string();
        let mut ptys = tb.ptys.lock().unwrap();
        if ptys.get(&id).is_some_and(|p| Arc::ptr_eq(p, self)) {
            ptys.remove(&id);
        }
    }

    /// Kill the shell and its jobs; clients see 137/SIGKILL.
    pub fn kill(&self) {
        let running = self.running.lock().unwrap().take();
        if let Some(r) = running {
            kill_session(r.pid);
            self.info.lock().unwrap()["active"] = json!(false);
            let (close, reason) = close_reason(137);
            self.broadcast(Out::Close(close, reason));
        }
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CreateRequest {
    id: Option<String>,
    cwd: Option<String>,
    envs: Option<BTreeMap<String, String>>,
    cols: Option<u16>,
    rows: Option<u16>,
    #[serde(default)]
    lazy_start: bool,
}

pub(crate) async fn create(tb: Tb, body: Bytes) -> Response {
    let Tb { ctx, .. } = tb;
    let req: CreateRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return errors::pty(400, e.to_string()),
    };
    let Some(pid) = req.id.filter(|i| !i.is_empty()) else {
        return errors::pty(400, "session ID is required");
    };
    if ctx.tb.ptys.lock().unwrap().contains_key(&pid) {
        return errors::pty(409, format!("PTY session with ID '{pid}' already exists"));
    }
    let mut envs = req.envs.unwrap_or_default();
    envs.entry("TERM".into())
        .or_insert_with(|| "xterm-256color".into());
    let cols = req.cols.unwrap_or(80);
    let rows = req.rows.unwrap_or(24);
    if cols > 1000 {
        return errors::pty(400, "invalid value for cols - must be less than 1000");
    }
    if rows > 1000 {
        return errors::pty(400, "invalid value for rows - must be less than 1000");
    }
    let session = Arc::new(PtySession {
        info: Mutex::new(json!({
            "id": pid,
            "cwd": req.cwd.filter(|c| !c.is_empty()).unwrap_or_else(|| HOME.to_string()),
            "envs": envs,
            "cols": cols,
            "rows": rows,
            "createdAt": now_rfc3339(),
            "active": false,
            "lazyStart": req.lazy_start,
        })),
        running: Mutex::new(None),
        used: Mutex::new(false),
        clients: Mutex::new(Vec::new()),
        env: ctx.env.clone(),
    });
    ctx.tb
        .ptys
        .lock()
        .unwrap()
        .insert(pid.clone(), session.clone());
    if !req.lazy_start {
        if let Err(_e) = session.start(&ctx.tb, tokio::runtime::Handle::current()) {
            ctx.tb.ptys.lock().unwrap().remove(&pid);
            return errors::pty(500, "failed to start PTY session");
        }
    }
    (StatusCode::CREATED, Json(json!({ "sessionId": pid }))).into_response()
}

pub(crate) async fn list(tb: Tb) -> Response {
    let Tb { ctx, .. } = tb;
    let sessions: Vec<Value> = ctx
        .tb
        .ptys
        .lock()
        .unwrap()
        .values()
        .map(|p| p.info.lock().unwrap().clone())
        .collect();
    Json(json!({ "sessions": sessions })).into_response()
}

fn lookup(tb: &ToolboxState, pid: &str) -> Option<Arc<PtySession>> {
    tb.ptys.lock().unwrap().get(pid).cloned()
}

pub(crate) async fn get(tb: Tb, Path((_, pid)): Path<(String, String)>) -> Response {
    let Tb { ctx, .. } = tb;
    match lookup(&ctx.tb, &pid) {
        Some(p) => Json(p.info.lock().unwrap().clone()).into_response(),
        None => errors::pty(404, "PTY session not found"),
    }
}

pub(crate) async fn delete(tb: Tb, Path((_, pid)): Path<(String, String)>) -> Response {
    let Tb { ctx, .. } = tb;
    let removed = ctx.tb.ptys.lock().unwrap().remove(&pid);
    match removed {
        Some(p) => {
            p.kill();
            Json(json!({ "message": "PTY session deleted" })).into_response()
        }
        None => errors::pty(404, "PTY session not found"),
    }
}

#[derive(Deserialize)]
struct ResizeRequest {
    cols: u16,
    rows: u16,
}

pub(crate) async fn resize(
    tb: Tb,
    Path((_, pid)): Path<(String, String)>,
    body: Bytes,
) -> Response {
    let Tb { ctx, .. } = tb;
    let req: ResizeRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return errors::pty(400, e.to_string()),
    };
    if req.cols > 1000 {
        return errors::pty(400, "cols must be less than 1000");
    }
    if req.rows > 1000 {
        return errors::pty(400, "rows must be less than 1000");
    }
    let Some(p) = lookup(&ctx.tb, &pid) else {
        return errors::pty(410, format!("PTY session {pid} not found"));
    };
    let fd = p.running.lock().unwrap().as_ref().map(|r| r.master.clone());
    let Some(master) = fd else {
        return errors::pty(410, format!("PTY session {pid} is not active"));
    };
    if let Err(e) = set_winsize(master.as_raw_fd(), req.cols, req.rows) {
        return errors::pty(500, e.to_string());
    }
    let mut info = p.info.lock().unwrap();
    info["cols"] = json!(req.cols);
    info["rows"] = json!(req.rows);
    Json(info.clone()).into_response()
}

pub(crate) async fn connect(
    tb: Tb,
    Path((_, pid)): Path<(String, String)>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Tb { ctx, st, .. } = tb;
    let ws = match ws {
        Ok(ws) => ws,
        Err(e) => return e.into_response(),
    };
    let tb = ctx.tb.clone();
    let rt = tokio::runtime::Handle::current();
    ws.on_upgrade(move |socket| attach(socket, tb, st, pid, rt))
}

async fn attach(
    mut socket: WebSocket,
    tb: Arc<ToolboxState>,
    st: Arc<AppState>,
    pid: String,
    rt: tokio::runtime::Handle,
) {
    let session = lookup(&tb, &pid);
    let ready = match &session {
        None => Err("PTY session not found".to_string()),
        Some(s) => s.start(&tb, rt).map_err(|e| e.to_string()),
    };
    let session = match (session, ready) {
        (Some(s), Ok(())) => s,
        (_, Err(e)) => {
            let msg = json!({
                "type": "control",
                "status": "error",
                "error": format!("Failed to connect to PTY session: {e}"),
            });
            let _ = socket.send(Message::Text(msg.to_string().into())).await;
            let _ = socket.send(Message::Close(None)).await;
            return;
        }
        (None, Ok(())) => return,
    };
    let (tx, mut rx) = mpsc::channel::<Out>(256);
    session.clients.lock().unwrap().push(tx);
    let hello = json!({ "type": "control", "status": "connected" }).to_string();
    if socket.send(Message::Text(hello.into())).await.is_err() {
        return;
    }
    let mut sent = 0usize;
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Out::Data(b, at)) => {
                    // A slow consumer (fault) takes its time per frame;
                    // network latency delays each frame from when it was read.
                    if let Some(slow) = st.faults.pty_frame_delay() {
                        tokio::time::sleep(slow).await;
                    }
                    if !st.opts.frame_latency.is_zero() {
                        tokio::time::sleep_until(tokio::time::Instant::from_std(at + st.opts.frame_latency)).await;
                    }
                    sent += b.len();
                    if st.faults.pty_drop_after().is_some_and(|limit| sent > limit) {
                        let _ = socket.send(Message::Close(Some(CloseFrame { code: 1008, reason: "slow consumer".into() }))).await;
                        return;
                    }
                    if socket.send(Message::Binary(b.into())).await.is_err() {
                        return;
                    }
                }
                Some(Out::Close(code, reason)) => {
                    let _ = socket.send(Message::Close(Some(CloseFrame { code, reason: reason.into() }))).await;
                    return;
                }
                None => return,
            },
            msg = socket.recv() => {
                let data = match msg {
                    Some(Ok(Message::Text(t))) => t.as_str().as_bytes().to_vec(),
                    Some(Ok(Message::Binary(b))) => b.to_vec(),
                    Some(Ok(_)) => continue,
                    _ => return,
                };
                let input = session.running.lock().unwrap().as_ref().map(|r| r.input.clone());
                match input {
                    Some(tx) => {
                        let _ = tx.send(data);
                    }
                    None => {
                        let _ = socket
                            .send(Message::Close(Some(CloseFrame { code: 1011, reason: "PTY session unavailable".into() })))
                            .await;
                        return;
                    }
                }
            }
        }
    }
}
