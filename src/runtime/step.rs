//! `step()`: one command in the shared sandbox, cwd mapped into the synced
//! root, the binding env set last, each attempt journaled. Retries reuse
//! the same sandbox and see the files earlier attempts left behind.

use std::time::{Duration, Instant};

use super::step_wrapper::Placement;
use super::{cwd, Run};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::provider::ExecRequest;
use crate::source::SourceOptions;

/// Options of `step(name, command, opts)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepOptions {
    /// Relative to the synced root; default: the invoking dir, mapped.
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub retries: u32,
    pub allow_failure: bool,
}

/// What `step()` returns to the script.
#[derive(Debug, Clone)]
pub(crate) struct StepResult {
    pub exit: Option<i32>,
    pub stdout: String,
    pub stderr: String,
    pub duration_ms: u128,
    pub attempts: u32,
    pub timed_out: bool,
    pub ok: bool,
    /// The resource limits the last attempt reached, in words.
    pub limit: Option<String>,
}

/// The names rfs binds into every command (set after user env).
pub(crate) const BINDING_VARS: [&str; 5] = [
    "RELAYFLOWS_SANDBOX_ID",
    "RELAYFLOWS_SOURCE_COMMIT",
    "RELAYFLOWS_TREE_DIGEST",
    "RELAYFLOWS_SOURCE_WORKDIR",
    "RELAYFLOWS_RUN_ID",
];

impl Run {
    /// The next number of a step's or spawned process's logs
    /// (`003-build.stdout.log`): one sequence for both (attach sessions
    /// are numbered apart).
    pub(crate) fn next_log_seq(&self) -> u32 {
        let mut st = self.state();
        st.step_seq += 1;
        st.step_seq
    }

    /// A command's cwd as rfs writes it (journal, evidence, console):
    /// through the redactor like everything else; the real path is only
    /// run. (Computed apart: `record` takes the state lock itself.)
    pub(crate) fn shown_cwd(&self, pl: &Placement) -> (String, String) {
        let st = self.state();
        (
            st.redactor.redact_str(&pl.rel),
            st.redactor.redact_str(&pl.remote_dir),
        )
    }

    /// Resolve cwd and env for a command (shared by `step()` and
    /// `attach()`), binding the source first if needed. Refusals happen
    /// here, before anything executes.
    pub(crate) fn place_command(
        &self,
        what: &str,
        cwd_opt: Option<&str>,
        user_env: &[(String, String)],
    ) -> Result<Placement> {
        self.check_cancelled()?;
        if let Some(c) = cwd_opt {
            crate::validate::path("its cwd", c)
                .map_err(|m| self.refuse(format!("{what} refused before running anything: {m}")))?;
        }
        for (k, v) in user_env {
            crate::validate::env_var(k, v)
                .map_err(|m| self.refuse(format!("{what} refused before running anything: {m}")))?;
            if crate::secrets::is_secret_name(k) {
                self.state().redactor.add(v);
            }
        }
        if self.state().source.is_none() {
            if let Err(e) =
                self.sync_source(SourceOptions::new(self.cfg.invocation_dir.clone()), true)
            {
                return Err(match e {
                    Error::Refused(m) => {
                        Error::Refused(format!("{what} refused: no source could be bound: {m}"))
                    }
                    other => other,
                });
            }
        }
        let src = self.state().source.clone().expect("bound above");
        let rel = match cwd_opt {
            Some(c) => cwd::resolve(c, &src.manifest),
            None => cwd::default_relative(
                &self.cfg.invocation_dir,
                &src.request.repo_root,
                src.request.subdir.as_deref(),
            )
            .and_then(|r| match r {
                Some(r) => cwd::resolve(&r, &src.manifest),
                None => Ok(String::new()),
            }),
        }
        .map_err(|e| {
            let m = self.state().redactor.redact_str(&e.to_string());
            let _ = self.record(Event::CwdRefused {
                what: what.to_owned(),
                reason: m.clone(),
            });
            self.refuse(format!("{what} refused before running anything: {m}"))
        })?;
        let sb = self.ensure_sandbox()?;
        let remote_dir = if rel.is_empty() {
            src.pin.workdir.clone()
        } else {
            format!("{}/{}", src.pin.workdir, rel)
        };
        let mut env = user_env.to_vec();
        env.extend([
            (BINDING_VARS[0].into(), sb.id.clone()),
            (BINDING_VARS[1].into(), src.pin.commit.clone()),
            (BINDING_VARS[2].into(), src.pin.tree_digest.clone()),
            (BINDING_VARS[3].into(), src.pin.workdir.clone()),
            (BINDING_VARS[4].into(), self.cfg.run_id.clone()),
        ]);
        Ok(Placement {
            sandbox_id: sb.id,
            home: sb.home,
            rel,
            remote_dir,
            physical_root: src.physical_root,
            env,
        })
    }

