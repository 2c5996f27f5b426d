//! The fail-closed runtime under the script: one run, one shared sandbox,
//! one bound source, journaled steps, verified teardown.
//!
//! Script bindings call into [`Run`] from the script thread; every method
//! blocks on the run's tokio runtime. Data flows script → runtime →
//! provider; the runtime reports through [`rfs_evidence::events`] and the journal.

mod artifact_archive;
pub(crate) mod artifacts;
pub(crate) mod attach;
pub(crate) mod background;
pub(crate) mod caches;
pub(crate) mod checkpoint;
pub(crate) mod cwd;
mod egress;
pub(crate) mod exec_loop;
mod host_mounts;
mod image_env;
mod junit_collect;
pub(crate) mod kept;
pub(crate) mod output;
pub(crate) mod placement;
mod replay_check;
pub(crate) mod resync;
mod resync_error;
mod secret_identifiers;
pub(crate) mod service;
pub(crate) mod spawn;
pub(crate) mod spawn_wait;
pub(crate) mod step;
pub(crate) mod step_attempt;
pub(crate) mod step_wrapper;
pub(crate) mod sync;
mod sync_target;
pub(crate) mod teardown;
mod transfer;
pub(crate) mod watch;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::{Event, Reporter};
use rfs_evidence::journal::evidence::Evidence;
use rfs_evidence::journal::Journal;
use rfs_evidence::outcome::RunOutcome;
use rfs_evidence::secrets::Redactor;
use rfs_sandbox::provider::select::ProviderChoice;
use rfs_sandbox::provider::{Provider, SandboxInfo};
use rfs_sandbox::source::manifest::Manifest;

pub(crate) use placement::SandboxOptions;
pub(crate) use step::StepOptions;
pub(crate) use step_attempt::StepResult;
pub(crate) use sync::SourcePin;

/// Everything a run is configured with (validated settings).
#[derive(Clone)]
pub(crate) struct RunConfig {
    pub run_id: String,
    pub provider: Arc<dyn Provider>,
    pub choice: ProviderChoice,
    /// Where `rfs` was started: the default repository and step cwd.
    pub invocation_dir: PathBuf,
    pub script_path: PathBuf,
    pub out_dir: PathBuf,
    /// Scratch space for archives (same filesystem as local sandboxes).
    pub scratch_dir: PathBuf,
    /// rfs's state directory (caches live in `caches/` under it).
    pub state_dir: PathBuf,
    pub keep: bool,
    /// Default image for providers that take one.
    pub image: Option<String>,
    /// Whether `image` is the repository's choice (`rfs.toml`).
    pub image_by_repository: bool,
    /// Upper bound on the sandbox's life (dead-man switch).
    pub max_lifetime: Duration,
    /// How long teardown verification may poll.
    pub cleanup_deadline: Duration,
    /// The script and modules copied into the output directory (their
    /// digests go into the first journal fact).
    pub bundle: Option<Arc<rfs_evidence::bundle::ScriptBundle>>,
    /// The key that will sign the journal (named in the first fact).
    pub signer: Option<rfs_evidence::events::Signer>,
    /// What this run replays; its commit is bound whatever the script asks.
    pub replay_of: Option<rfs_evidence::events::ReplayOf>,
    /// Isolation asked for by `--isolation` / `RFS_LOCAL_ISOLATION`.
    pub isolation: rfs_sandbox::provider::isolation::IsolationRequest,
    /// Variables that are secrets whatever their name (`rfs.toml`'s
    /// `secrets`).
    pub secret_names: std::collections::BTreeSet<String>,
    /// `--allow-dirty`: ship the working tree as it is.
    pub allow_dirty: bool,
    /// The repositories a script may ship (`--allow-repo`).
    pub allowed_repos: rfs_sandbox::source::allowed_repos::AllowedRepos,
    /// The bound on the output the run keeps in its logs.
    pub max_log: crate::limit_ceilings::LogBound,
    /// A suite's setup run: its checkpoints go to the suite.
    pub checkpoint_sink: Option<Arc<checkpoint::CheckpointSink>>,
    /// The checkpoint the run's sandbox starts from (a suite's proof).
    pub start_from: Option<Arc<checkpoint::StartFrom>>,
}

