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
use super::http::{Call, HttpError};
use super::sandbox::enc;
use super::shell_text::{self, Refusal};
use super::{lock, Api};
use crate::provider::supervisor::{Intervention, Supervisor};
use crate::provider::{ExecOutcome, ExecRequest, OutputSink, ProviderError, ProviderResult};

/// SIGKILL, reported for a command rfs killed.
pub const SIGKILL: i32 = 9;
/// How long a killed command may take to report its end.
pub const KILL_GRACE: Duration = Duration::from_secs(10);
/// First and longest pause between polls.
const POLL_MIN: Duration = Duration::from_millis(20);
const POLL_MAX: Duration = Duration::from_millis(500);

/// Said (on the step's stderr) when the command removed the toolbox's log.
const LOG_LOST_NOTE: &str = "rfs: the command removed the Daytona toolbox's session log (under $HOME/.daytona); its further output is lost, its exit status is read from /tmp\n";

/// Marker bytes the toolbox puts before stdout / stderr chunks in raw logs.
const STDOUT_MARK: &[u8] = b"\x01\x01\x01";
const STDERR_MARK: &[u8] = b"\x02\x02\x02";

/// A command's output so far.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Logs {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

#[derive(Deserialize)]
struct JsonLogs {
    #[serde(default)]
    output: Option<String>,
    #[serde(default)]
    stdout: Option<String>,
    #[serde(default)]
    stderr: Option<String>,
}

/// Split raw multiplexed output at the toolbox's markers (unmarked output
/// is stdout).
pub(super) fn demux(raw: &[u8]) -> Logs {
    let mut l = Logs::default();
    let mut to_err = false;
    let mut i = 0;
    while i < raw.len() {
        if raw[i..].starts_with(STDOUT_MARK) {
            to_err = false;
            i += 3;
        } else if raw[i..].starts_with(STDERR_MARK) {
            to_err = true;
            i += 3;
        } else {
            if to_err {
                l.stderr.push(raw[i]);
            } else {
                l.stdout.push(raw[i]);
            }
            i += 1;
        }
    }
    l
}

/// Parse a logs answer in either shape: JSON `{output, stdout, stderr}`
/// (version header ≥ 0.167) or plain text (older daemons).
pub(super) fn parse_logs(body: &[u8]) -> Logs {
    if let Ok(j) = serde_json::from_slice::<JsonLogs>(body) {
        if j.stdout.is_some() || j.stderr.is_some() {
            return Logs {
                stdout: j.stdout.unwrap_or_default().into_bytes(),
                stderr: j.stderr.unwrap_or_default().into_bytes(),
            };
        }
        if let Some(o) = j.output {
            return demux(o.as_bytes());
        }
    }
    demux(body)
}

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

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommandStatus {
    #[serde(default)]
    exit_code: Option<i32>,
}

/// rfs's error for the toolbox's exit code -1 (the command never started).
pub(super) fn toolbox_start_error(id: &str, output: &str) -> ProviderError {
    let out = output.trim();
    if out.contains("fork/exec") {
        ProviderError::NotStarted(format!(
            "the Daytona toolbox could not start a shell in sandbox {id}: it says `{out}`, \
             which means the working directory it was given does not exist (not that the shell is missing)"
        ))
    } else if out.is_empty() {
        ProviderError::NotStarted(format!(
            "the Daytona toolbox reported exit code -1 with no output in sandbox {id}: \
             the command could not be started (rfs never reads this as a result)"
        ))
    } else {
        ProviderError::NotStarted(format!(
            "the Daytona toolbox could not run the command in sandbox {id} (exit code -1): {out}"
        ))
    }
}

/// rfs's error for a refusal of the wrapper.
fn refusal_error(r: Refusal, id: &str, cwd: &str) -> ProviderError {
    ProviderError::NotStarted(match r {
        Refusal::Cwd => format!("working directory `{cwd}` does not exist in sandbox {id}"),
        Refusal::Env => format!("sandbox {id} refused an environment variable of the command"),
        Refusal::Setsid => format!(
            "sandbox {id} has no `setsid`, which rfs needs to kill a command's process group"
        ),
        Refusal::PgidFile => format!(
            "cannot record a command's process group in /tmp of sandbox {id} (is /tmp writable?)"
        ),
    })
}