    /// Run one step.
    pub(crate) fn step(&self, name: &str, command: &str, opts: StepOptions) -> Result<StepResult> {
        crate::validate::name("a step name", name).map_err(|e| self.refuse(e.to_string()))?;
        let name = &self.state().redactor.redact_str(name);
        let what = format!("step `{name}`");
        if command.contains('\0') || command.trim().is_empty() {
            let m = format!(
                "{what} refused before running anything: its command is empty or contains a NUL byte"
            );
            self.record_refused_step(name, opts.cwd.as_deref().unwrap_or("."), &m);
            return Err(self.refuse(m));
        }
        let pl = match self.place_command(&what, opts.cwd.as_deref(), &opts.env) {
            Ok(pl) => pl,
            Err(e) => {
                if let Error::Refused(m) = &e {
                    self.record_refused_step(name, opts.cwd.as_deref().unwrap_or("."), m);
                }
                return Err(e);
            }
        };
        let seq = self.next_log_seq();
        // What rfs writes about the cwd (journal, evidence, console) passes
        // the redactor like everything else; the real path is only run.
        let (rel_shown, remote_shown) = self.shown_cwd(&pl);
        let stem = format!("{seq:03}-{}", file_stem(name));
        let env_journal: Vec<_> = opts
            .env
            .iter()
            .map(|(k, v)| (k.clone(), self.redact_value(k, v)))
            .collect();
        let command_journal = self.state().redactor.redact_str(command);
        // The pin this step runs under (re-syncs move it between steps).
        let pin = self
            .state()
            .source
            .as_ref()
            .map(|s| (s.pin.commit.clone(), s.pin.tree_digest.clone()));
        self.record(Event::StepStart {
            name: name.to_owned(),
            seq,
            command: command_journal,
            sandbox_id: pl.sandbox_id.clone(),
            cwd: rel_shown.clone(),
            cwd_remote: remote_shown.clone(),
            env: env_journal,
            timeout_s: opts.timeout.map(|t| t.as_secs_f64()),
            retries: opts.retries,
            allow_failure: opts.allow_failure,
            commit: pin.as_ref().map(|p| p.0.clone()),
            tree_digest: pin.map(|p| p.1),
        })?;
        self.egress_step(Some(name));
        let started = Instant::now();
        let nonce = super::step_wrapper::nonce();
        let req = ExecRequest {
            argv: pl.argv(command, &nonce),
            cwd: super::step_wrapper::START_DIR.into(),
            env: pl.env.clone(),
            timeout: opts.timeout,
            cancel: self.cancel_token(),
        };
        let ctx = AttemptCtx {
            name,
            what: &what,
            pl: &pl,
            req: &req,
            nonce: &nonce,
            stem: &stem,
            rel_shown: &rel_shown,
            retries: opts.retries,
            started,
        };
        let provider = &self.cfg.provider;
        let _ = self.block_on(provider.usage(&pl.sandbox_id, true));
        let mut attempt = 0;
        let (result, last_signal) = loop {
            attempt += 1;
            if let Some(done) = self.attempt(&ctx, attempt)? {
                break done;
            }
        };
        let usage = self
            .block_on(provider.usage(&pl.sandbox_id, false))
            .filter(|u| !u.is_empty());
        let summary = describe(&result, last_signal, opts.timeout);
        // The step's connections, just before its end.
        let egress = self.egress_log();
        if let Some(l) = &egress {
            l.set_step(None);
            l.settle(std::time::Duration::from_millis(200));
        }
        self.record_connections(egress.as_ref());
        self.record(Event::StepEnd {
            name: name.to_owned(),
            ok: result.ok,
            exit: result.exit,
            timed_out: result.timed_out,
            attempts: result.attempts,
            duration_ms: super::sync::ms(result.duration_ms),
            sandbox_id: pl.sandbox_id.clone(),
            summary: summary.clone(),
            limit: result.limit.clone(),
            usage,
        })?;
        if !result.ok && !opts.allow_failure {
            return Err(Error::StepFailed {
                name: name.into(),
                reason: summary,
            });
        }
        Ok(result)
    }
}