/// The source bound to the run.
#[derive(Debug, Clone)]
pub(crate) struct BoundSource {
    pub pin: SourcePin,
    pub manifest: Manifest,
    /// Physical remote path of the synced root, as the sandbox resolved it.
    pub physical_root: String,
    /// The options it was bound with (a second bind must match); also the
    /// local repository root and synced subdirectory for cwd mapping.
    pub request: sync::SyncRequestKey,
}

/// Mutable state of a run.
#[derive(Default)]
pub(crate) struct RunState {
    pub sandbox: Option<SandboxInfo>,
    pub sandbox_opts: Option<SandboxOptions>,
    /// Set once the sandbox was destroyed (after a failed sync or at the end).
    pub destroyed: bool,
    pub source: Option<BoundSource>,
    /// The values of refusals raised to the script: an error that ends
    /// the script is a refusal (exit 3) when its value is one of these
    /// (by identity, not by text).
    pub refusals: Vec<rhai::ImmutableString>,
    pub redactor: Redactor,
    pub step_seq: u32,
    /// The step that ended last and how (a `collect()` finding nothing
    /// is its failure).
    pub last_step: Option<(String, String)>,
    /// An internal error that ended the script (not catchable).
    pub fatal: Option<String>,
    /// Attached terminal sessions (closed at run end).
    pub sessions: Vec<Arc<attach::Attached>>,
    pub session_seq: u32,
    /// Bundle paths of modules journaled as loaded at run time.
    pub runtime_modules: std::collections::BTreeSet<String>,
    /// The commit every bind uses, set by `rfs bisect` ([`Run::pin_commit`]).
    pub forced_commit: Option<String>,
    /// What `collect()` and `put()` moved so far.
    pub artifacts: artifacts::Ledger,
    /// Background processes `spawn()` started (ended at run end).
    pub spawned: Vec<Arc<spawn::Spawned>>,
    /// Services `service()` started (removed at run end, before the sandbox).
    pub services: Vec<Arc<service::Service>>,
    /// Caches this run holds (locked until after teardown).
    pub caches: Vec<caches::HeldCache>,
    /// Checkpoints this run made and removes at its end.
    pub checkpoints: Vec<checkpoint::MadeCheckpoint>,
    /// The default cwd as [`Run::default_cwd`] worked it out: the bound
    /// source's root and subdirectory, and the invocation directory in it.
    pub default_cwd: Option<(std::path::PathBuf, Option<String>, Option<String>)>,
}

/// One run of a script.
pub(crate) struct Run {
    pub cfg: RunConfig,
    pub rt: tokio::runtime::Handle,
    /// Cancelled on interrupt; renewable (the REPL interrupts one
    /// evaluation without ending the session).
    cancel: Mutex<CancellationToken>,
    /// Mirrors the current token's state for the script engine's
    /// per-operation check (an atomic load, no lock).
    interrupted: std::sync::atomic::AtomicBool,
    reporter: Arc<dyn Reporter>,
    state: Mutex<RunState>,
    /// The journal and the evidence folded from it, under one lock so
    /// EVIDENCE.md always renders exactly the lines written.
    record: Mutex<Record>,
    /// When EVIDENCE.md was last written (rewrites are throttled; the
    /// journal is the record of truth and is never throttled).
    evidence_written: Mutex<Option<std::time::Instant>>,
    /// Where commands of a self-contained provider are polled.
    exec_loop: exec_loop::ExecLoop,
    /// What the run's logs may still keep ([`RunConfig::max_log`]).
    log_budget: Arc<output::LogBudget>,
}

struct Record {
    journal: Journal,
    evidence: Evidence,
}

/// EVIDENCE.md is rewritten at most this often while a run goes, and
/// always at its end.
const EVIDENCE_EVERY: std::time::Duration = std::time::Duration::from_millis(250);