/// Passes output to the sink as it arrives, holding back stderr while it
/// may still be the wrapper's refusal marker, and keeping the first bytes
/// of output for rfs's own error messages.
pub struct Relay {
    marker: String,
    /// The wrapper's line saying the command starts (stripped).
    start: String,
    holding: bool,
    held: Vec<u8>,
    head: Vec<u8>,
    /// Bytes of cumulative logs already relayed (polling).
    out_seen: usize,
    err_seen: usize,
}

/// How much output is kept for error messages.
const HEAD: usize = 4096;

impl Relay {
    pub fn new(token: &str) -> Self {
        Relay {
            marker: shell_text::marker(token),
            start: shell_text::start_line(token),
            holding: true,
            held: vec![],
            head: vec![],
            out_seen: 0,
            err_seen: 0,
        }
    }

    fn keep_head(&mut self, b: &[u8]) {
        let n = (HEAD - self.head.len().min(HEAD)).min(b.len());
        self.head.extend_from_slice(&b[..n]);
    }

    /// New stdout bytes.
    pub fn stdout(&mut self, b: &[u8], sink: &mut dyn OutputSink) {
        self.keep_head(b);
        sink.stdout(b);
    }

    /// New stderr bytes. Until the wrapper's start line, stderr can only
    /// be the wrapper's (a refusal, held until the end); the start line is
    /// dropped and everything after it is the command's output.
    pub fn stderr(&mut self, b: &[u8], sink: &mut dyn OutputSink) {
        if !self.holding {
            self.keep_head(b);
            sink.stderr(b);
            return;
        }
        self.held.extend_from_slice(b);
        let start = self.start.as_bytes();
        if self.held.starts_with(start) {
            self.held.drain(..start.len());
            self.flush(sink);
            return;
        }
        let n = self.held.len().min(start.len());
        if self.held[..n] == start[..n] {
            // Maybe the start line, not complete yet.
            return;
        }
        let m = self.marker.as_bytes();
        let n = self.held.len().min(m.len());
        if self.held[..n] != m[..n] {
            // Not the wrapper's: everything held is output.
            self.flush(sink);
        }
        // Else the wrapper's refusal line (held until the end).
    }

    /// The new part of cumulative logs (polling).
    pub fn feed(&mut self, logs: &Logs, sink: &mut dyn OutputSink) {
        if logs.stdout.len() > self.out_seen {
            let b = logs.stdout[self.out_seen..].to_vec();
            self.out_seen = logs.stdout.len();
            self.stdout(&b, sink);
        }
        if logs.stderr.len() > self.err_seen {
            let b = logs.stderr[self.err_seen..].to_vec();
            self.err_seen = logs.stderr.len();
            self.stderr(&b, sink);
        }
    }

    /// The wrapper's refusal, if held stderr is one.
    pub fn refusal(&self, token: &str) -> Option<Refusal> {
        if self.holding {
            shell_text::refusal(token, &self.held)
        } else {
            None
        }
    }

    /// Release whatever stderr is held.
    pub fn flush(&mut self, sink: &mut dyn OutputSink) {
        self.holding = false;
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.keep_head(&held);
            sink.stderr(&held);
        }
    }

    /// The first bytes of output (both streams, as they came).
    pub fn head(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }
}

impl Api {
    async fn session_call<T: serde::de::DeserializeOwned>(
        &self,
        call: Call<'_>,
        body: Option<serde_json::Value>,
    ) -> Result<T, HttpError> {
        self.http
            .json(&call, |r| match &body {
                Some(b) => r.json(b),
                None => r,
            })
            .await
    }

