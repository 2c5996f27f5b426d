//! `attach()` sessions over the toolbox PTY: create, WebSocket connect,
//! the first control frame, binary output, input as binary frames, resize
//! by its own call, the exit code from the close reason. Daytona's PTY
//! runs a login shell, not a command: rfs uploads a launcher, types one
//! short `exec` line running it, and drops everything the shell printed
//! before the wrapper's marker, so the screen starts with the command's
//! own output. A connection closed without an exit code (the daemon drops
//! a slow reader with 1008) ends the channel with an unknown outcome,
//! which the terminal session reports as lost.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use futures_util::{SinkExt, StreamExt};
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;

use super::http::enc;
use super::http::Call;
use super::shell_text;
use super::Api;
use crate::provider::{
    ExecOutcome, ProviderError, ProviderResult, PtyChannel, PtyInput, PtyRequest,
};

/// Output chunks buffered before the session waits for the reader.
const OUTPUT_BUFFER: usize = 256;
/// The shell's preamble (prompt, echo) is dropped up to the marker; more
/// than this without a marker is an error.
const PREAMBLE_LIMIT: usize = 256 * 1024;

#[derive(Deserialize)]
struct Control {
    #[serde(rename = "type")]
    kind: String,
    status: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CloseReason {
    exit_code: Option<i32>,
}

/// The exit code in a close frame's reason (`{"exitCode":N,...}`).
pub(super) fn exit_from_close(code: Option<u16>, reason: &str) -> Option<i32> {
    match serde_json::from_str::<CloseReason>(reason) {
        Ok(r) if r.exit_code.is_some() => r.exit_code,
        _ => {
            let _ = code;
            None
        }
    }
}

/// Where the preamble ends: the byte after the marker line, if seen.
pub(super) fn after_marker(buf: &[u8], marker: &str) -> Option<usize> {
    let m = marker.as_bytes();
    let at = buf.windows(m.len()).position(|w| w == m)?;
    let mut end = at + m.len();
    while end < buf.len() && (buf[end] == b'\r' || buf[end] == b'\n') {
        end += 1;
    }
    // The line ending may not have arrived yet.
    if end == at + m.len() && end == buf.len() {
        return None;
    }
    Some(end)
}

impl Api {
    /// Open a PTY session running `req.argv` in sandbox `id`.
    pub async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        if req.argv.is_empty() {
            return Err(ProviderError::Invalid(
                "cannot open a session with an empty command".into(),
            ));
        }
        if !req.cwd.starts_with('/') {
            return Err(ProviderError::Invalid(format!(
                "working directory `{}` is not an absolute path",
                req.cwd
            )));
        }
        shell_text::check_env(&req.env)?;
        let base = self.toolbox(id).await?;
        let token = shell_text::token();
        let pty_id = format!("rfs-pty-{token}");
        // The launcher is uploaded, and the line typed stays short (see
        // `shell_text::pty_launcher`); it removes itself when it runs.
        let launcher = shell_text::pty_launcher_path(&token);
        let script = shell_text::pty_launcher(&token, &req.cwd, &req.env, &req.argv);
        self.upload_bytes(id, script.into_bytes(), &launcher)
            .await?;
        let opened = self.connect_pty(id, &base, &pty_id, &token, req).await;
        if opened.is_err() {
            let _ = self.delete_file(id, &launcher).await;
        }
        opened
    }

