//! `/process/session`: a persistent shell per session; each command runs
//! in it (so `cd` and variables persist), with stdout and stderr chunks
//! labelled into one log (`\x01\x01\x01` / `\x02\x02\x02` markers, see
//! `session_log`) and its exit code published once the log is complete —
//! the same observable protocol as the toolbox daemon.

use super::{JsonBody, Tb};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, RawQuery};
use axum::http::{header, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{output_mode, OutputMode, ToolboxState};
use crate::errors;
use crate::isolation::{
    base_env, chown, kill_session, signal_session_tree, SandboxBox, HOME, SHELL,
};

use super::session_log::{Capture, ERR, OUT};

pub(crate) struct Session {
    child: Child,
    /// Host pid of the session's shell (leader of its own session inside the sandbox).
    shell: Option<i32>,
    stdin: ChildStdin,
    commands: Vec<CommandRec>,
    dir: String,
    /// Set once the session is deleted: its followed logs close (the
    /// daemon's `session.ctx.Done()` in apps/daemon/pkg/session/log.go).
    gone: Arc<AtomicBool>,
}

struct CommandRec {
    id: String,
    command: String,
    /// The exit code as last *read* by a request (the daemon caches it on
    /// its `Command` when a status, session, list or sync exec reads it).
    exit_code: Option<i32>,
    capture: Capture,
    /// `suppressInputEcho` of its exec request.
    suppress_input_echo: bool,
}

/// How long a deleted session's processes get between SIGTERM and SIGKILL
/// (the daemon's `DAYTONA_TERMINATION_GRACE_PERIOD`, default 5s, checked
/// every `DAYTONA_TERMINATION_CHECK_INTERVAL`, default 100ms:
/// apps/daemon/cmd/daemon/config/config.go).
pub(crate) const TERMINATION_GRACE: Duration = Duration::from_secs(5);
const TERMINATION_CHECK: Duration = Duration::from_millis(100);

impl Session {
    pub fn kill(&mut self) {
        if let Some(shell) = self.shell {
            kill_session(shell);
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        for c in self.commands.iter().filter(|c| c.exit_code.is_none()) {
            c.capture.abandon();
        }
    }

    /// The daemon's session delete (apps/daemon/pkg/session/delete.go):
    /// SIGTERM to the shell's group and process tree, up to
    /// [`TERMINATION_GRACE`] for them to end, then SIGKILL.
    fn terminate(&mut self) {
        use nix::sys::signal::Signal;
        self.gone.store(true, Ordering::SeqCst);
        if let Some(shell) = self.shell {
            let deadline = Instant::now() + TERMINATION_GRACE;
            let mut left = signal_session_tree(shell, Some(Signal::SIGTERM));
            while left > 0 && Instant::now() < deadline {
                std::thread::sleep(TERMINATION_CHECK);
                left = signal_session_tree(shell, None);
            }
            if left > 0 {
                signal_session_tree(shell, Some(Signal::SIGKILL));
            }
        }
        self.kill();
    }
}

fn command_dir(session_dir: &str, cmd_id: &str) -> String {
    format!("{session_dir}/{cmd_id}")
}

/// Read (and cache) a command's exit code from its file.
fn refresh_exit(sandbox: &SandboxBox, dir: &str, c: &mut CommandRec) -> Option<i32> {
    if c.exit_code.is_none() {
        let path = sandbox.host_path(&format!("{}/exit_code", command_dir(dir, &c.id)));
        if let Ok(s) = std::fs::read_to_string(path) {
            if let Ok(code) = s.trim_end_matches('\n').trim().parse() {
                c.exit_code = Some(code);
            }
        }
    }
    c.exit_code
}

fn command_json(c: &CommandRec) -> Value {
    let mut v = json!({ "id": c.id, "command": c.command });
    if let Some(code) = c.exit_code {
        v["exitCode"] = json!(code);
    }
    v
}

/// Create a sandbox directory (and missing parents) owned by the sandbox user.
fn mkdir_owned(sandbox: &SandboxBox, path: &str) -> std::io::Result<()> {
    let mut cur = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        cur.push('/');
        cur.push_str(part);
        let host = sandbox.host_path(&cur);
        if !host.exists() {
            std::fs::create_dir(&host)?;
            chown(&host)?;
        }
    }
    Ok(())
}

fn strip_markers(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(OUT) || b[i..].starts_with(ERR) {
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    out
}

fn demux(b: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut cur: Option<bool> = None;
    let mut i = 0;
    while i < b.len() {
        if b[i..].starts_with(OUT) {
            cur = Some(true);
            i += 3;
        } else if b[i..].starts_with(ERR) {
            cur = Some(false);
            i += 3;
        } else {
            match cur {
                Some(true) => out.push(b[i]),
                Some(false) => err.push(b[i]),
                None => {}
            }
            i += 1;
        }
    }
    (out, err)
}

fn nf(method: &Method, uri: &Uri, what: &str) -> Response {
    errors::toolbox(
        404,
        "NOT_FOUND",
        method.as_str(),
        uri.path(),
        format!("not found: {what} not found"),
    )
}

#[derive(Deserialize)]
pub(crate) struct CreateSessionRequest {
    #[serde(rename = "sessionId")]
    session_id: String,
}

pub(crate) async fn create(tb: Tb, JsonBody(req): JsonBody<CreateSessionRequest>) -> Response {
    let Tb {
        ctx, method, uri, ..
    } = tb;
    if req.session_id.is_empty() {
        return errors::empty(400);
    }
    let tb: &ToolboxState = &ctx.tb;
    if tb.sessions.lock().unwrap().contains_key(&req.session_id) {
        return errors::toolbox(
            409,
            "CONFLICT",
            method.as_str(),
            uri.path(),
            "conflict: session already exists",
        );
    }
    let dir = format!("{HOME}/.daytona/sessions/{}", req.session_id);
    let sandbox = ctx.sandbox();
    let spawned = mkdir_owned(sandbox, &dir).and_then(|_| {
        let mut cmd = sandbox.command(HOME, &base_env(&ctx.env), &[SHELL], true)?;
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.spawn()
    });
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            return errors::toolbox(
                500,
                "INTERNAL_SERVER_ERROR",
                method.as_str(),
                uri.path(),
                e.to_string(),
            )
        }
    };
    let stdin = child.stdin.take().expect("piped");
    let shell = crate::isolation::shell_pid(child.id());
    tb.sessions.lock().unwrap().insert(
        req.session_id,
        Session {
            child,
            shell,
            stdin,
            commands: Vec::new(),
            dir,
            gone: Arc::new(AtomicBool::new(false)),
        },
    );
    StatusCode::CREATED.into_response()
}

