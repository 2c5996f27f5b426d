//! `POST /process/execute`: the command is piped on stdin to the daemon's
//! shell, stdout and stderr share one pipe, the shell leads its own process
//! group; a missing `cwd` reproduces Go's misleading `fork/exec` error.

use super::Tb;
use std::collections::BTreeMap;
use std::os::fd::OwnedFd;
use std::process::Stdio;
use std::time::Duration;

use axum::body::Bytes;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::errors;
use crate::isolation::{base_env, HOME, SHELL};

#[derive(Deserialize)]
struct ExecuteRequest {
    command: String,
    cwd: Option<String>,
    #[serde(default)]
    envs: BTreeMap<String, String>,
    timeout: Option<u32>,
}

pub(crate) fn valid_env_key(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The error Go's `os/exec` reports when the child's `chdir` fails under `Setpgid`.
pub(crate) fn fork_exec_error(sandbox: &crate::isolation::SandboxBox, cwd: &str) -> Option<String> {
    match sandbox.resolve(cwd) {
        Some(p) if p.is_dir() => None,
        Some(p) if p.exists() => Some(format!("fork/exec {SHELL}: not a directory")),
        _ => Some(format!("fork/exec {SHELL}: no such file or directory")),
    }
}

pub(crate) async fn execute(tb: Tb, body: Bytes) -> Response {
    let Tb {
        ctx, method, uri, ..
    } = tb;
    let bad = |m: String| {
        errors::toolbox(
            400,
            "BAD_REQUEST",
            method.as_str(),
            uri.path(),
            format!("bad request: {m}"),
        )
    };
    let req: ExecuteRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return bad(format!("invalid request body: {e}")),
    };
    if req.command.trim().is_empty() {
        return bad("command cannot be empty or whitespace-only".into());
    }
    if let Some(k) = req.envs.keys().find(|k| !valid_env_key(k)) {
        return bad(format!("invalid environment variable key: {k}"));
    }
    let cwd = req.cwd.clone().unwrap_or_else(|| HOME.to_string());
    if let Some(msg) = fork_exec_error(ctx.sandbox(), &cwd) {
        return Json(json!({ "exitCode": -1, "result": msg })).into_response();
    }
    let mut env = ctx.env.clone();
    env.extend(req.envs);
    let env = base_env(&env);
    match run(
        ctx.sandbox(),
        &cwd,
        &env,
        &req.command,
        req.timeout.filter(|t| *t > 0),
    )
    .await
    {
        Ok(Outcome::Exited(code, out)) => {
            Json(json!({ "exitCode": code, "result": out })).into_response()
        }
        Ok(Outcome::TimedOut) => errors::toolbox(
            408,
            "REQUEST_TIMEOUT",
            method.as_str(),
            uri.path(),
            "request timeout: command execution timeout",
        ),
        Err(e) => Json(json!({ "exitCode": -1, "result": e.to_string() })).into_response(),
    }
}

enum Outcome {
    Exited(i32, String),
    TimedOut,
}

async fn run(
    sandbox: &crate::isolation::SandboxBox,
    cwd: &str,
    env: &[(String, String)],
    command: &str,
    timeout: Option<u32>,
) -> std::io::Result<Outcome> {
    let (rx, tx) = nix::unistd::pipe().map_err(std::io::Error::from)?;
    let tx2: OwnedFd = tx.try_clone()?;
    let mut cmd = sandbox.command(cwd, env, &[SHELL], true)?;
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::from(tx))
        .stderr(Stdio::from(tx2));
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.kill_on_drop(true);
    let mut child = cmd.spawn()?;
    drop(cmd);
    let nsenter = child.id();
    let mut stdin = child.stdin.take().expect("piped");
    let script = command.to_string();
    tokio::spawn(async move {
        let _ = stdin.write_all(script.as_bytes()).await;
        let _ = stdin.shutdown().await;
    });
    let mut reader = tokio::net::unix::pipe::Receiver::from_owned_fd(rx)?;
    let read = tokio::spawn(async move {
        let mut buf = Vec::new();
        let _ = reader.read_to_end(&mut buf).await;
        buf
    });
    let status = match timeout {
        Some(secs) => {
            match tokio::time::timeout(Duration::from_secs(secs.into()), child.wait()).await {
                Ok(s) => s?,
                Err(_) => {
                    // the daemon kills the shell's group; here the shell leads its own session
                    if let Some(shell) = nsenter.and_then(crate::isolation::shell_pid) {
                        crate::isolation::kill_session(shell);
                    }
                    let _ = child.start_kill();
                    let _ = child.wait().await;
                    read.abort();
                    return Ok(Outcome::TimedOut);
                }
            }
        }
        None => child.wait().await?,
    };
    // Like Go's exec, wait for the output pipe to close; bounded, since a
    // background process that keeps it open would otherwise hang the call.
    let out = match tokio::time::timeout(Duration::from_secs(2), read).await {
        Ok(Ok(b)) => b,
        _ => Vec::new(),
    };
    // os.ProcessState.ExitCode(): -1 when a signal ended the shell.
    let code = status.code().unwrap_or(-1);
    Ok(Outcome::Exited(
        code,
        String::from_utf8_lossy(&out).into_owned(),
    ))
}