    /// Create the PTY session, connect to it and type the launcher's line.
    async fn connect_pty(
        &self,
        id: &str,
        base: &str,
        pty_id: &str,
        token: &str,
        req: &PtyRequest,
    ) -> ProviderResult<PtyChannel> {
        let call = Call::new(
            "create terminal session",
            Some(id),
            Method::POST,
            format!("{base}/process/pty"),
        );
        let body = json!({
            "id": pty_id,
            "cwd": req.cwd,
            "envs": {},
            "cols": req.cols.clamp(1, 1000),
            "rows": req.rows.clamp(1, 1000),
            "lazyStart": false,
        });
        let created: serde_json::Value = self.http.json(&call, |r| r.json(&body)).await?;
        let session = created
            .get("sessionId")
            .and_then(|v| v.as_str())
            .unwrap_or(pty_id)
            .to_owned();
        let url = format!("{base}/process/pty/{}/connect", enc(&session));
        let mut ws = match self.ws_connect("connect terminal session", id, &url).await {
            Ok(ws) => ws,
            Err(e) => {
                let _ = self.delete_pty(base, id, &session).await;
                return Err(e);
            }
        };
        // The first frame says whether the server attached the PTY.
        let first = tokio::time::timeout(super::http::REQUEST_TIMEOUT, ws.next()).await;
        let ok = match &first {
            Ok(Some(Ok(Message::Text(t)))) => match serde_json::from_str::<Control>(t) {
                Ok(c) if c.kind == "control" && c.status.as_deref() == Some("connected") => Ok(()),
                Ok(c) => Err(c.error.unwrap_or_else(|| format!("status {:?}", c.status))),
                Err(_) => Err(format!("unexpected first frame `{t}`")),
            },
            Ok(Some(Ok(m))) => Err(format!("unexpected first frame {m:?}")),
            Ok(Some(Err(e))) => Err(e.to_string()),
            Ok(None) => Err("the connection closed".into()),
            Err(_) => Err("no control frame in time".into()),
        };
        if let Err(why) = ok {
            let _ = self.delete_pty(base, id, &session).await;
            return Err(ProviderError::Api(format!(
                "daytona: terminal session (sandbox {id}) did not connect: {why}"
            )));
        }
        let line = shell_text::pty_line(token);
        if let Err(e) = ws.send(Message::Binary(line.into_bytes().into())).await {
            let _ = self.delete_pty(base, id, &session).await;
            return Err(ProviderError::Api(format!(
                "daytona: terminal session (sandbox {id}): {e}"
            )));
        }
        Ok(self.spawn_pumps(
            base.to_owned(),
            id.to_owned(),
            session,
            token.to_owned(),
            ws,
        ))
    }

    async fn delete_pty(&self, base: &str, id: &str, session: &str) -> ProviderResult<()> {
        let call = Call::new(
            "close terminal session",
            Some(id),
            Method::DELETE,
            format!("{base}/process/pty/{}", enc(session)),
        );
        self.delete_gone_ok(&call, |r| r).await
    }

    fn spawn_pumps(
        &self,
        base: String,
        id: String,
        session: String,
        token: String,
        ws: super::ws::Ws,
    ) -> PtyChannel {
        let (input_tx, input_rx) = mpsc::unbounded_channel::<PtyInput>();
        let (output_tx, output_rx) = mpsc::channel::<Vec<u8>>(OUTPUT_BUFFER);
        let (exit_tx, exit_rx) = oneshot::channel();
        let (ws_tx, ws_rx) = ws.split();
        let pumps = Pumps {
            api: self.clone(),
            base,
            id,
            session,
            token,
            killed: Arc::new(AtomicBool::new(false)),
            ready: Arc::new(tokio::sync::Notify::new()),
            is_ready: Arc::new(AtomicBool::new(false)),
            done: tokio_util::sync::CancellationToken::new(),
        };
        tokio::spawn(pumps.clone().input(input_rx, ws_tx));
        tokio::spawn(pumps.output(ws_rx, output_tx, exit_tx));
        PtyChannel {
            input: input_tx,
            output: output_rx,
            exit: exit_rx,
        }
    }
}

type WsSink = futures_util::stream::SplitSink<super::ws::Ws, Message>;
type WsStream = futures_util::stream::SplitStream<super::ws::Ws>;

/// What the two pumps of a terminal session share.
#[derive(Clone)]
struct Pumps {
    api: Api,
    base: String,
    id: String,
    session: String,
    token: String,
    /// rfs killed the session.
    killed: Arc<AtomicBool>,
    /// The command runs (its ready marker was seen).
    ready: Arc<tokio::sync::Notify>,
    is_ready: Arc<AtomicBool>,
    /// The output pump ended.
    done: tokio_util::sync::CancellationToken,
}

impl Pumps {
    /// Input: held until the command runs (keys typed earlier would go to
    /// the login shell), then sent as binary frames; a kill or resize is
    /// a toolbox call.
    async fn input(self, mut input_rx: mpsc::UnboundedReceiver<PtyInput>, mut ws_tx: WsSink) {
        let mut pending: Vec<Vec<u8>> = vec![];
        loop {
            let msg = tokio::select! {
                m = input_rx.recv() => m,
                _ = self.ready.notified(), if !pending.is_empty() => {
                    for p in pending.drain(..) {
                        let _ = ws_tx.send(Message::Binary(p.into())).await;
                    }
                    continue;
                }
                _ = self.done.cancelled() => return,
            };
            match msg {
                None | Some(PtyInput::Kill) => {
                    self.killed.store(true, Ordering::SeqCst);
                    let _ = self.api.kill_group(&self.id, &self.token).await;
                    let _ = self
                        .api
                        .delete_pty(&self.base, &self.id, &self.session)
                        .await;
                    if msg.is_none() {
                        return;
                    }
                }
                Some(PtyInput::Data(d)) => {
                    if self.is_ready.load(Ordering::SeqCst) {
                        for p in pending.drain(..) {
                            let _ = ws_tx.send(Message::Binary(p.into())).await;
                        }
                        if ws_tx.send(Message::Binary(d.into())).await.is_err() {
                            return;
                        }
                    } else {
                        pending.push(d);
                    }
                }
                Some(PtyInput::Resize { cols, rows }) => self.resize(cols, rows).await,
            }
        }
    }

