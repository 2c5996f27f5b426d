//! `spawn(name, command, #{ cwd, env })`: a background process in the
//! run's sandbox, with a handle (`wait_for`, `alive`, `logs`, `stop`).
//!
//! It is a provider command like a step's ([`rfs_sandbox::provider::Provider::exec`],
//! through the same in-sandbox wrapper, so the same cwd mapping, env rules
//! and refusals), waited on by a task of the run's runtime instead of the
//! script thread. Its output goes through a step's sink: redacted into
//! `steps/NNN-spawn-NAME.*.log`, to the console, and into a bounded tail the
//! handle reads. Before the command, the wrapper's shell prints the
//! process group it leads on stdout (a line with the command's nonce,
//! held back from the output): `stop()` cancels the command (the provider
//! kills its group) and then a probe run in the sandbox proves no process
//! of that group is left. Whatever is still running at the run's end is
//! stopped the same way before the sandbox is destroyed (`spawn.end`,
//! `by: teardown`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::background::{Background, Shared};
use super::output::StepSink;
use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::{ExecOutcome, ExecRequest, OutputSink, ProviderResult};

/// Options of `spawn(name, command, opts)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct SpawnOptions {
    /// Relative to the synced root; default: the invoking dir, mapped.
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
}

/// How long `spawn()` waits for the command to start (the wrapper's
/// checks passed, or refused) before it gives up.
const START_BOUND: Duration = Duration::from_secs(60);

/// How long `stop()` waits for the provider to end the command.
const STOP_BOUND: Duration = Duration::from_secs(30);

/// The sink of a background process: its first stdout line is the
/// wrapper shell's group line (held back), the rest a step's output.
pub(crate) struct SpawnSink {
    inner: StepSink,
    marker: String,
    /// Stdout held until the group line ended (`None`: passed on).
    held: Option<Vec<u8>>,
    shared: Arc<Shared>,
}

impl OutputSink for SpawnSink {
    fn stdout(&mut self, chunk: &[u8]) {
        let Some(held) = self.held.as_mut() else {
            return self.inner.stdout(chunk);
        };
        held.extend_from_slice(chunk);
        let Some(nl) = held.iter().position(|b| *b == b'\n') else {
            if held.len() > 256 {
                let held = self.held.take().unwrap_or_default();
                let _ = self.shared.started.set(None);
                self.inner.stdout(&held);
            }
            return;
        };
        let held = self.held.take().unwrap_or_default();
        let (line, rest) = held.split_at(nl + 1);
        let text = String::from_utf8_lossy(&line[..nl]);
        match text.strip_prefix(self.marker.as_str()) {
            Some(g) => {
                let _ = self.shared.started.set(g.trim().parse::<i32>().ok());
                self.inner.stdout(rest);
            }
            None => {
                let _ = self.shared.started.set(None);
                self.inner.stdout(&held);
            }
        }
    }

    fn stderr(&mut self, chunk: &[u8]) {
        self.inner.stderr(chunk);
    }
}

/// What the command's task hands back when the command ended.
pub(crate) type Done = (ProviderResult<ExecOutcome>, SpawnSink);

/// How a background process ended, once journaled.
#[derive(Debug, Clone)]
pub(crate) struct Ended {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub group_gone: Option<bool>,
}

/// One background process of the run.
pub(crate) type Spawned = Background<Done, Ended>;

impl Spawned {
    pub(crate) fn group(&self) -> Option<i32> {
        self.shared.started.get().copied().flatten()
    }
}

/// The shell the wrapper runs: print the group this shell leads, then
/// become the command (`sh -c COMMAND sh`, as a step runs it).
fn composed(command: &str, marker: &str) -> String {
    format!(
        "__rfs_g=; if read -r __rfs_s < /proc/$$/stat 2>/dev/null; then __rfs_s=${{__rfs_s##*) }}; set -- $__rfs_s; __rfs_g=$3; fi; printf '%s%s\\n' '{marker}' \"$__rfs_g\"; unset __rfs_g __rfs_s; set --; exec /bin/sh -c {} sh",
        quote(command)
    )
}

/// `s` as one single-quoted shell word.
pub(crate) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

