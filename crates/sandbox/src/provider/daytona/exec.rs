//! Commands through toolbox sessions: a step agent per sandbox where the
//! server gives one ([`super::agent`]), else a session per command, async exec
//! (so a long command outlives the proxy's request timeout), polled
//! status and logs (new bytes go to the sink as they arrive, stdout and
//! stderr apart when the toolbox splits them), a kill of the whole process
//! group on timeout or Ctrl-C, and rfs's own errors for the toolbox's
//! misleading failures.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::follow::{Followed, Target};
use super::http::enc;
use super::http::Call;
use super::logs::{before_end, demux, end_lines, Logs};
use super::outcome::{KILL_GRACE, SIGKILL};
use super::relay::Relay;
use super::shell_text;
use super::Api;
use crate::provider::supervisor::{Intervention, Supervisor};
use crate::provider::{ExecOutcome, ExecRequest, OutputSink, ProviderError, ProviderResult};

/// First and longest pause between polls.
const POLL_MIN: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_millis(500);

/// Said (on the step's stderr) when the command removed the toolbox's log.
const LOG_LOST_NOTE: &str = "rfs: the command removed the Daytona toolbox's session log (under $HOME/.daytona); its further output is lost, its exit status is read from /tmp\n";

/// Exec answer: async → `{cmdId}`; a server that ran it synchronously
/// also gives the exit code and output.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecStart {
    cmd_id: Option<String>,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
}

