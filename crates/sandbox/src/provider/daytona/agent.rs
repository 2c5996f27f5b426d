//! Steps in about two round trips: a long-lived *agent* per sandbox. An
//! agent is one session command, started once, reading command lines on
//! its stdin (`POST …/command/{cmdId}/input`) and running each through
//! the usual wrapper; its log is followed on one WebSocket that stays
//! open. A step is then one request (the input) and the output frames of
//! the stream that is already open; the exit code comes in the stream, as
//! a line with the step's random token that the wrapper prints on stdout
//! and on stderr after the command (each stream is ordered on its own,
//! so the step ends when both lines are in). No session is created or
//! deleted per step and no status is read.
//!
//! An agent runs one step at a time; a step finding none idle starts
//! another. An agent whose step did not end cleanly (killed, its log lost
//! because the command removed the toolbox's session directory, the
//! stream closed) is not reused: its session is deleted off the step's
//! path. A server that cannot give an agent (no follow stream, no input)
//! makes rfs use a session per command as before.
//!
//! The daemon appends what is sent to a command's input to its log as
//! stdout unless the command was started with `suppressInputEcho: true`
//! (apps/daemon/pkg/session/input.go). The agent asks for that, and an
//! [`EchoFilter`] still drops a whole stdout line that is exactly a line
//! rfs sent (a daemon from before the field echoes anyway, and may do so
//! after the step's end line: the line is dropped in whichever step's
//! output it lands). The end line cannot be taken for an echo: rfs sends
//! it as base64, and the marker is built by `printf` from the token.

use std::time::Duration;

use futures_util::StreamExt;
use reqwest::Method;
use serde::Deserialize;
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;

use super::http::enc;
use super::http::Call;
use super::log_watch::{note_unended, How, Pieces, Watching};
use super::logs::{end_lines, EndScan, StreamDemux};
use super::outcome::SIGKILL;
use super::relay::Relay;
use super::ws::Ws;
use super::{lock, shell_text, Api};
use crate::provider::{ExecOutcome, ExecRequest, OutputSink, ProviderResult};

/// The agent's loop: each line of its stdin is a command text in base64
/// (a command line may span lines). It says it is ready first.
const LOOP: &str = "command -v base64 >/dev/null 2>&1 || exit 97; echo rfs-agent-ready; while IFS= read -r rfs_line; do eval \"$(printf '%s' \"$rfs_line\" | base64 -d)\"; done";
/// The agent's first line on stdout.
const READY: &[u8] = b"rfs-agent-ready\n";
/// How long a new agent may take to say it is ready.
const READY_WITHIN: Duration = Duration::from_secs(10);

/// One agent: its session, its command and the open follow stream.
pub struct Agent {
    sid: String,
    cmd: String,
    ws: Ws,
    demux: StreamDemux,
    echo: EchoFilter,
}

/// Input lines the daemon may still echo, at most this many.
const ECHOES_KEPT: usize = 16;

/// Drops, from one stream, whole lines that are exactly a line rfs sent
/// as input (the daemon's echo), once each, wherever they land. An echo
/// is one log line of its own (the daemon writes it in one append, and
/// the command's output is logged a whole line at a time), so only bytes
/// at a line start are held back, and only while they may be an echo.
#[derive(Debug)]
pub struct EchoFilter {
    pending: Vec<Vec<u8>>,
    at_start: bool,
    held: Vec<u8>,
}

impl Default for EchoFilter {
    fn default() -> Self {
        EchoFilter {
            pending: vec![],
            at_start: true,
            held: vec![],
        }
    }
}

impl EchoFilter {
    /// A line sent as input (ending in a newline).
    pub fn expect(&mut self, line: &[u8]) {
        if self.pending.len() >= ECHOES_KEPT {
            self.pending.remove(0);
        }
        self.pending.push(line.to_vec());
    }