    async fn resize(&self, cols: u16, rows: u16) {
        let call = Call::new(
            "resize terminal session",
            Some(&self.id),
            Method::POST,
            format!("{}/process/pty/{}/resize", self.base, enc(&self.session)),
        );
        let body = json!({ "cols": cols.clamp(1, 1000), "rows": rows.clamp(1, 1000) });
        let _ = self.api.http.send(&call, |r| r.json(&body)).await;
    }

    /// Output: drop the preamble, forward the rest, read the exit.
    async fn output(
        self,
        mut ws_rx: WsStream,
        output_tx: mpsc::Sender<Vec<u8>>,
        exit_tx: oneshot::Sender<ExecOutcome>,
    ) {
        let marker = shell_text::pty_ready(&self.token);
        let nocwd = shell_text::pty_nocwd(&self.token);
        let mut pre: Option<Vec<u8>> = Some(vec![]);
        let mut exit: Option<i32> = None;
        let mut refused = false;
        while let Some(msg) = ws_rx.next().await {
            let bytes = match msg {
                Ok(Message::Binary(b)) => b.to_vec(),
                Ok(Message::Text(t)) => t.as_bytes().to_vec(),
                Ok(Message::Close(frame)) => {
                    if let Some(f) = frame {
                        let code: u16 = f.code.into();
                        // No exit code in the reason: unknown, never
                        // success.
                        exit = exit_from_close(Some(code), &f.reason);
                    }
                    break;
                }
                Ok(_) => continue,
                Err(_) => break,
            };
            if let Some(buf) = pre.as_mut() {
                buf.extend_from_slice(&bytes);
                if let Some(end) = after_marker(buf, &marker) {
                    let rest = buf.split_off(end);
                    pre = None;
                    self.is_ready.store(true, Ordering::SeqCst);
                    self.ready.notify_one();
                    if !rest.is_empty() {
                        let _ = output_tx.send(rest).await;
                    }
                } else if after_marker(buf, &nocwd).is_some() {
                    refused = true;
                } else if buf.len() > PREAMBLE_LIMIT {
                    // No marker: show what the shell said.
                    let all = pre.take().unwrap_or_default();
                    let _ = output_tx.send(all).await;
                }
                continue;
            }
            let _ = output_tx.send(bytes).await;
        }
        if let Some(buf) = pre.take() {
            // The command never started: show the shell's words.
            if !refused {
                let _ = output_tx.send(buf).await;
            }
        }
        drop(output_tx);
        self.done.cancel();
        let killed = self.killed.load(Ordering::SeqCst);
        let outcome = ExecOutcome {
            exit: if killed || refused { None } else { exit },
            signal: killed.then_some(9),
            timed_out: false,
            cancelled: killed,
        };
        let _ = exit_tx.send(outcome);
        let _ = self
            .api
            .delete_pty(&self.base, &self.id, &self.session)
            .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn close_reason_carries_the_exit_code() {
        assert_eq!(
            exit_from_close(Some(1011), r#"{"exitCode":3,"exitReason":"non-zero exit"}"#),
            Some(3)
        );
        assert_eq!(exit_from_close(Some(1000), r#"{"exitCode":0}"#), Some(0));
        assert_eq!(exit_from_close(Some(1011), ""), None);
        assert_eq!(exit_from_close(Some(1008), "slow consumer"), None);
    }

    #[test]
    fn the_preamble_ends_after_the_marker_line() {
        let m = "rfs-abc-ready";
        assert_eq!(
            after_marker(b"$ exec ... rfs-%s-%s\r\nrfs-abc-ready\r\nhello", m),
            Some(37)
        );
        assert_eq!(after_marker(b"prompt rfs-abc-rea", m), None);
        assert_eq!(after_marker(b"rfs-abc-ready", m), None);
        assert_eq!(after_marker(b"rfs-abc-ready\n", m), Some(14));
    }
}