impl Api {
    /// Run `req` in sandbox `id`, streaming into `sink`.
    pub async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        if req.argv.is_empty() {
            return Err(ProviderError::Invalid("cannot run an empty command".into()));
        }
        if !req.cwd.starts_with('/') {
            return Err(ProviderError::Invalid(format!(
                "working directory `{}` is not an absolute path",
                req.cwd
            )));
        }
        shell_text::check_env(&req.env)?;
        if req.cancel.is_cancelled() {
            return Ok(ExecOutcome {
                cancelled: true,
                ..ExecOutcome::default()
            });
        }
        let base = self.toolbox(id).await?;
        // The common case: the sandbox's step agent, about two round trips.
        // An agent that can take no more input (a step removed its
        // session's FIFO) is retired before anything was sent; the step
        // goes to another one, once.
        for _ in 0..2 {
            let Some(agent) = self.agent(&base, id).await else {
                break;
            };
            if let Some(outcome) = self.exec_on_agent(&base, id, agent, req, sink).await? {
                return Ok(outcome);
            }
        }
        // Else a session per command: one made ahead when there is one
        // (the next is made off this step's path), so that a step costs the
        // exec, the follow stream and the command.
        let token = shell_text::token();
        let sid = match self.take_spare(id) {
            Some(sid) => sid,
            None => {
                let sid = format!("rfs-{token}");
                self.create_session(&base, id, &sid).await?;
                sid
            }
        };
        self.make_spare(&base, id);
        let res = self
            .exec_in_session(&base, id, &sid, &token, req, sink)
            .await;
        // Best effort, and off the step's path (one round trip fewer per
        // step): the session is gone with the sandbox anyway.
        let api = self.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            let _ = api.delete_session(&id, &sid).await;
        });
        res
    }

    async fn exec_in_session(
        &self,
        base: &str,
        id: &str,
        sid: &str,
        token: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        // Where the toolbox keeps this session (its daemon's config dir is
        // `$HOME/.daytona`): the wrapper checks it is still there.
        let session_dir = self.session_dir(id, sid);
        // The end lines tell rfs the exit code in the stream: it need not
        // wait for the daemon to close it (about a second after the last
        // output) nor ask for the status. The command's status stays the
        // toolbox's exit code.
        let line = format!(
            "{}; {}; (exit \"$rfs_r\")",
            shell_text::exec_line(token, session_dir.as_deref(), &req.cwd, &req.env, &req.argv),
            end_lines(token)
        );
        let call = Call::new(
            "start command",
            Some(id),
            Method::POST,
            format!("{base}/process/session/{}/exec", enc(sid)),
        );
        let started: ExecStart = self
            .session_call(
                call,
                Some(json!({ "command": line, "runAsync": true, "async": true })),
            )
            .await?;
        let mut relay = Relay::new(token);
        let cmd = match started {
            ExecStart {
                cmd_id: Some(c),
                exit_code: None,
                ..
            } => c,
            ExecStart {
                exit_code: Some(code),
                output,
                stdout,
                stderr,
                ..
            } => {
                // Ran synchronously.
                let logs = if stdout.is_some() || stderr.is_some() {
                    Logs {
                        stdout: stdout.unwrap_or_default().into_bytes(),
                        stderr: stderr.unwrap_or_default().into_bytes(),
                    }
                } else {
                    demux(output.unwrap_or_default().as_bytes())
                };
                let logs = before_end(&logs, token);
                relay.feed(&logs, sink);
                return self.finish(id, req, token, Some(code), &mut relay, sink);
            }
            ExecStart { cmd_id: None, .. } => {
                return Err(ProviderError::Protocol(format!(
                "daytona: start command (sandbox {id}) failed: the toolbox returned no command id"
            )))
            }
        };
        let at = Target {
            base,
            id,
            sid,
            cmd: &cmd,
            token,
        };
        if let Some(ws) = self.open_follow(base, id, sid, &cmd).await {
            return match self.follow_command(ws, at, req, &mut relay, sink).await? {
                Followed::Stopped { timed_out, killed } => {
                    relay.flush(sink);
                    Ok(ExecOutcome {
                        exit: None,
                        signal: killed.then_some(SIGKILL),
                        timed_out,
                        cancelled: !timed_out,
                    })
                }
                Followed::Ended(exit) => self.finish(id, req, token, exit, &mut relay, sink),
            };
        }
        self.poll_command(at, req, &mut relay, sink).await
    }

    /// The fall-back when the toolbox cannot follow a log: poll status and
    /// the whole log (the logs endpoint has no offset), relaying new bytes.
    async fn poll_command(
        &self,
        at: Target<'_>,
        req: &ExecRequest,
        relay: &mut Relay,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let (base, id, sid, cmd, token) = at.parts();
        let mut sup = Supervisor::new(req, KILL_GRACE);
        let mut grace_over = false;
        let mut killed = false;
        let mut pause = POLL_MIN;
        let mut exit: Option<i32>;
        let mut logs = Logs::default();
        // Set once the toolbox lost the command's log (its session
        // directory under $HOME was removed by the command itself).
        let mut log_lost = false;
        loop {
            tokio::select! {
                _ = tokio::time::sleep(pause) => {}
                i = sup.next() => match i {
                    Intervention::Stop(_) => {
                        killed = self.kill_group(id, token).await?;
                        sup.killed();
                    }
                    Intervention::GraceOver => grace_over = true,
                },
            }
            if log_lost {
                exit = self.recorded_exit(id, sid, token).await?.map(|r| r.code);
            } else {
                exit = self.status(base, id, sid, cmd).await?;
                match self.logs(base, id, sid, cmd).await? {
                    Some(l) => logs = l,
                    None => {
                        log_lost = true;
                        relay.feed(&logs, sink);
                        relay.flush(sink);
                        sink.stderr(LOG_LOST_NOTE.as_bytes());
                        continue;
                    }
                }
            }
            logs = before_end(&logs, token);
            if exit.is_some() {
                break;
            }
            relay.feed(&logs, sink);
            if grace_over {
                break;
            }
            pause = (pause * 3 / 2).min(POLL_MAX);
        }
        relay.feed(&logs, sink);
        if sup.stop().is_some() {
            relay.flush(sink);
            return Ok(ExecOutcome {
                exit: if killed { None } else { exit },
                signal: killed.then_some(SIGKILL),
                timed_out: sup.timed_out(),
                cancelled: sup.cancelled(),
            });
        }
        self.finish(id, req, token, exit, relay, sink)
    }
}
