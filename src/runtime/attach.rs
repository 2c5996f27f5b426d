//! `attach()` / `assert_screen()`: interactive sessions under a PTY in the
//! run's shared sandbox, with the same cwd mapping, escape rules and
//! binding env as `step()`. Every session is recorded (asciicast v2 in
//! `terminal/`), every assertion journaled with a screen snapshot, and
//! every session still open at run end is closed before teardown.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Run;
use crate::terminal::{self, PatternSpec, SessionOptions, TerminalSession};
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_evidence::outcome::AssertionOutcome;
use rfs_sandbox::provider::{BoundedCollect, ExecOutcome, ExecRequest, PtyRequest, PROBE_OUTPUT};

/// Options of `attach(command, opts)`.
#[derive(Debug, Clone)]
pub(crate) struct AttachOptions {
    pub cols: u16,
    pub rows: u16,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub term: String,
}

impl Default for AttachOptions {
    fn default() -> Self {
        AttachOptions {
            cols: 80,
            rows: 24,
            env: vec![],
            cwd: None,
            term: "xterm-256color".into(),
        }
    }
}

/// One attached session.
pub(crate) struct Attached {
    pub index: u32,
    /// The command as rfs shows it (known secrets redacted).
    pub command: String,
    pub session: TerminalSession,
    started: Instant,
    asserts: AtomicU32,
    ended: AtomicBool,
}

impl Run {
    /// Start `command` under a PTY in the shared sandbox.
    pub(crate) fn attach(&self, command: &str, o: AttachOptions) -> Result<Arc<Attached>> {
        let what = format!("attach `{}`", self.state().redactor.redact_str(command));
        if o.cols == 0 || o.rows == 0 {
            return Err(Error::Usage(format!(
                "{what}: cols and rows must be at least 1"
            )));
        }
        // A predictable prompt on every provider (root's `#` otherwise);
        // the script's own PS1 wins.
        let mut env = vec![("PS1".to_owned(), "$ ".to_owned())];
        env.extend(o.env.iter().cloned());
        env.push(("TERM".into(), o.term.clone()));
        let pl = self.place_command(&what, o.cwd.as_deref(), &env)?;
        let p = self.cfg.provider.clone();
        self.check_attach_cwd(&pl, &what)?;
        let index = {
            let mut st = self.state();
            st.session_seq += 1;
            st.session_seq
        };
        let rel_rec = format!("terminal/session-{index}.cast");
        let dir = self.cfg.out_dir.join("terminal");
        rfs_evidence::out_dir::ensure_dir(&dir).map_err(Error::internal)?;
        let req = PtyRequest {
            argv: pl.pty_argv(command),
            cwd: super::step_wrapper::START_DIR.into(),
            env: pl.env.clone(),
            cols: o.cols,
            rows: o.rows,
        };
        let ch = self
            .block_on(p.open_pty(&pl.sandbox_id, &req))
            .map_err(|e| Error::StepFailed {
                name: what.clone(),
                reason: format!(
                    "cannot start a terminal session in sandbox {}: {e}",
                    pl.sandbox_id
                ),
            })?;
        let mut so = SessionOptions::new(o.cols, o.rows);
        so.record = Some(self.cfg.out_dir.join(&rel_rec));
        so.term = o.term.clone();
        let shown_command = self.state().redactor.redact_str(command);
        so.command = Some(shown_command.clone());
        so.redactor = Some(self.state().redactor.clone());
        so.cancel = self.cancel_token();
        let session = TerminalSession::start(&self.rt, ch, so).map_err(Error::internal)?;
        let env_journal: Vec<_> = o
            .env
            .iter()
            .map(|(k, v)| (k.clone(), self.redact_value(k, v)))
            .collect();
        // (Computed first: `record` takes the state lock itself.)
        let (rel_shown, remote_shown) = self.shown_cwd(&pl);
        self.record(Event::AttachStart {
            session: index,
            command: shown_command.clone(),
            sandbox_id: pl.sandbox_id.clone(),
            cwd: rel_shown,
            cwd_remote: remote_shown,
            cols: o.cols,
            rows: o.rows,
            term: o.term.clone(),
            env: env_journal,
            recording: rel_rec,
        })?;
        let a = Arc::new(Attached {
            index,
            command: shown_command.clone(),
            session,
            started: Instant::now(),
            asserts: AtomicU32::new(0),
            ended: AtomicBool::new(false),
        });
        self.state().sessions.push(a.clone());
        Ok(a)
    }