impl Run {
    /// Start a run: create the output directory and the journal, and
    /// journal the run's configuration.
    pub(crate) fn start(
        cfg: RunConfig,
        rt: tokio::runtime::Handle,
        reporter: Arc<dyn Reporter>,
        vars: &BTreeMap<String, String>,
    ) -> Result<Arc<Run>> {
        rfs_evidence::out_dir::create_root(&cfg.out_dir)
            .and_then(|_| rfs_evidence::out_dir::create_dir(&cfg.out_dir.join("steps")))
            .map_err(|e| {
                Error::Usage(format!(
                    "cannot create output directory {}: {e}",
                    cfg.out_dir.display()
                ))
            })?;
        std::fs::create_dir_all(&cfg.scratch_dir).map_err(|e| {
            Error::Usage(format!(
                "cannot create the state directory {} (set RFS_STATE_DIR): {e}",
                cfg.scratch_dir.display()
            ))
        })?;
        // An output dir inside a repository must never make the next run's
        // tree dirty: git ignores everything in it, this file included.
        rfs_evidence::out_dir::write_new(&cfg.out_dir.join(".gitignore"), b"*\n")
            .map_err(Error::internal)?;
        let journal = Journal::create(&cfg.out_dir.join("journal.jsonl")).map_err(|e| {
            Error::Usage(format!(
                "cannot create journal in {} (is it the output of an earlier run?): {e}",
                cfg.out_dir.display()
            ))
        })?;
        if let Some(b) = &cfg.bundle {
            b.write(&cfg.out_dir).map_err(|e| {
                Error::Internal(format!("cannot copy the script into the bundle: {e}"))
            })?;
        }
        let mut state = RunState::default();
        for (k, v) in vars {
            if rfs_evidence::secrets::is_secret_name(k) || cfg.secret_names.contains(k) {
                state.redactor.add(v);
            }
        }
        let log_budget = Arc::new(output::LogBudget::new(cfg.max_log.bytes, &cfg.max_log.by));
        let run = Arc::new(Run {
            log_budget,
            cfg,
            rt,
            cancel: Mutex::new(CancellationToken::new()),
            interrupted: std::sync::atomic::AtomicBool::new(false),
            reporter,
            state: Mutex::new(state),
            record: Mutex::new(Record {
                journal,
                evidence: Evidence::default(),
            }),
            evidence_written: Mutex::new(None),
            exec_loop: exec_loop::ExecLoop::default(),
        });
        let vars_redacted: BTreeMap<_, _> = vars
            .iter()
            .map(|(k, v)| (k.clone(), run.redact_value(k, v)))
            .collect();
        run.record(Event::RunStart {
            run_id: run.cfg.run_id.clone(),
            script: run.cfg.script_path.display().to_string(),
            invocation_dir: run.cfg.invocation_dir.display().to_string(),
            out_dir: run.cfg.out_dir.display().to_string(),
            provider: run.cfg.choice.name.clone(),
            provider_reason: run.cfg.choice.reason.to_string(),
            rfs_version: env!("CARGO_PKG_VERSION").to_owned(),
            vars: vars_redacted,
            keep: run.cfg.keep,
            bundle: run.cfg.bundle.as_ref().map(|b| Box::new(b.manifest())),
            signing_key: run.cfg.signer.clone().map(Box::new),
            replay_of: run.cfg.replay_of.clone().map(Box::new),
        })?;
        run.write_evidence();
        Ok(run)
    }