impl Run {
    /// Start a background process. Returns once its command started in
    /// the sandbox (the wrapper's checks passed); a refused cwd is a
    /// refusal like a step's.
    pub(crate) fn spawn(
        &self,
        name: &str,
        command: &str,
        opts: SpawnOptions,
    ) -> Result<Arc<Spawned>> {
        rfs_evidence::validate::name("a process name", name)
            .map_err(|e| self.refuse(e.to_string()))?;
        let name = &self.state().redactor.redact_str(name);
        let what = format!("spawn `{name}`");
        if command.contains('\0') || command.trim().is_empty() {
            return Err(self.refuse(format!(
                "{what} refused before running anything: its command is empty or contains a NUL byte"
            )));
        }
        if self.state().spawned.iter().any(|s| s.name == *name) {
            return Err(self.refuse(format!(
                "{what} refused before running anything: this run already spawned a process named `{name}` (names its logs and facts; pick another)"
            )));
        }
        let pl = self.place_command(&what, opts.cwd.as_deref(), &opts.env)?;
        let seq = self.next_log_seq();
        let (rel_shown, remote_shown) = self.shown_cwd(&pl);
        let pin = self
            .state()
            .source
            .as_ref()
            .map(|s| (s.pin.commit.clone(), s.pin.tree_digest.clone()));
        self.record(Event::SpawnStart {
            name: name.to_owned(),
            seq,
            command: self.state().redactor.redact_str(command),
            sandbox_id: pl.sandbox_id.clone(),
            cwd: rel_shown,
            cwd_remote: remote_shown,
            env: opts
                .env
                .iter()
                .map(|(k, v)| (k.clone(), self.redact_value(k, v)))
                .collect(),
            commit: pin.as_ref().map(|p| p.0.clone()),
            tree_digest: pin.map(|p| p.1),
        })?;
        let stem = format!("{seq:03}-spawn-{}", super::step::file_stem(name));
        let nonce = super::step_wrapper::nonce();
        let marker = format!("rfs-spawn-group:{nonce}:");
        let cancel = self.cancel_token().child_token();
        let req = ExecRequest {
            argv: pl.argv(&composed(command, &marker), &nonce),
            cwd: super::step_wrapper::START_DIR.into(),
            env: pl.env.clone(),
            timeout: None,
            cancel: cancel.clone(),
        };
        let (inner, shared) = self.background_sink(name, &stem, &nonce);
        let mut sink = SpawnSink {
            inner,
            marker,
            held: Some(Vec::new()),
            shared: shared.clone(),
        };
        let provider = self.cfg.provider.clone();
        let id = pl.sandbox_id.clone();
        let task = self.rt.spawn(async move {
            let r = provider.exec(&id, &req, &mut sink).await;
            (r, sink)
        });
        let sp = Arc::new(Spawned::new(
            name,
            &pl.sandbox_id,
            stem,
            cancel,
            task,
            shared,
        ));
        self.state().spawned.push(sp.clone());
        self.await_start(&sp, &pl, &what)?;
        Ok(sp)
    }