    /// The bytes of `b` that are not an echo (in order).
    pub fn push(&mut self, b: &[u8]) -> Vec<u8> {
        let mut out = Vec::with_capacity(b.len());
        for &c in b {
            if !self.at_start {
                out.push(c);
                self.at_start = c == b'\n';
                continue;
            }
            self.held.push(c);
            let n = self.held.len();
            if let Some(i) = self.pending.iter().position(|p| p[..] == self.held[..]) {
                self.pending.remove(i);
                self.held.clear();
                continue;
            }
            let may_be_echo = self
                .pending
                .iter()
                .any(|p| p.len() > n && p[n - 1] == c && p[..n - 1] == self.held[..n - 1]);
            if !may_be_echo {
                out.append(&mut self.held);
                self.at_start = c == b'\n';
            }
        }
        out
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Started {
    cmd_id: Option<String>,
}

impl Agent {
    /// Wait for the ready line (stdout, before any step); `false` when
    /// the stream ends first (no `base64`, the loop did not start).
    async fn ready(&mut self) -> bool {
        let mut out = vec![];
        while let Some(Ok(m)) = self.ws.next().await {
            let b = match m {
                Message::Binary(b) => b.to_vec(),
                Message::Text(t) => t.as_bytes().to_vec(),
                Message::Close(_) => return false,
                _ => continue,
            };
            for (is_err, piece) in self.demux.push(&b) {
                if !is_err {
                    out.extend_from_slice(&self.echo.push(&piece));
                }
            }
            if out.starts_with(READY) {
                return true;
            }
            if out.len() >= READY.len() {
                return false;
            }
        }
        false
    }
}

/// How an agent's step ended.
enum Ended {
    /// Both end lines came: the agent may run the next step.
    Clean(Option<i32>),
    /// Ended, but the agent is not reused.
    Spent(Option<i32>),
    Stopped {
        timed_out: bool,
        killed: bool,
    },
}

impl Api {
    /// Start an agent in sandbox `id`; `None` when the server cannot give
    /// one (the caller runs a session per command).
    async fn start_agent(&self, base: &str, id: &str) -> Option<Agent> {
        let sid = format!("rfs-agent-{}", shell_text::token());
        let create = Call::new(
            "create session",
            Some(id),
            Method::POST,
            format!("{base}/process/session"),
        );
        self.http
            .send(&create, |r| r.json(&json!({ "sessionId": sid })))
            .await
            .ok()?;
        let call = Call::new(
            "start the step agent",
            Some(id),
            Method::POST,
            format!("{base}/process/session/{}/exec", enc(&sid)),
        );
        let started: Option<Started> = self
            .http
            .json(&call, |r| {
                // Input is not to be echoed into the log (the daemon's
                // default is to echo it as stdout).
                r.json(&json!({
                    "command": LOOP,
                    "runAsync": true,
                    "async": true,
                    "suppressInputEcho": true
                }))
            })
            .await
            .ok();
        let Some(cmd) = started.and_then(|s| s.cmd_id) else {
            let _ = self.delete_session(id, &sid).await;
            return None;
        };
        let ready = match self.open_follow(base, id, &sid, &cmd).await {
            Some(ws) => {
                let mut a = Agent {
                    sid: sid.clone(),
                    cmd,
                    ws,
                    demux: StreamDemux::default(),
                    echo: EchoFilter::default(),
                };
                let ok = tokio::time::timeout(READY_WITHIN, a.ready())
                    .await
                    .unwrap_or(false);
                ok.then_some(a)
            }
            None => None,
        };
        if ready.is_none() {
            let _ = self.delete_session(id, &sid).await;
        }
        ready
    }

    /// An idle agent of sandbox `id`, or a new one.
    pub async fn agent(&self, base: &str, id: &str) -> Option<Agent> {
        if !self.step_agents {
            return None;
        }
        if lock(&self.agents).get(id).is_some_and(|a| a.unavailable) {
            return None;
        }
        let idle = lock(&self.agents).get_mut(id).and_then(|a| a.idle.pop());
        if idle.is_some() {
            return idle;
        }
        let a = self.start_agent(base, id).await;
        if a.is_none() {
            lock(&self.agents)
                .entry(id.to_owned())
                .or_default()
                .unavailable = true;
        }
        a
    }

    fn give_back(&self, id: &str, a: Agent) {
        lock(&self.agents)
            .entry(id.to_owned())
            .or_default()
            .idle
            .push(a);
    }

    /// Forget an agent that will not run another step (its session is
    /// deleted off the step's path).
    fn retire(&self, id: &str, a: Agent) {
        let api = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let mut a = a;
            let _ = a.ws.close(None).await;
            let _ = api.delete_session(&id, &a.sid).await;
        });
    }