fn session_json(sandbox: &SandboxBox, id: &str, s: &mut Session) -> Value {
    let dir = s.dir.clone();
    let commands: Vec<Value> = s
        .commands
        .iter_mut()
        .map(|c| {
            refresh_exit(sandbox, &dir, c);
            command_json(c)
        })
        .collect();
    json!({ "sessionId": id, "commands": commands })
}

pub(crate) async fn list(tb: Tb) -> Response {
    let Tb { ctx, .. } = tb;
    let mut sessions = ctx.tb.sessions.lock().unwrap();
    let all: Vec<Value> = sessions
        .iter_mut()
        .map(|(sid, s)| session_json(&ctx.tb.sandbox, sid, s))
        .collect();
    Json(Value::Array(all)).into_response()
}

pub(crate) async fn get(tb: Tb, Path((_, sid)): Path<(String, String)>) -> Response {
    let Tb {
        ctx, method, uri, ..
    } = tb;
    let mut sessions = ctx.tb.sessions.lock().unwrap();
    match sessions.get_mut(&sid) {
        Some(s) => Json(session_json(&ctx.tb.sandbox, &sid, s)).into_response(),
        None => nf(&method, &uri, "session"),
    }
}

pub(crate) async fn delete(tb: Tb, Path((_, sid)): Path<(String, String)>) -> Response {
    let Tb {
        ctx, method, uri, ..
    } = tb;
    let removed = ctx.tb.sessions.lock().unwrap().remove(&sid);
    match removed {
        Some(mut s) => {
            // Answered once the session's processes ended (or were killed
            // after the grace), its directory removed, like the daemon.
            let dir = ctx.sandbox().host_path(&s.dir);
            let _ = tokio::task::spawn_blocking(move || {
                s.terminate();
                let _ = std::fs::remove_dir_all(dir);
            })
            .await;
            StatusCode::NO_CONTENT.into_response()
        }
        None => nf(&method, &uri, "session"),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ExecRequest {
    command: String,
    #[serde(default)]
    run_async: bool,
    #[serde(default)]
    r#async: bool,
    #[serde(default)]
    suppress_input_echo: bool,
}

/// What the session shell runs for one command (the daemon's wrapper,
/// except that the server, not a `while read` loop, reads the output
/// FIFOs: see `session_log`). The output FIFOs are opened before the
/// input FIFO: opening one blocks until the server's reader opens it, and
/// busybox `sh` does not retry an `open` interrupted by a signal. Opened
/// after the input, a SIGCHLD from the input holder (which exits as soon
/// as the command's stdin is open) could interrupt it, and the command
/// then never ran (exit 1, nothing captured; seen under load).
fn wrapper(dir: &str, is_async: bool) -> String {
    let holder = if is_async {
        r#"sleep 2147483647 > "$_sim_i" &"#
    } else {
        r#": > "$_sim_i" &"#
    };
    format!(
        r#"{{
_sim_d='{dir}'
_sim_i="$_sim_d/input.pipe"
rm -f "$_sim_i"; mkfifo "$_sim_i"
{holder} _sim_h=$!
{{ . "$_sim_d/cmd.sh"; }} > "$_sim_d/stdout.pipe" 2> "$_sim_d/stderr.pipe" < "$_sim_i"
_sim_c=$?
kill "$_sim_h" 2>/dev/null; wait "$_sim_h" 2>/dev/null
rm -f "$_sim_i"
echo "$_sim_c" > "$_sim_d/exit.tmp"
}}
"#
    )
}