/// What every attempt of one step shares.
struct AttemptCtx<'a> {
    name: &'a str,
    what: &'a str,
    pl: &'a super::step_wrapper::Placement,
    req: &'a ExecRequest,
    nonce: &'a str,
    /// The log files' stem (`001-build`).
    stem: &'a str,
    /// The cwd as the journal shows it.
    rel_shown: &'a str,
    retries: u32,
    started: Instant,
}

impl Run {
    /// An attempt's log stem (`001-build`, `001-build.attempt2`) and the
    /// sink its output goes into.
    fn attempt_sink(&self, c: &AttemptCtx<'_>, attempt: u32) -> (String, super::output::StepSink) {
        let stem_n = if attempt == 1 {
            c.stem.to_owned()
        } else {
            format!("{}.attempt{attempt}", c.stem)
        };
        let sink = super::output::StepSink::new(
            c.name,
            &self.cfg.out_dir.join("steps"),
            &stem_n,
            c.nonce,
            self.state().redactor.clone(),
            self.reporter.clone(),
        );
        (stem_n, sink)
    }

    /// Run attempt number `attempt` of a step: its logs, its journal
    /// fact, and what it means. `Ok(None)`: another attempt is due (the
    /// command failed, or the provider could not run it, with retries
    /// left); `Ok(Some(..))`: the step's result and the last signal.
    fn attempt(
        &self,
        c: &AttemptCtx<'_>,
        attempt: u32,
    ) -> Result<Option<(StepResult, Option<i32>)>> {
        let name = c.name;
        let (stem_n, mut sink) = self.attempt_sink(c, attempt);
        let t = Instant::now();
        // A sandbox paused (or ended) outside rfs while the command
        // waits would hold the wait forever: the watch ends it.
        let watched = self.block_on_exec(super::watch::watched(
            self.cfg.provider.as_ref(),
            &c.pl.sandbox_id,
            self.cfg.provider.exec(&c.pl.sandbox_id, c.req, &mut sink),
        ));
        let (res, stalled) = match watched {
            Ok(res) => (res, None),
            Err(how) => (
                Err(crate::provider::ProviderError::Lost(
                    how.clone().to_string(),
                )),
                Some(how),
            ),
        };
        let refused = match &res {
            Ok(o) => sink.close_wrapper(o.exit),
            Err(_) => sink.close_wrapper(None),
        };
        let (stdout, stderr) = sink
            .finish()
            .map_err(|e| Error::Internal(format!("cannot write step log: {e}")))?;
        let elapsed = super::sync::ms(t.elapsed().as_millis());
        let stdout_log = self.log_digest(&format!("{stem_n}.stdout.log"))?;
        let stderr_log = self.log_digest(&format!("{stem_n}.stderr.log"))?;
        if let Some(how) = stalled {
            let msg = format!(
                "step `{name}`: sandbox {} {how} during the step; rfs stopped waiting for the command",
                c.pl.sandbox_id
            );
            return Err(self.sandbox_lost(&c.pl.sandbox_id, name, &how, msg));
        }
        let outcome = match res {
            Ok(o) => o,
            Err(e) => {
                let _ = self.record(Event::StepProviderError {
                    name: c.name.to_owned(),
                    attempt,
                    error: e.to_string(),
                    duration_ms: elapsed,
                    stdout_log,
                    stderr_log,
                    output_tail: crate::events::OutputTail::of(&stdout, &stderr),
                });
                if attempt <= c.retries {
                    return Ok(None);
                }
                return Err(self.provider_failure(name, &c.pl.sandbox_id, e));
            }
        };
        // A resource limit it reached is the step's outcome (never a bare
        // `exit 137`).
        let hits = self.block_on(
            self.cfg
                .provider
                .limits_reached(&c.pl.sandbox_id, outcome.success()),
        );
        let limit = (!hits.is_empty()).then(|| {
            hits.iter()
                .map(|h| h.describe())
                .collect::<Vec<_>>()
                .join("; ")
        });
        // A command that did not succeed may have lost its sandbox
        // (killed, stopped or removed from outside): that is the
        // step's outcome, not the exit code the kill left.
        if !outcome.success() && !outcome.cancelled && limit.is_none() {
            if let Some(how) = self.sandbox_death_after(&c.pl.sandbox_id, &outcome) {
                let msg = format!(
                    "step `{name}`: sandbox {} {how} during the step; its {} is not the command's",
                    c.pl.sandbox_id,
                    crate::exit_code::ExitText(outcome.exit)
                );
                return Err(self.sandbox_lost(&c.pl.sandbox_id, name, &how, msg));
            }
        }
        if let Some(msg) = refused.map(|r| c.pl.refusal_message(&r, c.what)) {
            let msg = self.state().redactor.redact_str(&msg);
            self.record_refused_step(name, c.rel_shown, &msg);
            return Err(self.refuse(msg));
        }
        self.record(Event::StepAttempt {
            name: c.name.to_owned(),
            attempt,
            sandbox_id: c.pl.sandbox_id.clone(),
            exit: outcome.exit,
            signal: outcome.signal,
            timed_out: outcome.timed_out,
            cancelled: outcome.cancelled,
            duration_ms: elapsed,
            stdout_log,
            stderr_log,
            output_tail: crate::events::OutputTail::of(&stdout, &stderr),
        })?;
        if outcome.cancelled {
            return Err(Error::Interrupted);
        }
        let last_signal = outcome.signal;
        let r = StepResult {
            exit: outcome.exit,
            stdout,
            stderr,
            duration_ms: c.started.elapsed().as_millis(),
            attempts: attempt,
            timed_out: outcome.timed_out,
            ok: outcome.success(),
            limit,
        };
        if r.ok || attempt > c.retries {
            return Ok(Some((r, last_signal)));
        }
        Ok(None)
    }
}