    /// Run `req` through `agent`; `None` when the agent can take no input
    /// any more and nothing was sent (the daemon answers 410 for an ended
    /// command, 500 `failed to open input pipe` when its input FIFO is gone,
    /// as when a step removed `$HOME/.daytona`): the agent is retired and
    /// the caller may use another.
    pub async fn exec_on_agent(
        &self,
        base: &str,
        id: &str,
        mut agent: Agent,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<Option<ExecOutcome>> {
        let token = shell_text::token();
        let session_dir = self.session_dir(id, &agent.sid);
        let text = format!(
            "{} </dev/null; {}",
            shell_text::exec_line(
                &token,
                session_dir.as_deref(),
                &req.cwd,
                &req.env,
                &req.argv
            ),
            end_lines(&token)
        );
        use base64::Engine as _;
        let line = format!(
            "{}\n",
            base64::engine::general_purpose::STANDARD.encode(text)
        );
        agent.echo.expect(line.as_bytes());
        let input = Call::new(
            "send a step to the agent",
            Some(id),
            Method::POST,
            format!(
                "{base}/process/session/{}/command/{}/input",
                enc(&agent.sid),
                enc(&agent.cmd)
            ),
        );
        if let Err(e) = self
            .http
            .send(&input, |r| r.json(&json!({ "data": line })))
            .await
        {
            self.retire(id, agent);
            let unsent = e.status() == Some(410)
                || (e.status() == Some(500) && e.to_string().contains("failed to open input pipe"));
            if unsent {
                return Ok(None);
            }
            // The proxy answers 404 for a sandbox that is gone; it is
            // named so only when get-by-id agrees.
            if e.status() == Some(404) {
                if let Ok(None) = self.get_dto(id).await {
                    lock(&self.agents).remove(id);
                    return Err(crate::provider::ProviderError::NotFound { id: id.to_owned() });
                }
            }
            return Err(e.into());
        }
        let mut relay = Relay::new(&token);
        let ended = self
            .follow_step(&mut agent, id, &token, req, &mut relay, sink)
            .await;
        let ended = match ended {
            Ok(e) => e,
            Err(e) => {
                self.retire(id, agent);
                return Err(e);
            }
        };
        match ended {
            Ended::Clean(exit) => {
                self.give_back(id, agent);
                self.finish(id, req, &token, exit, &mut relay, sink)
                    .map(Some)
            }
            Ended::Spent(exit) => {
                self.retire(id, agent);
                self.finish(id, req, &token, exit, &mut relay, sink)
                    .map(Some)
            }
            Ended::Stopped { timed_out, killed } => {
                self.retire(id, agent);
                relay.flush(sink);
                Ok(Some(ExecOutcome {
                    exit: None,
                    signal: killed.then_some(SIGKILL),
                    timed_out,
                    cancelled: !timed_out,
                }))
            }
        }
    }

    /// Relay one step's output from the agent's stream until both end
    /// lines are in, rfs stops it, or the stream fails it.
    async fn follow_step(
        &self,
        agent: &mut Agent,
        id: &str,
        token: &str,
        req: &ExecRequest,
        relay: &mut Relay,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<Ended> {
        let (mut out, mut err) = (EndScan::new(token), EndScan::new(token));
        let mut split = Unechoed {
            demux: &mut agent.demux,
            echo: &mut agent.echo,
        };
        let at = Watching {
            id,
            sid: &agent.sid,
            token,
        };
        let w = self
            .watch_log(
                &mut agent.ws,
                &mut split,
                at,
                req,
                (&mut out, &mut err),
                relay,
                sink,
            )
            .await?;
        if let Some((timed_out, killed)) = w.stopped {
            return Ok(Ended::Stopped { timed_out, killed });
        }
        Ok(match w.how {
            How::EndLines => Ended::Clean(out.code()),
            // The agent's stream ended: it ran its last step.
            How::Closed => {
                let r = self.recorded_exit(id, &agent.sid, token).await?;
                Ended::Spent(out.code().or(err.code()).or(r.map(|r| r.code)))
            }
            // The command ended (its status is recorded) but its end
            // lines did not come: the toolbox lost the log.
            How::Unended | How::GraceOver => {
                note_unended(w.recorded, relay, sink);
                Ended::Spent(w.recorded.map(|r| r.code))
            }
        })
    }
}

/// An agent's stream pieces without the input's echo (stdout only: the
/// daemon echoes input as stdout).
struct Unechoed<'a> {
    demux: &'a mut StreamDemux,
    echo: &'a mut EchoFilter,
}

impl Pieces for Unechoed<'_> {
    fn pieces(&mut self, frame: &[u8]) -> Vec<(bool, Vec<u8>)> {
        unechoed(self.demux.push(frame), self.echo)
    }
}

/// Stream pieces without the input's echo (stdout only: the daemon
/// echoes input as stdout).
fn unechoed(pieces: Vec<(bool, Vec<u8>)>, echo: &mut EchoFilter) -> Vec<(bool, Vec<u8>)> {
    pieces
        .into_iter()
        .map(|(is_err, b)| {
            if is_err {
                (is_err, b)
            } else {
                (is_err, echo.push(&b))
            }
        })
        .collect()
}

/// The agents of one sandbox.
#[derive(Default)]
pub struct Pool {
    idle: Vec<Agent>,
    /// A session created ahead, off a step's path, for the next step that
    /// runs without an agent (see [`Api::exec`]).
    pub spare: Option<String>,
    /// A spare is being created.
    pub spare_coming: bool,
    /// The server cannot give agents: every step uses its own session.
    unavailable: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_echoed_input_line_is_dropped_once_wherever_it_lands() {
        let mut f = EchoFilter::default();
        f.expect(b"QUJD\n");
        f.expect(b"REVG\n");
        // Cut across chunks, between output lines, in any order.
        let mut got = f.push(b"out1\nQU");
        got.extend(f.push(b"JD\nout2 QUJD\nREVG\nQUJD\nQUJX\n"));
        assert_eq!(got, b"out1\nout2 QUJD\nQUJD\nQUJX\n".to_vec());
        // A held prefix that turns out not to be an echo is passed on.
        let mut f = EchoFilter::default();
        f.expect(b"QUJD\n");
        assert_eq!(f.push(b"QU"), b"");
        assert_eq!(f.push(b"Z"), b"QUZ");
    }
}