/// Where the wrapper of a command whose exit code a fault loses writes it
/// (nothing reads it as an exit code; the log follow ends on it).
const LOST_EXIT: &str = "exit.lost";

/// The session shell's text for one command; `lose_exit`: its exit code
/// goes to [`LOST_EXIT`] instead of being reported.
fn lined(dir: &str, is_async: bool, lose_exit: bool) -> String {
    let w = wrapper(dir, is_async);
    if lose_exit {
        w.replace("exit.tmp", LOST_EXIT)
    } else {
        w
    }
}

fn exec_response(mode: OutputMode, cmd_id: &str, log: &[u8], code: i32) -> Value {
    if mode.combined {
        let out = String::from_utf8_lossy(&strip_markers(log)).into_owned();
        return json!({ "cmdId": cmd_id, "output": out, "stdout": null, "stderr": null, "exitCode": code });
    }
    let raw = String::from_utf8_lossy(log).into_owned();
    if mode.demux {
        let (o, e) = demux(log);
        json!({
            "cmdId": cmd_id,
            "output": raw,
            "stdout": String::from_utf8_lossy(&o),
            "stderr": String::from_utf8_lossy(&e),
            "exitCode": code,
        })
    } else {
        json!({ "cmdId": cmd_id, "output": raw, "stdout": null, "stderr": null, "exitCode": code })
    }
}

