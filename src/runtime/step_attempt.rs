//! One attempt of a step: its command run into its logs while the
//! sandbox is watched, and what the attempt's end means (a result, a
//! retry, a lost sandbox, a limit reached, a refusal).

use std::time::Instant;

use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::ExecRequest;

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

/// What every attempt of one step shares.
pub(super) struct AttemptCtx<'a> {
    pub(super) name: &'a str,
    pub(super) what: &'a str,
    pub(super) pl: &'a super::step_wrapper::Placement,
    pub(super) req: &'a ExecRequest,
    pub(super) nonce: &'a str,
    /// The log files' stem (`001-build`).
    pub(super) stem: &'a str,
    /// The cwd as the journal shows it.
    pub(super) rel_shown: &'a str,
    pub(super) retries: u32,
    pub(super) started: Instant,
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
            self.log_budget.clone(),
        );
        (stem_n, sink)
    }

    /// Run attempt number `attempt` of a step: its logs, its journal
    /// fact, and what it means. `Ok(None)`: another attempt is due (the
    /// command failed, or the provider could not run it, with retries
    /// left); `Ok(Some(..))`: the step's result and the last signal.
    pub(super) fn attempt(
        &self,
        c: &AttemptCtx<'_>,
        attempt: u32,
    ) -> Result<Option<(StepResult, Option<i32>)>> {
        let name = c.name;
        let (stem_n, mut sink) = self.attempt_sink(c, attempt);
        let t = Instant::now();
        let (res, stalled) = self.exec_watched(c, &mut sink);
        let refused = match &res {
            Ok(o) => sink.close_wrapper(o.exit),
            Err(_) => sink.close_wrapper(None),
        };
        let super::output::Finished {
            stdout,
            stderr,
            logged,
            cut: output_cut,
        } = sink
            .finish_logged()
            .map_err(|e| Error::Internal(format!("cannot write step log: {e}")))?;
        let elapsed = super::ms(t.elapsed().as_millis());
        // A silent stream has no log to hash.
        let digest = |written: bool, s: &str| match written {
            true => self.log_digest(&format!("{stem_n}.{s}.log")),
            false => Ok(None),
        };
        let stdout_log = digest(logged[0], "stdout")?;
        let stderr_log = digest(logged[1], "stderr")?;
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
                    output_tail: rfs_evidence::events::OutputTail::of(&stdout, &stderr),
                    output_cut,
                });
                if attempt <= c.retries {
                    return Ok(None);
                }
                return Err(self.provider_failure(name, &c.pl.sandbox_id, e));
            }
        };
        // A resource limit it reached is the step's outcome (never a bare
        // `exit 137`).
        let limit = self.limit_reached(&c.pl.sandbox_id, outcome.success());
        // A command that did not succeed may have lost its sandbox
        // (killed, stopped or removed from outside): that is the
        // step's outcome, not the exit code the kill left.
        if !outcome.success() && !outcome.cancelled && limit.is_none() {
            if let Some(lost) = self.lost_during_step(c, &outcome) {
                return Err(lost);
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
            output_tail: rfs_evidence::events::OutputTail::of(&stdout, &stderr),
            output_cut,
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

    /// Run the attempt's command into `sink`, watching its sandbox: the
    /// command's result, and how the sandbox ended if it stalled the wait.
    fn exec_watched(
        &self,
        c: &AttemptCtx<'_>,
        sink: &mut super::output::StepSink,
    ) -> (
        rfs_sandbox::provider::ProviderResult<rfs_sandbox::provider::ExecOutcome>,
        Option<String>,
    ) {
        // A sandbox paused (or ended) outside rfs while the command
        // waits would hold the wait forever: the watch ends it.
        let watched = self.block_on_exec(super::watch::watched(
            self.cfg.provider.as_ref(),
            &c.pl.sandbox_id,
            self.cfg.provider.exec(&c.pl.sandbox_id, c.req, sink),
        ));
        match watched {
            Ok(res) => (res, None),
            Err(how) => (
                Err(rfs_sandbox::provider::ProviderError::Lost(
                    how.clone().to_string(),
                )),
                Some(how),
            ),
        }
    }

    /// The resource limits sandbox `sandbox_id` reached during the step,
    /// said as one line (`None`: none).
    fn limit_reached(&self, sandbox_id: &str, success: bool) -> Option<String> {
        let hits = self.block_on(self.cfg.provider.limits_reached(sandbox_id, success));
        (!hits.is_empty()).then(|| {
            hits.iter()
                .map(|h| h.describe())
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// The error of a step whose sandbox died under it (killed, stopped or
    /// removed from outside), if it did: its exit code is not the
    /// command's.
    fn lost_during_step(
        &self,
        c: &AttemptCtx<'_>,
        outcome: &rfs_sandbox::provider::ExecOutcome,
    ) -> Option<Error> {
        let how = self.sandbox_death_after(&c.pl.sandbox_id, outcome)?;
        let msg = format!(
            "step `{}`: sandbox {} {how} during the step; its {} is not the command's",
            c.name,
            c.pl.sandbox_id,
            rfs_evidence::exit_code::ExitText(outcome.exit)
        );
        Some(self.sandbox_lost(&c.pl.sandbox_id, c.name, &how, msg))
    }
}

impl Run {
    /// A step the provider could not run at all. A sandbox that no longer
    /// exists is named as such and refused; anything else is a failure in
    /// the provider's words.
    pub(super) fn provider_failure(
        &self,
        name: &str,
        id: &str,
        e: rfs_sandbox::provider::ProviderError,
    ) -> Error {
        let how = match self.sandbox_stall(id) {
            Some(how) => Some(how),
            None if matches!(e, rfs_sandbox::provider::ProviderError::NotFound { .. }) => {
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
        classify: fn(Option<&rfs_sandbox::provider::SandboxInfo>) -> Option<String>,
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
    pub(super) fn sandbox_death_after(
        &self,
        id: &str,
        outcome: &rfs_sandbox::provider::ExecOutcome,
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
    pub(super) fn record_refused_step(&self, name: &str, cwd: &str, why: &str) {
        let _ = self.record(Event::StepRefused {
            name: name.to_owned(),
            cwd: cwd.to_owned(),
            reason: why.to_owned(),
        });
    }

    /// The digest of step log `steps/NAME`, if it was written (silent
    /// streams leave none).
    pub(crate) fn log_digest(
        &self,
        name: &str,
    ) -> Result<Option<rfs_evidence::events::FileDigest>> {
        let rel = format!("steps/{name}");
        match rfs_evidence::journal::file_digest(&self.cfg.out_dir, &rel) {
            Ok(d) => Ok(Some(d)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::Internal(format!("cannot hash step log {rel}: {e}"))),
        }
    }
}