impl Run {
    /// A step the provider could not run at all. A sandbox that no longer
    /// exists is named as such and refused; anything else is a failure in
    /// the provider's words.
    fn provider_failure(&self, name: &str, id: &str, e: crate::provider::ProviderError) -> Error {
        let how = match self.sandbox_stall(id) {
            Some(how) => Some(how),
            None if matches!(e, crate::provider::ProviderError::NotFound { .. }) => {
                Some(super::watch::VANISHED.to_owned())
            }
            None => None,
        };
        if let Some(how) = how {
            let msg = format!(
                "step `{name}`: sandbox {id} {how} during the step (the provider said: {e})"
            );
            return self.sandbox_lost(id, name, &how, msg);
        }
        Error::StepFailed {
            name: name.into(),
            reason: format!("the provider could not run it in sandbox {id}: {e}"),
        }
    }

    /// How the sandbox ended (killed, stopped or removed outside rfs), or
    /// that it was paused outside rfs: why a wait on it cannot end (see
    /// [`super::watch`]). Asked of the provider (get-by-id).
    pub(crate) fn sandbox_stall(&self, id: &str) -> Option<String> {
        self.ask_sandbox(id, 1, super::watch::stalled)
    }

    /// What `classify` makes of the provider's get-by-id of sandbox `id`,
    /// asked up to `tries` times 200 ms apart until it says something: an
    /// end by a kill may come just before the provider's state catches
    /// up. A provider that cannot answer says nothing.
    pub(crate) fn ask_sandbox(
        &self,
        id: &str,
        tries: u32,
        classify: fn(Option<&crate::provider::SandboxInfo>) -> Option<String>,
    ) -> Option<String> {
        (0..tries).find_map(|i| {
            if i > 0 {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            match self.block_on(self.cfg.provider.get(id)) {
                Ok(found) => classify(found.as_ref()),
                Err(_) => None,
            }
        })
    }

    /// How the sandbox ended, after a command ended as `outcome`: an end
    /// by a kill (SIGKILL/SIGTERM, no exit status) is asked a few more
    /// times (bounded, 1 s in all).
    fn sandbox_death_after(
        &self,
        id: &str,
        outcome: &crate::provider::ExecOutcome,
    ) -> Option<String> {
        let killed =
            outcome.signal.is_some() || matches!(outcome.exit, None | Some(137) | Some(143));
        self.ask_sandbox(id, if killed { 5 } else { 1 }, super::watch::death_of)
    }

    /// Journal that the run's sandbox ended outside rfs (`sandbox.lost`:
    /// what the provider said, and that rfs did not do it) and refuse.
    pub(crate) fn sandbox_lost(&self, id: &str, during: &str, how: &str, msg: String) -> Error {
        self.record_sandbox_lost(id, during, how);
        let msg = self.state().redactor.redact_str(&msg);
        self.refuse(msg)
    }

    /// Journal `sandbox.lost` (see [`Self::sandbox_lost`]).
    pub(crate) fn record_sandbox_lost(&self, id: &str, during: &str, how: &str) {
        let _ = self.record(Event::SandboxLost {
            sandbox_id: id.to_owned(),
            during: during.to_owned(),
            how: how.to_owned(),
            ended_by: "outside rfs".into(),
        });
    }

    /// Journal a refused step (its row in EVIDENCE.md).
    fn record_refused_step(&self, name: &str, cwd: &str, why: &str) {
        let _ = self.record(Event::StepRefused {
            name: name.to_owned(),
            cwd: cwd.to_owned(),
            reason: why.to_owned(),
        });
    }

    /// The digest of step log `steps/NAME`, if it was written (silent
    /// streams leave none).
    pub(crate) fn log_digest(&self, name: &str) -> Result<Option<crate::events::FileDigest>> {
        let rel = format!("steps/{name}");
        match crate::journal::file_digest(&self.cfg.out_dir, &rel) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Internal(format!("cannot hash log {rel}: {e}"))),
        }
    }
}