pub(crate) async fn exec(
    tb: Tb,
    Path((_, sid)): Path<(String, String)>,
    JsonBody(req): JsonBody<ExecRequest>,
) -> Response {
    if req.command.trim().is_empty() {
        return errors::empty(400);
    }
    if let Some(out) = tb.st.faults.take_exec_start_failure() {
        let cmd_id = uuid::Uuid::new_v4().to_string();
        return Json(json!({ "cmdId": cmd_id, "output": out, "exitCode": -1 })).into_response();
    }
    let lose_exit = tb.st.faults.take_lost_exit_code(&req.command);
    // A daemon from before `suppressInputEcho` (a fault) echoes all input.
    let suppress_input_echo = req.suppress_input_echo && !tb.st.faults.input_echo_unsuppressed();
    let Tb {
        ctx,
        method,
        uri,
        headers,
        ..
    } = tb;
    let is_async = req.run_async || req.r#async;
    let mode = output_mode(&headers);
    let sandbox = ctx.sandbox();
    let cmd_id = uuid::Uuid::new_v4().to_string();
    let dir = {
        let mut sessions = ctx.tb.sessions.lock().unwrap();
        let Some(s) = sessions.get_mut(&sid) else {
            return nf(&method, &uri, "session");
        };
        let dir = command_dir(&s.dir, &cmd_id);
        let prepared = mkdir_owned(sandbox, &dir).and_then(|_| {
            for (name, content) in [("output.log", &b""[..]), ("cmd.sh", req.command.as_bytes())] {
                let host = sandbox.host_path(&format!("{dir}/{name}"));
                std::fs::OpenOptions::new()
                    .write(true)
                    .create(true)
                    .truncate(true)
                    .mode(0o600)
                    .open(&host)?
                    .write_all(content)?;
                chown(&host)?;
            }
            let capture = Capture::new(&sandbox.host_path(&dir));
            capture.start()?;
            let sent = s
                .stdin
                .write_all(lined(&dir, is_async, lose_exit).as_bytes())
                .and_then(|_| s.stdin.flush());
            if let Err(e) = sent {
                capture.abandon();
                return Err(e);
            }
            Ok(capture)
        });
        let capture = match prepared {
            Ok(c) => c,
            Err(e) => {
                return errors::toolbox(
                    400,
                    "BAD_REQUEST",
                    method.as_str(),
                    uri.path(),
                    format!("bad request: failed to write command: {e}"),
                )
            }
        };
        s.commands.push(CommandRec {
            id: cmd_id.clone(),
            command: req.command.clone(),
            exit_code: None,
            capture,
            suppress_input_echo,
        });
        dir
    };
    if is_async {
        return (StatusCode::ACCEPTED, Json(json!({ "cmdId": cmd_id }))).into_response();
    }
    loop {
        let code = {
            let mut sessions = ctx.tb.sessions.lock().unwrap();
            let Some(s) = sessions.get_mut(&sid) else {
                return errors::toolbox(
                    400,
                    "BAD_REQUEST",
                    method.as_str(),
                    uri.path(),
                    "bad request: session cancelled",
                );
            };
            let sdir = s.dir.clone();
            s.commands
                .iter_mut()
                .find(|c| c.id == cmd_id)
                .and_then(|c| refresh_exit(sandbox, &sdir, c))
        };
        if let Some(code) = code {
            let log =
                std::fs::read(sandbox.host_path(&format!("{dir}/output.log"))).unwrap_or_default();
            return Json(exec_response(mode, &cmd_id, &log, code)).into_response();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn command(
    tb: Tb,
    Path((_, sid, cid)): Path<(String, String, String)>,
) -> Response {
    let Tb {
        ctx, method, uri, ..
    } = tb;
    let mut sessions = ctx.tb.sessions.lock().unwrap();
    let Some(s) = sessions.get_mut(&sid) else {
        return nf(&method, &uri, "session");
    };
    let sdir = s.dir.clone();
    match s.commands.iter_mut().find(|c| c.id == cid) {
        Some(c) => {
            refresh_exit(&ctx.tb.sandbox, &sdir, c);
            Json(command_json(c)).into_response()
        }
        None => nf(&method, &uri, "command"),
    }
}

/// The sandbox dir of a known command and its session's deleted flag,
/// or the 404 to answer.
fn locate(
    tb: &ToolboxState,
    sid: &str,
    cid: &str,
    method: &Method,
    uri: &Uri,
) -> Result<(String, Arc<AtomicBool>), Response> {
    let sessions = tb.sessions.lock().unwrap();
    let Some(s) = sessions.get(sid) else {
        return Err(nf(method, uri, "session"));
    };
    if !s.commands.iter().any(|c| c.id == cid) {
        return Err(nf(method, uri, "command"));
    }
    Ok((command_dir(&s.dir, cid), s.gone.clone()))
}

#[allow(clippy::too_many_arguments)]
pub(crate) async fn logs(
    tb: Tb,
    Path((_, sid, cid)): Path<(String, String, String)>,
    RawQuery(q): RawQuery,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Tb {
        ctx,
        st,
        method,
        uri,
        headers,
    } = tb;
    let (dir, gone) = match locate(&ctx.tb, &sid, &cid, &method, &uri) {
        Ok(d) => d,
        Err(r) => return r,
    };
    let mode = output_mode(&headers);
    let follow = q
        .as_deref()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .unwrap_or_default()
        .iter()
        .any(|(k, v)| k == "follow" && v == "true");
    let log_path = ctx.sandbox().host_path(&format!("{dir}/output.log"));
    let exit_path = ctx.sandbox().host_path(&format!("{dir}/exit_code"));
    if let Ok(ws) = ws
        .ok()
        .filter(|_| !st.faults.log_follow_refused())
        .ok_or(())
    {
        return ws.on_upgrade(move |socket| {
            let frame = st.opts.frame_latency;
            stream_log(
                socket,
                Followed {
                    log_path,
                    exit_path,
                    gone,
                    follow,
                    combined: mode.combined,
                },
                frame,
            )
        });
    }
    let log = match std::fs::read(&log_path) {
        Ok(l) => l,
        Err(_) => return nf(&method, &uri, "log file"),
    };
    if mode.demux && !mode.combined {
        let (o, e) = demux(&log);
        return Json(json!({
            "output": String::from_utf8_lossy(&log),
            "stdout": String::from_utf8_lossy(&o),
            "stderr": String::from_utf8_lossy(&e),
        }))
        .into_response();
    }
    let body = if mode.combined {
        strip_markers(&log)
    } else {
        log
    };
    (
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        String::from_utf8_lossy(&body).into_owned(),
    )
        .into_response()
}

/// Drop complete markers from a streamed chunk, keeping a possible partial marker for the next one.
fn filter_chunk(pending: &mut Vec<u8>, chunk: &[u8]) -> Vec<u8> {
    pending.extend_from_slice(chunk);
    let mut keep = 0;
    for n in (1..3).rev() {
        if pending.len() >= n {
            let tail = &pending[pending.len() - n..];
            if OUT.starts_with(tail) || ERR.starts_with(tail) {
                keep = n;
                break;
            }
        }
    }
    let cut = pending.len() - keep;
    let out = strip_markers(&pending[..cut]);
    pending.drain(..cut);
    out
}

/// What a log stream reads.
struct Followed {
    log_path: std::path::PathBuf,
    exit_path: std::path::PathBuf,
    gone: Arc<AtomicBool>,
    follow: bool,
    combined: bool,
}

/// The daemon's reads of a followed log (apps/daemon/internal/util/log_reader.go):
/// at most this many bytes each, one WebSocket frame per read.
pub(crate) const FRAME_MAX: usize = 1024;
/// Empty reads, this far apart, before the daemon looks for the exit code
/// (and ends the stream if it is there): a followed log closes about a
/// second after its last output.
const EMPTY_READS: u32 = 50;
const EMPTY_READ_PAUSE: Duration = Duration::from_millis(20);

/// Follow a command's log over `socket` as the daemon does: the log from
/// its start (what was logged already, then live output), in reads of at
/// most [`FRAME_MAX`] bytes, each sent as a binary frame (markers removed
/// for combined-output clients); without `follow` it ends at the end of
/// the file; following, it ends once [`EMPTY_READS`] reads in a row found
/// nothing and the exit code is there, or when the session is deleted.
/// The socket closes with 1000 and no reason. Each frame leaves
/// `frame_latency` after its bytes were read, as on a network link with
/// that one-way delay: frames in flight do not wait for each other.
async fn stream_log(mut socket: WebSocket, f: Followed, frame_latency: std::time::Duration) {
    use std::collections::VecDeque;
    use std::io::Read;
    use tokio::time::Instant;
    let mut file = std::fs::File::open(&f.log_path).ok();
    let mut pending = Vec::new();
    let mut outbox: VecDeque<(Instant, Message)> = VecDeque::new();
    let mut closing = false;
    let mut empty_reads = 0u32;
    loop {
        let mut got = false;
        if !closing {
            let mut buf = vec![0u8; FRAME_MAX];
            let n = file
                .as_mut()
                .and_then(|f| f.read(&mut buf).ok())
                .unwrap_or(0);
            let mut done = false;
            if n > 0 {
                empty_reads = 0;
                let data = &buf[..n];
                let out = if f.combined {
                    filter_chunk(&mut pending, data)
                } else {
                    data.to_vec()
                };
                if !out.is_empty() {
                    outbox.push_back((Instant::now() + frame_latency, Message::Binary(out.into())));
                }
                got = true;
            } else if !f.follow || f.gone.load(Ordering::SeqCst) {
                done = true;
            } else {
                empty_reads += 1;
                if empty_reads >= EMPTY_READS {
                    done = f.exit_path.exists() || f.exit_path.with_file_name(LOST_EXIT).exists();
                    empty_reads = 0;
                }
            }
            if done {
                if f.combined && !pending.is_empty() {
                    let rest = std::mem::take(&mut pending);
                    outbox
                        .push_back((Instant::now() + frame_latency, Message::Binary(rest.into())));
                }
                outbox.push_back((
                    Instant::now() + frame_latency,
                    Message::Close(Some(CloseFrame {
                        code: 1000,
                        reason: "".into(),
                    })),
                ));
                closing = true;
            }
        }
        let due = outbox.front().map(|(at, _)| *at);
        tokio::select! {
            msg = socket.recv() => {
                match msg {
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                    _ => {}
                }
            }
            _ = async { tokio::time::sleep_until(due.unwrap_or_else(Instant::now)).await }, if due.is_some() => {
                if let Some((_, m)) = outbox.pop_front() {
                    let last = matches!(m, Message::Close(_));
                    if socket.send(m).await.is_err() || last {
                        return;
                    }
                }
            }
            // After a read with data the daemon reads again at once;
            // after an empty one it sleeps 20 ms.
            _ = tokio::time::sleep(if got { Duration::ZERO } else { EMPTY_READ_PAUSE }), if !closing => {}
        }
    }
}

#[derive(Deserialize)]
pub(crate) struct InputRequest {
    data: String,
}

/// The daemon's `SendInput` (apps/daemon/pkg/session/input.go): 410 for a
/// command whose exit code was already read (the cached one: a command
/// that ended unread still gets the pipe's error, 500 `failed to open
/// input pipe`, as its FIFO is removed); a newline is added to data
/// without one; the data is echoed into the command's log as stdout
/// unless the command was started with `suppressInputEcho`.
pub(crate) async fn input(
    tb: Tb,
    Path((_, sid, cid)): Path<(String, String, String)>,
    JsonBody(req): JsonBody<InputRequest>,
) -> Response {
    let Tb {
        ctx, method, uri, ..
    } = tb;
    let (dir, suppress) = {
        let sessions = ctx.tb.sessions.lock().unwrap();
        let Some(s) = sessions.get(&sid) else {
            return nf(&method, &uri, "session");
        };
        let Some(c) = s.commands.iter().find(|c| c.id == cid) else {
            return nf(&method, &uri, "command");
        };
        if let Some(code) = c.exit_code {
            return errors::toolbox(
                410,
                "GONE",
                method.as_str(),
                uri.path(),
                format!("gone: command has already completed with exit code {code}"),
            );
        }
        (command_dir(&s.dir, &cid), c.suppress_input_echo)
    };
    let pipe = ctx.sandbox().host_path(&format!("{dir}/input.pipe"));
    let mut data = req.data.into_bytes();
    if !data.ends_with(b"\n") {
        data.push(b'\n');
    }
    // The daemon's open blocks until the command has the FIFO open for
    // reading; a FIFO that is not there (the command ended) fails at once.
    let deadline = Instant::now() + Duration::from_secs(30);
    let opened = loop {
        let o = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&pipe);
        match o {
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            o => break o,
        }
    };
    let written = match opened {
        Ok(mut f) => f.write_all(&data),
        Err(e) => {
            return errors::toolbox(
                500,
                "INTERNAL_SERVER_ERROR",
                method.as_str(),
                uri.path(),
                format!("internal server error: failed to open input pipe: {e}"),
            )
        }
    };
    if let Err(e) = written {
        return errors::toolbox(
            500,
            "INTERNAL_SERVER_ERROR",
            method.as_str(),
            uri.path(),
            format!("internal server error: failed to write to input pipe: {e}"),
        );
    }
    if !suppress {
        let log = ctx.sandbox().host_path(&format!("{dir}/output.log"));
        if let Ok(mut f) = std::fs::OpenOptions::new().append(true).open(log) {
            let mut rec = OUT.to_vec();
            rec.extend_from_slice(&data);
            let _ = f.write_all(&rec);
        }
    }
    StatusCode::NO_CONTENT.into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_split_and_stripped() {
        let log = b"\x01\x01\x01out1\n\x02\x02\x02err1\n\x01\x01\x01out2\n";
        let (o, e) = demux(log);
        assert_eq!(o, b"out1\nout2\n");
        assert_eq!(e, b"err1\n");
        assert_eq!(strip_markers(log), b"out1\nerr1\nout2\n");
        let mut pending = Vec::new();
        let mut got = filter_chunk(&mut pending, b"a\n\x01\x01");
        got.extend(filter_chunk(&mut pending, b"\x01b\n"));
        assert_eq!(got, b"a\nb\n");
    }
}