    /// Wait until the command started (its group line came) or ended;
    /// an end by the wrapper's refusal is refused like a step's cwd.
    fn await_start(
        &self,
        sp: &Arc<Spawned>,
        pl: &super::step_wrapper::Placement,
        what: &str,
    ) -> Result<()> {
        let deadline = Instant::now() + START_BOUND;
        while sp.shared.started.get().is_none() && sp.alive() {
            self.check_cancelled()?;
            if Instant::now() >= deadline {
                self.end_spawned(sp, "stop()")?;
                return Err(Error::ScriptFailed(format!(
                    "{what}: its command did not start within {} s",
                    START_BOUND.as_secs()
                )));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        if sp.shared.started.get().is_some() {
            return Ok(());
        }
        // It ended before it started: the wrapper refused, or the
        // provider could not run it.
        let (refusal, error) = self.end_spawned_with(sp, "itself", Some(pl))?;
        if let Some(msg) = refusal {
            return Err(self.refuse(self.state().redactor.redact_str(&msg)));
        }
        if let Some(e) = error {
            return Err(Error::ScriptFailed(format!(
                "{what}: the provider could not run it in sandbox {}: {e}",
                pl.sandbox_id
            )));
        }
        Ok(())
    }

    /// `stop()`: end the process's group (verified) and journal it.
    pub(crate) fn stop_spawned(&self, sp: &Arc<Spawned>) -> Result<Ended> {
        self.end_spawned(sp, "stop()")
    }

    /// End every background process still running (teardown); returns
    /// what could not be proven stopped.
    pub(crate) fn stop_all_spawned(&self) -> Option<String> {
        let all = self.state().spawned.clone();
        let mut problems = vec![];
        for sp in all {
            if sp.ended().is_some() {
                continue;
            }
            match self.end_spawned(&sp, "teardown") {
                Ok(e) if e.group_gone == Some(false) => problems.push(format!(
                    "background process `{}`: processes of its group were still there after it was stopped",
                    sp.name
                )),
                Ok(_) => {}
                Err(e) => problems.push(format!("background process `{}`: {e}", sp.name)),
            }
        }
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// End `sp` (`by`: who ends it) unless it was ended already; an
    /// error when its group could not be proven gone.
    fn end_spawned(&self, sp: &Arc<Spawned>, by: &str) -> Result<Ended> {
        if let Some(e) = sp.ended() {
            return Ok(e);
        }
        // An interrupt cancels every spawned command with the run's.
        let by = if self.is_cancelled() {
            "interrupt"
        } else if sp.alive() {
            by
        } else {
            "itself"
        };
        self.end_spawned_with(sp, by, None)?;
        let e = sp.ended().ok_or_else(|| {
            Error::Internal(format!("spawn `{}`: its end was not recorded", sp.name))
        })?;
        if e.group_gone == Some(false) {
            return Err(Error::ScriptFailed(format!(
                "spawn `{}`: processes of its group {} were still running in sandbox {} after it was stopped",
                sp.name,
                sp.group().unwrap_or_default(),
                sp.sandbox_id
            )));
        }
        Ok(e)
    }

    /// Cancel the command (if it still runs), wait for its task, close
    /// its logs, prove its group gone and journal `spawn.end`. Returns
    /// the wrapper's refusal message (with `pl`) and the provider's
    /// error, if any.
    fn end_spawned_with(
        &self,
        sp: &Arc<Spawned>,
        by: &str,
        pl: Option<&super::step_wrapper::Placement>,
    ) -> Result<(Option<String>, Option<String>)> {
        sp.cancel();
        let task = sp.take_task();
        let Some(task) = task else {
            return Ok((None, None));
        };
        let joined = self.block_on(async { tokio::time::timeout(STOP_BOUND, task).await });
        let (res, mut sink) = match joined {
            Ok(Ok(done)) => done,
            Ok(Err(e)) => return Err(Error::Internal(format!("spawn `{}`: {e}", sp.name))),
            Err(_) => {
                return Err(Error::ScriptFailed(format!(
                    "spawn `{}`: the provider did not end its command within {} s",
                    sp.name,
                    STOP_BOUND.as_secs()
                )))
            }
        };
        let outcome = res.as_ref().ok().copied().unwrap_or_default();
        let refused = sink.inner.close_wrapper(outcome.exit);
        let output_cut = sink
            .inner
            .finish()
            .map_err(|e| Error::Internal(format!("cannot write the log of `{}`: {e}", sp.name)))?;
        let group = sp.group();
        let group_gone = group.and_then(|g| self.group_gone(&sp.sandbox_id, g));
        let error = res.err().map(|e| e.to_string());
        let (stdout_log, stderr_log) = self.background_logs(sp)?;
        let ended = Ended {
            exit: outcome.exit,
            signal: outcome.signal,
            group_gone,
        };
        sp.set_ended(ended);
        let refusal = match (refused, pl) {
            (Some(r), Some(pl)) => Some(pl.refusal_message(&r, &format!("spawn `{}`", sp.name))),
            _ => None,
        };
        self.record(Event::SpawnEnd {
            name: sp.name.clone(),
            by: if refusal.is_some() {
                "refused".into()
            } else {
                by.to_owned()
            },
            exit: outcome.exit,
            signal: outcome.signal,
            group,
            group_gone,
            duration_ms: sp.duration_ms(),
            stdout_log,
            stderr_log,
            output_tail: sp.shared.lines().tail(),
            output_cut,
            error: error.clone(),
        })?;
        Ok((refusal, error))
    }
}