/// One line for a step's end. A missing exit code is never success: it
/// names the signal when the provider reported one, and otherwise says
/// that the provider reported no exit code (nothing is assumed).
fn describe(r: &StepResult, signal: Option<i32>, timeout: Option<Duration>) -> String {
    let how = describe_end(r, signal, timeout);
    match &r.limit {
        Some(l) => format!("{l} ({how})"),
        None => how,
    }
}

/// How the command ended, without a limit it reached.
fn describe_end(r: &StepResult, signal: Option<i32>, timeout: Option<Duration>) -> String {
    let tries = if r.attempts > 1 {
        format!(" after {} attempts", r.attempts)
    } else {
        String::new()
    };
    if r.timed_out {
        format!(
            "timed out after {}s{tries}",
            timeout.map(|t| t.as_secs_f64()).unwrap_or_default()
        )
    } else {
        match r.exit {
            Some(c) => format!("exit {c}, {} ms{tries}", r.duration_ms),
            None => match signal {
                Some(sig) => format!("no exit code (killed by signal {sig}){tries}"),
                None => format!(
                    "the provider reported no exit code (the command's outcome is unknown, never success){tries}"
                ),
            },
        }
    }
}

/// A step name as part of a file name.
pub(crate) fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    if s.is_empty() {
        "step".into()
    } else {
        s
    }
}