    pub(crate) fn state(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Report something that cannot be journaled (a problem with the
    /// record itself).
    pub(crate) fn warn(&self, text: &str) {
        self.reporter.warning(text);
    }

    /// Journal a fact, fold it into the evidence and hand it to the
    /// reporter. A journal that cannot be written fails the run.
    /// EVIDENCE.md is rewritten unless it was written very recently (it
    /// always is at run end).
    pub(crate) fn record(&self, e: Event) -> Result<()> {
        tracing::debug!(event = ?e, "journal");
        let ended = matches!(e, Event::RunEnd { .. });
        {
            let mut r = self.record.lock().unwrap_or_else(|p| p.into_inner());
            if let Err(err) = r.journal.append(&e) {
                drop(r);
                let msg = format!("cannot write the journal: {err}");
                self.warn(&msg);
                return Err(Error::Internal(msg));
            }
            r.evidence.apply(&e);
        }
        self.reporter.event(&e);
        let due = ended || {
            let last = self
                .evidence_written
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            last.is_none_or(|t| t.elapsed() >= EVIDENCE_EVERY)
        };
        if due {
            self.write_evidence();
        }
        Ok(())
    }

    fn write_evidence(&self) {
        *self
            .evidence_written
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(std::time::Instant::now());
        let (text, lines, head) = {
            let r = self.record.lock().unwrap_or_else(|p| p.into_inner());
            let (lines, head) = (r.journal.len(), r.journal.head().to_owned());
            (r.evidence.render(lines, &head), lines, head)
        };
        if let Err(e) = rfs_evidence::journal::head::write(&self.cfg.out_dir, lines, &head) {
            self.warn(&format!(
                "cannot write {}: {e}",
                rfs_evidence::journal::head::FILE
            ));
        }
        if let Err(e) = rfs_evidence::journal::evidence::write(&self.cfg.out_dir, &text) {
            self.warn(&format!("cannot write EVIDENCE.md: {e}"));
        }
    }

    /// A refusal by the fail-closed runtime. (It is recorded for the exit
    /// code where it reaches the script, `script::bindings::to_rhai`.)
    pub(crate) fn refuse(&self, msg: impl Into<String>) -> Error {
        Error::Refused(msg.into())
    }

    /// A value as it may appear in the journal.
    pub(crate) fn redact_value(&self, name: &str, value: &str) -> String {
        if rfs_evidence::secrets::is_secret_name(name) || self.cfg.secret_names.contains(name) {
            rfs_evidence::secrets::REDACTED.to_owned()
        } else {
            self.state().redactor.redact_str(value)
        }
    }

    /// Block the script thread on a future.
    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> F::Output {
        self.rt.block_on(f)
    }

    /// [`Self::block_on`] while watching sandbox `id`: `Err` with how, if
    /// it is paused, dead or gone before `f` ends (see [`watch`]).
    pub(crate) fn block_on_watched<F: std::future::Future>(
        &self,
        id: &str,
        f: F,
    ) -> std::result::Result<F::Output, String> {
        let p = self.cfg.provider.clone();
        self.block_on(watch::watched(p.as_ref(), id, f))
    }

    /// Block the script thread on a provider's `exec`: polled on the
    /// thread's own loop when the provider's exec is self-contained (see
    /// [`exec_loop`]), on the run's runtime otherwise.
    pub(crate) fn block_on_exec<F: std::future::Future>(&self, f: F) -> F::Output {
        if self.cfg.provider.profile().exec_is_self_contained {
            self.exec_loop.block_on(&self.rt, f)
        } else {
            self.rt.block_on(f)
        }
    }

    /// The current interrupt token (provider calls watch it).
    pub(crate) fn cancel_token(&self) -> CancellationToken {
        self.cancel
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Interrupt: running commands are killed, the script stops.
    pub(crate) fn interrupt(&self) {
        self.interrupted
            .store(true, std::sync::atomic::Ordering::SeqCst);
        self.cancel_token().cancel();
    }

    pub(crate) fn is_cancelled(&self) -> bool {
        self.interrupted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Start over after an interrupt (REPL only).
    pub(crate) fn renew_cancel(&self) {
        *self.cancel.lock().unwrap_or_else(|p| p.into_inner()) = CancellationToken::new();
        self.interrupted
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// Fail fast when the run was interrupted.
    pub(crate) fn check_cancelled(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Interrupted)
        } else {
            Ok(())
        }
    }

    /// End the run: tear down (unless kept), journal the end with why the
    /// run ended that way (`reason`, redacted) in `run.end`, rewrite the
    /// evidence, flush. Never fails the run for a teardown problem; returns
    /// a warning text instead. Only [`crate::lifecycle::end_run`] calls it,
    /// which then seals the bundle: every entry point ends a run there.
    /// A secret the run learnt may be written in the script itself: the
    /// bundled copy is redacted like everything else in the output
    /// directory, and its new digest journaled (`bundle.redacted`).
    /// A module file loaded while the script runs: unless the bundle
    /// already holds it, copy the exact text that runs into `bundle/` and
    /// journal it (`bundle.module`). A run without a bundle (the REPL)
    /// keeps nothing. An error refuses the import.
    pub(crate) fn bundle_module(
        &self,
        import: &str,
        real: &std::path::Path,
        script_dir: &std::path::Path,
        text: &str,
    ) -> std::result::Result<(), String> {
        let Some(b) = &self.cfg.bundle else {
            return Ok(());
        };
        let rel = real
            .strip_prefix(script_dir)
            .map_err(|_| "it resolves outside the script's directory".to_owned())?;
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let path = format!("{}/{}", rfs_evidence::bundle::DIR, parts.join("/"));
        let bundled = std::iter::once(&b.script)
            .chain(&b.modules)
            .any(|f| f.out_path() == path);
        if bundled {
            return Ok(());
        }
        self.bundle_text_at(path, import, text)
    }

    /// Copy `text` into the bundle at `bundle/<rel>` (once) and journal
    /// its digest, naming it `import` (`rfs run --watch`: a pass's edited
    /// proof).
    pub(crate) fn bundle_text(
        &self,
        rel: &str,
        import: &str,
        text: &str,
    ) -> std::result::Result<(), String> {
        if self.cfg.bundle.is_none() {
            return Ok(());
        }
        self.bundle_text_at(format!("{}/{rel}", rfs_evidence::bundle::DIR), import, text)
    }

    fn bundle_text_at(
        &self,
        path: String,
        import: &str,
        text: &str,
    ) -> std::result::Result<(), String> {
        if !self.state().runtime_modules.insert(path.clone()) {
            return Ok(());
        }
        let mut dir = self.cfg.out_dir.clone();
        let mut write = || -> std::io::Result<()> {
            for c in std::path::Path::new(&path)
                .parent()
                .into_iter()
                .flat_map(|p| p.components())
            {
                dir.push(c);
                rfs_evidence::out_dir::ensure_dir(&dir)?;
            }
            rfs_evidence::out_dir::write_new(&self.cfg.out_dir.join(&path), text.as_bytes())
        };
        write().map_err(|e| format!("cannot bundle it: {e}"))?;
        use sha2::Digest as _;
        self.record(Event::BundleModule {
            path,
            sha256: hex::encode(sha2::Sha256::digest(text.as_bytes())),
            import: import.to_owned(),
        })
        .map_err(|e| e.to_string())
    }

    fn redact_bundle(&self) {
        let Some(b) = &self.cfg.bundle else { return };
        let redactor = self.state().redactor.clone();
        for f in std::iter::once(&b.script).chain(&b.modules) {
            let red = redactor.redact(&f.bytes);
            if red == f.bytes {
                continue;
            }
            let path = self.cfg.out_dir.join(f.out_path());
            let tmp = path.with_extension("redacted.tmp");
            if rfs_evidence::out_dir::replace(&path, &tmp, &red).is_ok() {
                use sha2::Digest as _;
                let _ = self.record(Event::BundleRedacted {
                    path: f.out_path(),
                    sha256: hex::encode(sha2::Sha256::digest(&red)),
                });
            }
        }
    }

    /// End the run: stop what it started, tear its sandbox down, journal
    /// `run.end`. Returns the teardown's warning and whether an interrupt
    /// came while it ended (a completed run is then interrupted).
    pub(crate) fn finish_with(
        &self,
        outcome: RunOutcome,
        reason: Option<&str>,
    ) -> (Option<String>, bool) {
        let reason = reason.map(|r| self.state().redactor.redact_str(r));
        self.close_sessions();
        let stopped = self.stop_all_spawned();
        let stopped = match (stopped, self.stop_all_services()) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        // Checkpoints first: a Daytona fork's parent (the run's sandbox)
        // cannot be deleted before it.
        self.remove_own_checkpoints();
        let warning = self.block_on(teardown::finish(self));
        self.close_caches();
        let warning = match (stopped, warning) {
            (Some(a), Some(b)) => Some(format!("{a}; {b}")),
            (a, b) => a.or(b),
        };
        // Ctrl-C while the run was ending: the teardown went on (the
        // sandbox is destroyed and verified all the same), but the run
        // did not complete as the person let it.
        let interrupted_at_end = outcome == RunOutcome::Completed && self.is_cancelled();
        let (outcome, reason) = if interrupted_at_end {
            (
                RunOutcome::Interrupted,
                Some("interrupted while the run was ending (its sandbox was still destroyed and verified gone)".to_owned()),
            )
        } else {
            (outcome, reason)
        };
        self.redact_bundle();
        let _ = self.record(Event::RunEnd {
            outcome: outcome.as_str().to_owned(),
            reason,
            teardown_warning: warning.clone(),
        });
        if let Ok(r) = self.record.lock() {
            let _ = r.journal.sync();
        }
        (warning, interrupted_at_end)
    }
}

/// Milliseconds for the journal.
pub(crate) fn ms(ms: u128) -> u64 {
    u64::try_from(ms).unwrap_or(u64::MAX)
}