    /// Current output of a session command; `None` when the toolbox no
    /// longer has its log (the command removed `$HOME/.daytona`).
    async fn logs(
        &self,
        base: &str,
        id: &str,
        sid: &str,
        cmd: &str,
    ) -> ProviderResult<Option<Logs>> {
        let call = command_get("read command output", base, id, sid, cmd, "/logs");
        let resp = match self.http.send(&call, |r| r).await {
            Ok(r) => r,
            Err(e) if e.status() == Some(404) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let body = resp.bytes().await.map_err(|e| {
            ProviderError::Api(format!(
                "daytona: read command output (sandbox {id}) failed: {e}"
            ))
        })?;
        Ok(Some(parse_logs(&body)))
    }

    /// The exit status the wrapper recorded in `/tmp` (see
    /// [`shell_text::exit_status_line`]), once it has one.
    pub async fn recorded_exit(
        &self,
        id: &str,
        sid: &str,
        token: &str,
    ) -> ProviderResult<Option<RecordedExit>> {
        let session_dir = self.session_dir(id, sid);
        let r = self
            .execute(
                id,
                "read a command's recorded exit status",
                &shell_text::exit_status_line(token, session_dir.as_deref()),
                Duration::from_secs(30),
            )
            .await?;
        Ok(match r.exit_code {
            Some(0) => r.result.as_deref().and_then(|s| {
                let mut lines = s.lines();
                let code = lines.next()?.trim().parse().ok()?;
                let log_kept = lines.next().is_some_and(|l| l.trim() == "kept");
                Some(RecordedExit { code, log_kept })
            }),
            _ => None,
        })
    }

    /// Where the toolbox keeps session `sid` (its daemon's config dir is
    /// `$HOME/.daytona`), if the sandbox's home is known.
    pub(super) fn session_dir(&self, id: &str, sid: &str) -> Option<String> {
        lock(&self.homes)
            .get(id)
            .map(|h| format!("{}/.daytona/sessions/{sid}", h.trim_end_matches('/')))
    }

    /// A session command's exit code, once it has one.
    pub async fn status(
        &self,
        base: &str,
        id: &str,
        sid: &str,
        cmd: &str,
    ) -> ProviderResult<Option<i32>> {
        let call = command_get("read command status", base, id, sid, cmd, "");
        let s: CommandStatus = self.session_call(call, None).await?;
        Ok(s.exit_code)
    }

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

    /// Create session `sid` in sandbox `id`.
    async fn create_session(&self, base: &str, id: &str, sid: &str) -> ProviderResult<()> {
        let create = Call::new(
            "create session",
            Some(id),
            Method::POST,
            format!("{base}/process/session"),
        );
        // The toolbox's proxy answers 404 for a sandbox that is gone; a
        // 404 is named so only when get-by-id agrees.
        match self
            .http
            .send(&create, |r| r.json(&json!({ "sessionId": sid })))
            .await
        {
            Err(e) if e.status() == Some(404) => Err(match self.get_dto(id).await {
                Ok(None) => ProviderError::NotFound { id: id.to_owned() },
                _ => e.into(),
            }),
            r => r.map(|_| ()).map_err(Into::into),
        }
    }

    /// The session made ahead for sandbox `id`, if one is ready.
    fn take_spare(&self, id: &str) -> Option<String> {
        lock(&self.agents).get_mut(id).and_then(|p| p.spare.take())
    }

    /// Make a session ahead for the next step of sandbox `id` (in the
    /// background; none when one is ready or coming).
    fn make_spare(&self, base: &str, id: &str) {
        {
            let mut pools = lock(&self.agents);
            let pool = pools.entry(id.to_owned()).or_default();
            if pool.spare.is_some() || pool.spare_coming {
                return;
            }
            pool.spare_coming = true;
        }
        let api = self.clone();
        let (base, id) = (base.to_owned(), id.to_owned());
        tokio::spawn(async move {
            let sid = format!("rfs-{}", shell_text::token());
            let made = api.create_session(&base, &id, &sid).await.is_ok();
            let mut pools = lock(&api.agents);
            // No pool: the sandbox is gone (its sessions with it).
            if let Some(pool) = pools.get_mut(&id) {
                pool.spare_coming = false;
                if made {
                    pool.spare = Some(sid);
                }
            }
        });
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
            super::agent::end_lines(token)
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

    /// The outcome of a command that ended by itself.
    pub(super) fn finish(
        &self,
        id: &str,
        req: &ExecRequest,
        token: &str,
        exit: Option<i32>,
        relay: &mut Relay,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        match exit {
            Some(-1) => {
                relay.flush(sink);
                return Err(toolbox_start_error(id, &relay.head()));
            }
            Some(shell_text::EXIT_SETUP) => {
                if let Some(r) = relay.refusal(token) {
                    return Err(refusal_error(r, id, &req.cwd));
                }
            }
            _ => {}
        }
        relay.flush(sink);
        Ok(ExecOutcome {
            exit,
            ..ExecOutcome::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Collect;

    #[test]
    fn logs_parse_in_both_shapes() {
        let j = br#"{"output":"ignored","stdout":"out\n","stderr":"err\n"}"#;
        assert_eq!(
            parse_logs(j),
            Logs {
                stdout: b"out\n".to_vec(),
                stderr: b"err\n".to_vec()
            }
        );
        let raw = b"\x01\x01\x01hello \x02\x02\x02oops\x01\x01\x01world";
        assert_eq!(
            parse_logs(raw),
            Logs {
                stdout: b"hello world".to_vec(),
                stderr: b"oops".to_vec()
            }
        );
        let jraw =
            serde_json::to_vec(&json!({"output": "\u{1}\u{1}\u{1}a\u{2}\u{2}\u{2}b"})).unwrap();
        assert_eq!(
            parse_logs(&jraw),
            Logs {
                stdout: b"a".to_vec(),
                stderr: b"b".to_vec()
            }
        );
        assert_eq!(
            parse_logs(b"plain combined"),
            Logs {
                stdout: b"plain combined".to_vec(),
                stderr: vec![]
            }
        );
    }

    #[test]
    fn the_zsh_fork_exec_error_and_empty_output_become_rfs_errors() {
        let e = toolbox_start_error("sb1", "fork/exec /usr/bin/zsh: no such file or directory")
            .to_string();
        assert!(
            e.contains("working directory it was given does not exist"),
            "{e}"
        );
        assert!(e.contains("sb1"));
        let e = toolbox_start_error("sb1", "  ").to_string();
        assert!(e.contains("exit code -1 with no output"), "{e}");
    }

    #[test]
    fn relay_holds_back_only_the_wrappers_marker() {
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        r.stdout(b"a", &mut sink);
        r.stderr(b"rfs-day", &mut sink);
        assert_eq!(sink.stderr, b"");
        r.stdout(b"b", &mut sink);
        r.stderr(b"X more", &mut sink);
        assert_eq!(
            (sink.stdout.as_slice(), sink.stderr.as_slice()),
            (&b"ab"[..], &b"rfs-dayX more"[..])
        );
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        r.stderr(b"rfs-daytona:tk:nocwd\n", &mut sink);
        assert!(sink.stderr.is_empty());
        assert_eq!(r.refusal("tk"), Some(Refusal::Cwd));
        r.flush(&mut sink);
        r.stderr(b"warning\n", &mut sink);
        assert_eq!(sink.stderr, b"rfs-daytona:tk:nocwd\nwarning\n");
    }

    #[test]
    fn a_refusal_line_after_the_start_line_is_the_commands_output() {
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        r.stderr(b"rfs-daytona:tk:st", &mut sink);
        assert!(sink.stderr.is_empty());
        r.stderr(b"art\nrfs-daytona:tk:nocwd\n", &mut sink);
        assert_eq!(r.refusal("tk"), None);
        r.flush(&mut sink);
        assert_eq!(sink.stderr, b"rfs-daytona:tk:nocwd\n");
        assert_eq!(r.head(), "rfs-daytona:tk:nocwd\n");
    }

    #[test]
    fn polled_logs_are_relayed_once() {
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        let mut logs = Logs {
            stdout: b"one\n".to_vec(),
            stderr: b"e".to_vec(),
        };
        r.feed(&logs, &mut sink);
        logs.stdout.extend_from_slice(b"two\n");
        r.feed(&logs, &mut sink);
        r.flush(&mut sink);
        assert_eq!(sink.stdout, b"one\ntwo\n");
        assert_eq!(sink.stderr, b"e");
    }
}

/// Cumulative logs up to the end lines (and without a tail that may be
/// the start of one).
fn before_end(logs: &Logs, token: &str) -> Logs {
    let cut = |b: &[u8]| -> Vec<u8> {
        let mut scan = super::agent::EndScan::new(token);
        scan.push(b)
    };
    Logs {
        stdout: cut(&logs.stdout),
        stderr: cut(&logs.stderr),
    }
}

/// An exit status the wrapper recorded itself.
#[derive(Debug, Clone, Copy)]
pub struct RecordedExit {
    pub code: i32,
    /// The toolbox's log is still there (held open by a process the
    /// command left running), as opposed to removed by the command.
    pub log_kept: bool,
}

/// A GET of session command `cmd`'s resource (`suffix`: `""` for its
/// status, `/logs` for its output).
fn command_get<'a>(
    what: &'static str,
    base: &str,
    id: &'a str,
    sid: &str,
    cmd: &str,
    suffix: &str,
) -> Call<'a> {
    Call::new(
        what,
        Some(id),
        Method::GET,
        format!(
            "{base}/process/session/{}/command/{}{suffix}",
            enc(sid),
            enc(cmd)
        ),
    )
}