    /// Run the same wrapper as steps once without a terminal, so that a
    /// bad cwd is refused before the program starts.
    fn check_attach_cwd(&self, pl: &super::step_wrapper::Placement, what: &str) -> Result<()> {
        let nonce = super::step_wrapper::nonce();
        let check = ExecRequest {
            argv: pl.argv("true", &nonce),
            cwd: super::step_wrapper::START_DIR.into(),
            env: pl.env.clone(),
            timeout: Some(Duration::from_secs(60)),
            cancel: self.cancel_token().child_token(),
        };
        let mut bounded = BoundedCollect::new(PROBE_OUTPUT, PROBE_OUTPUT, check.cancel.clone());
        let ran = self.block_on(self.cfg.provider.exec(&pl.sandbox_id, &check, &mut bounded));
        let outcome = match bounded.error(&format!("the cwd check in sandbox {}", pl.sandbox_id)) {
            Some(e) => Err(e),
            None => ran,
        }
        .map_err(|e| Error::StepFailed {
            name: what.to_owned(),
            reason: format!("the provider could not check the cwd: {e}"),
        })?;
        let probe = bounded.out;
        let mut gate = super::step_wrapper::Gate::new(&nonce);
        let _ = gate.stderr(&probe.stderr);
        if let Err(r) = gate.finish(outcome.exit) {
            let msg = pl.refusal_message(&r, what);
            let msg = self.state().redactor.redact_str(&msg);
            let _ = self.record(Event::AttachRefused {
                command: what.to_owned(),
                reason: msg.clone(),
            });
            return Err(self.refuse(msg));
        }
        Ok(())
    }

    /// Type into a session; the journal gets the text with secrets redacted.
    pub(crate) fn attach_send(&self, a: &Attached, text: &str) -> Result<()> {
        // A typed secret (`API_TOKEN=…`) is a known secret from now on:
        // its echo is redacted in the recording, logs and console too.
        for v in typed_secrets(text) {
            self.state().redactor.add(&v);
            a.session.add_secret(&v);
        }
        a.session.send(text).map_err(|e| terminal_error(a, e))?;
        let shown = redact_input(&self.state().redactor.redact_str(text));
        self.record(Event::AttachInput {
            session: a.index,
            text: Some(shown),
            key: None,
        })
    }

    /// Press a named key (tmux-style names).
    pub(crate) fn attach_press(&self, a: &Attached, key: &str) -> Result<()> {
        a.session.press(key).map_err(|e| terminal_error(a, e))?;
        self.record(Event::AttachInput {
            session: a.index,
            text: None,
            key: Some(key.to_owned()),
        })
    }

    pub(crate) fn attach_resize(&self, a: &Attached, cols: u16, rows: u16) -> Result<()> {
        a.session
            .resize(cols, rows)
            .map_err(|e| terminal_error(a, e))?;
        self.record(Event::AttachResize {
            session: a.index,
            cols,
            rows,
        })
    }

    /// Wait until the screen satisfies `spec`; journal the outcome with a
    /// snapshot of the screen either way.
    pub(crate) fn assert_screen(&self, a: &Attached, spec: &PatternSpec) -> Result<()> {
        let pattern = spec
            .compile()
            .map_err(|e| Error::Usage(format!("assert_screen: {e}")))?;
        let desc = self.state().redactor.redact_str(&pattern.describe());
        let k = a.asserts.fetch_add(1, Ordering::SeqCst) + 1;
        a.session.marker(&format!("assert {k}: {desc}"));
        let res = self.block_on(a.session.wait_for(&pattern));
        let (screen, outcome, elapsed) = match &res {
            Ok(o) => (o.screen.clone(), AssertionOutcome::Pass, o.elapsed),
            Err(f) => (f.screen.clone(), AssertionOutcome::from(&f.kind), f.elapsed),
        };
        let snap = format!("terminal/session-{}-assert-{k}.txt", a.index);
        let text = self.state().redactor.redact_str(&screen.dump());
        // Of the screen redacted as its snapshot is (and as the recording
        // replays it): a digest of a screen that showed a secret would
        // let anyone test guesses of the secret.
        let screen_digest = {
            use sha2::Digest as _;
            let shown = self.state().redactor.redact_str(&screen.text());
            hex::encode(sha2::Sha256::digest(shown.as_bytes()))
        };
        let snapshot =
            rfs_evidence::out_dir::write_new(&self.cfg.out_dir.join(&snap), text.as_bytes())
                .ok()
                .map(|()| rfs_evidence::events::FileDigest {
                    path: snap.clone(),
                    sha256: rfs_evidence::journal::line_hash(&text),
                    bytes: text.len() as u64,
                });
        self.record(Event::AttachAssert {
            session: a.index,
            assert: k,
            pattern: desc,
            outcome: outcome.as_str().to_owned(),
            elapsed_ms: super::ms(elapsed.as_millis()),
            screen_digest,
            snapshot,
        })?;
        match res {
            Ok(_) => Ok(()),
            Err(f) if f.kind == terminal::FailureKind::Cancelled => Err(Error::Interrupted),
            Err(f) => Err(Error::ScreenAssertion(format!(
                "session {} (`{}`): {f}\n(screen saved to {snap})",
                a.index, a.command
            ))),
        }
    }

    /// Wait for the program to exit.
    pub(crate) fn attach_wait_exit(&self, a: &Attached, timeout: Duration) -> Result<ExecOutcome> {
        let o = self
            .block_on(a.session.wait_exit(timeout))
            .map_err(|e| match e {
                terminal::TerminalError::Cancelled => Error::Interrupted,
                e => terminal_error(a, e),
            })?;
        self.end_session(a, &o, "exited")?;
        Ok(o)
    }

    /// Kill the session's whole process group and wait for it.
    pub(crate) fn attach_close(&self, a: &Attached) -> Result<ExecOutcome> {
        let o = self
            .block_on(a.session.close())
            .map_err(|e| terminal_error(a, e))?;
        self.end_session(a, &o, "closed")?;
        Ok(o)
    }

    fn end_session(&self, a: &Attached, o: &ExecOutcome, how: &str) -> Result<()> {
        if a.ended.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        // The recording is complete once the session is closed (output
        // drained, file flushed); only then is its digest final.
        if how == "exited" {
            let _ = self.block_on(a.session.close());
        }
        let recording_error = a.session.recording_error();
        let rel = format!("terminal/session-{}.cast", a.index);
        let recording = rfs_evidence::journal::file_digest(&self.cfg.out_dir, &rel).ok();
        self.record_connections(self.egress_log().as_ref());
        self.record(Event::AttachEnd {
            session: a.index,
            how: how.to_owned(),
            exit: o.exit,
            signal: o.signal,
            duration_ms: super::ms(a.started.elapsed().as_millis()),
            recording_error,
            recording,
        })
    }

    /// Close every session still open (run end, before teardown).
    pub(crate) fn close_sessions(&self) {
        let sessions: Vec<_> = self.state().sessions.drain(..).collect();
        for a in sessions {
            if a.ended.load(Ordering::SeqCst) {
                continue;
            }
            let o = self.block_on(a.session.close()).unwrap_or(ExecOutcome {
                cancelled: true,
                ..ExecOutcome::default()
            });
            let _ = self.end_session(&a, &o, "closed at run end");
        }
    }
}

fn terminal_error(a: &Attached, e: terminal::TerminalError) -> Error {
    match e {
        terminal::TerminalError::UnknownKey(_) | terminal::TerminalError::Size { .. } => {
            Error::Usage(format!("session {}: {e}", a.index))
        }
        e => Error::StepFailed {
            name: format!("session {} (`{}`)", a.index, a.command),
            reason: e.to_string(),
        },
    }
}

/// Text that looks like it sets a secret: `API_TOKEN=…`, `password: …`.
fn secret_assignment() -> &'static regex::Regex {
    static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    RE.get_or_init(|| {
        regex::Regex::new(
            r"(?i)(\b[A-Z0-9_]*(?:TOKEN|SECRET|KEY|PASSWORD|PASSWD|CREDENTIAL)[A-Z0-9_]*\s*[=:]\s*)('[^']*'|[^\s;&|]+)",
        )
        .expect("valid regex")
    })
}

/// Typed text that looks like it sets a secret keeps its name but not its
/// value.
fn redact_input(text: &str) -> String {
    secret_assignment()
        .replace_all(text, format!("${{1}}{}", rfs_evidence::secrets::REDACTED))
        .into_owned()
}

/// The values typed text sets secrets to (quotes stripped).
fn typed_secrets(text: &str) -> Vec<String> {
    secret_assignment()
        .captures_iter(text)
        .map(|c| c[2].trim_matches('\'').to_owned())
        .filter(|v| !v.is_empty())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn typed_secrets_are_redacted() {
        assert_eq!(
            super::redact_input("export API_TOKEN=abc123; echo hi"),
            "export API_TOKEN=[REDACTED]; echo hi"
        );
        assert_eq!(
            super::redact_input("password: 'x y'"),
            "password: [REDACTED]"
        );
        assert_eq!(super::redact_input("echo keyboard"), "echo keyboard");
    }
}
