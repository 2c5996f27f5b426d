//! Running a script end to end: the embedding entry point.
//!
//! ```no_run
//! use std::sync::Arc;
//! let settings = rfs::settings::RunSettings::from_args(rfs::settings::RunArgs {
//!     script: "proof.rhai".into(),
//!     ..Default::default()
//! }).unwrap();
//! let report = rfs::runner::run(settings, rfs::runner::Hooks::default());
//! std::process::exit(report.exit_code);
//! ```

use crate::outcome::RunOutcome;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::error::Error;
use crate::events::{Reporter, Silent};
use crate::exit_code;
use crate::provider::{select, Provider};
use crate::runtime::{Run, RunConfig};
use crate::script::{self, Script};
use crate::settings::RunSettings;
use rhai::Engine;

/// Stack of the script thread (Rhai recursion is bounded by the engine's
/// call-level and expression-depth limits).
const SCRIPT_STACK: usize = 16 * 1024 * 1024;

/// What an embedder can plug in.
pub struct Hooks {
    /// Use this provider instead of building the chosen one (tests inject
    /// wrappers here).
    pub provider: Option<Arc<dyn Provider>>,
    pub reporter: Arc<dyn Reporter>,
    /// Cancel to interrupt the run (the CLI wires Ctrl-C/SIGTERM to it).
    pub interrupt: CancellationToken,
    /// Listen for SIGINT, SIGTERM, SIGHUP and SIGQUIT and interrupt the run
    /// on them.
    pub handle_signals: bool,
    /// Sign the journal (`journal.sig`) and the attestation with this key.
    pub signing_key: Option<Arc<crate::signing::SigningKey>>,
    /// Set by `rfs replay`: the run replayed (its commit is bound whatever
    /// the script asks; the first journal fact names it).
    pub replay_of: Option<crate::events::ReplayOf>,
}

/// How a run is tied to a suite's setup (#36).
#[derive(Default)]
pub(crate) struct SetupLink {
    /// A suite's setup run: its checkpoints go here (the suite removes
    /// them).
    pub(crate) checkpoint_sink: Option<Arc<crate::runtime::checkpoint::CheckpointSink>>,
    /// A suite's proof: its sandbox starts from this checkpoint.
    pub(crate) start_from: Option<Arc<crate::runtime::checkpoint::StartFrom>>,
}

impl Default for Hooks {
    fn default() -> Self {
        Hooks {
            provider: None,
            reporter: Arc::new(Silent),
            interrupt: CancellationToken::new(),
            handle_signals: false,
            signing_key: None,
            replay_of: None,
        }
    }
}

/// How a run ended.
#[derive(Debug)]
pub struct RunReport {
    pub run_id: String,
    pub out_dir: std::path::PathBuf,
    pub exit_code: i32,
    /// The fatal error, if any (render it with miette).
    pub error: Option<Error>,
    /// Teardown could not be verified (reported, does not fail the run).
    pub teardown_warning: Option<String>,
}

/// What a run does once its sandbox can be used: by default, run the
/// script once (`rfs bisect` runs it once per commit).
pub(crate) type Body =
    Box<dyn FnOnce(&Arc<Run>, &Script, Engine, &rhai::AST) -> Result<(), Error> + Send>;

/// Run a script with validated settings.
pub fn run(settings: RunSettings, hooks: Hooks) -> RunReport {
    run_with_body(settings, hooks, Box::new(script::execute))
}

/// [`run`] with `body` in place of running the script once.
pub(crate) fn run_with_body(settings: RunSettings, hooks: Hooks, body: Body) -> RunReport {
    run_journaled(&settings, hooks, body, SetupLink::default())
}

/// [`run_with_body`] for a suite's setup or proof, tied to the setup by
/// `link`.
pub(crate) fn run_linked(
    settings: RunSettings,
    hooks: Hooks,
    body: Body,
    link: SetupLink,
) -> RunReport {
    run_journaled(&settings, hooks, body, link)
}

/// How a run's end went, beyond its outcome.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ended {
    /// The sandbox's removal could not be verified.
    pub(crate) teardown_warning: Option<String>,
    /// Sealing the bundle or drawing its report failed: the evidence is
    /// incomplete.
    pub(crate) seal_error: Option<(&'static str, String)>,
}

/// The one end of every run, whatever started it (`rfs run`, a suite's
/// proof, a bisect lane, `--watch`, a replay, the REPL, an MCP session):
/// open terminals closed, the sandbox torn down and verified gone,
/// `run.end` journaled, then the bundle sealed (attestation, signature)
/// and its report drawn. An entry point that ends a run any other way
/// leaves a bundle `rfs verify` rejects.
pub(crate) fn end_run(
    run: &Run,
    outcome: RunOutcome,
    reason: Option<&str>,
    key: Option<&crate::signing::SigningKey>,
) -> Ended {
    let teardown_warning = run.finish_with(outcome, reason);
    let seal_error = seal_bundle(&run.cfg.out_dir, key).err();
    Ended {
        teardown_warning,
        seal_error,
    }
}

/// [`end_run`] for `rfs run`'s report: a sealing failure fails the run.
fn end_into(
    report: &mut RunReport,
    run: &Run,
    outcome: RunOutcome,
    reason: Option<&str>,
    key: Option<&crate::signing::SigningKey>,
) {
    let ended = end_run(run, outcome, reason, key);
    report.teardown_warning = ended.teardown_warning;
    if let Some((what, e)) = ended.seal_error {
        failed_after(report, what, &e);
    }
}

/// After the journal is closed: the attestation (signed when there is a
/// key) and `journal.sig`, then `report.html`, the bundle's view for
/// people, made from the sealed bundle. Either failing fails the run (the
/// evidence would be incomplete): the error says which.
pub(crate) fn seal_bundle(
    out_dir: &std::path::Path,
    key: Option<&crate::signing::SigningKey>,
) -> Result<(), (&'static str, String)> {
    crate::seal::seal(out_dir, key).map_err(|e| ("sealing its evidence", e.to_string()))?;
    crate::report::write_html(out_dir).map_err(|e| ("writing report.html", e.to_string()))
}

/// The run ended, then `what` failed: an internal error (after the run's
/// own error, if it had one).
fn failed_after(report: &mut RunReport, what: &str, e: &dyn std::fmt::Display) {
    let msg = match report.error.take() {
        Some(prev) => format!("{prev}; then {what} failed: {e}"),
        None => format!("the run ended but {what} failed: {e}"),
    };
    report.exit_code = exit_code::INTERNAL;
    report.error = Some(Error::Internal(msg));
}

fn run_journaled(settings: &RunSettings, hooks: Hooks, body: Body, link: SetupLink) -> RunReport {
    let key = hooks.signing_key.clone();
    let key = key.as_deref();
    let report = RunReport {
        run_id: settings.run_id.clone(),
        out_dir: settings.out_dir.clone(),
        exit_code: exit_code::SUCCESS,
        error: None,
        teardown_warning: None,
    };
    let fail = |mut r: RunReport, e: Error| {
        r.exit_code = e.exit_code();
        r.error = Some(e);
        r
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(report, Error::internal(e)),
    };
    let mut signals = if hooks.handle_signals {
        Signals::install(&rt)
    } else {
        None
    };
    let script = match Script::load(&settings.script) {
        Ok(s) => s,
        Err(e) => return fail(report, e),
    };
    // Compile before anything else: a broken script provisions nothing.
    let ast = match script::base_engine(&script.dir).and_then(|e| script::compile(&e, &script)) {
        Ok(ast) => ast,
        Err(e) => return fail(report, e),
    };
    let bundle = match script::collect::bundle(&script) {
        Ok(b) => b,
        Err(e) => return fail(report, e),
    };
    let mut cfg = config(settings, hooks.provider, script.path.clone());
    cfg.bundle = Some(Arc::new(bundle));
    cfg.signer = hooks.signing_key.as_ref().map(|k| k.signer());
    cfg.replay_of = hooks.replay_of.clone();
    cfg.checkpoint_sink = link.checkpoint_sink;
    cfg.start_from = link.start_from;
    let run = match Run::start(cfg, rt.handle().clone(), hooks.reporter, &settings.vars) {
        Ok(r) => r,
        Err(e) => return fail(report, e),
    };
    // A provider that cannot work at all (daemon down) refuses before
    // anything else happens.
    if let Err(e) = run.preflight() {
        let reason = e.to_string();
        let mut report = fail(report, e);
        end_into(&mut report, &run, RunOutcome::Refused, Some(&reason), key);
        return report;
    }
    let engine = match script::run_engine(&run, &script, settings.vars.clone()) {
        Ok(e) => e,
        Err(e) => {
            let mut report = fail(report, e);
            end_into(&mut report, &run, RunOutcome::Error, None, key);
            return report;
        }
    };

    // The script runs on its own thread; this thread waits for it or for
    // an interrupt, which cancels the run (steps are killed, the script is
    // terminated at its next operation) and then waits for it to stop.
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (r2, s2) = (run.clone(), script.clone());
    let spawned = std::thread::Builder::new()
        .name("rfs-script".into())
        .stack_size(SCRIPT_STACK)
        .spawn(move || {
            let _ = tx.send(body(&r2, &s2, engine, &ast));
        });
    if let Err(e) = spawned {
        let mut report = fail(report, Error::internal(e));
        end_into(&mut report, &run, RunOutcome::Error, None, key);
        return report;
    }
    let interrupt = hooks.interrupt.clone();
    let r3 = run.clone();
    let result = rt.block_on(async move {
        let mut rx = rx;
        tokio::select! {
            r = &mut rx => return r,
            _ = interrupt.cancelled() => {}
            _ = wait_signal(signals.as_mut()) => {}
        }
        r3.interrupt();
        rx.await
    });
    let result =
        result.unwrap_or_else(|_| Err(Error::Internal("the script thread vanished".into())));
    let outcome = match &result {
        Ok(()) => RunOutcome::Completed,
        Err(e) => e.outcome(),
    };
    let reason = result.as_ref().err().map(|e| e.to_string());
    let mut report = match result {
        Ok(()) => report,
        Err(e) => fail(report, e),
    };
    end_into(&mut report, &run, outcome, reason.as_deref(), key);
    drop(run);
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    report
}

/// The run configuration for validated settings: the injected provider or
/// the chosen one.
pub(crate) fn config(
    settings: &RunSettings,
    provider: Option<Arc<dyn Provider>>,
    script_path: std::path::PathBuf,
) -> RunConfig {
    // A provider that cannot even be constructed still gets a run (output
    // dir, journal); it refuses at preflight with the reason.
    let provider = provider.unwrap_or_else(|| {
        select::build_with_snapshot(
            &settings.provider,
            &settings.state_dir,
            settings.image.clone(),
            settings.snapshot.clone(),
        )
        .unwrap_or_else(|e| {
            Arc::new(crate::provider::unavailable::Unavailable {
                name: settings.provider.name.clone(),
                message: e.to_string(),
            })
        })
    });
    RunConfig {
        run_id: settings.run_id.clone(),
        provider,
        choice: settings.provider.clone(),
        invocation_dir: settings.invocation_dir.clone(),
        script_path,
        out_dir: settings.out_dir.clone(),
        scratch_dir: settings.state_dir.join("tmp"),
        state_dir: settings.state_dir.clone(),
        keep: settings.keep,
        image: settings.image.clone(),
        max_lifetime: settings.max_lifetime,
        cleanup_deadline: settings.cleanup_deadline,
        bundle: None,
        signer: None,
        replay_of: None,
        isolation: settings.isolation.clone(),
        secret_names: settings.secret_names.clone(),
        allow_dirty: settings.allow_dirty,
        allowed_repos: settings.allowed_repos.clone(),
        checkpoint_sink: None,
        start_from: None,
    }
}

/// Listeners for every terminating signal a terminal or a supervisor
/// sends: SIGINT (Ctrl-C), SIGTERM (kill, systemd, docker stop), SIGHUP
/// (terminal closed, SSH session lost) and SIGQUIT (Ctrl-\\). Installed
/// before the run starts so that any of them, at any moment after the
/// journal exists, is an orderly interrupt with verified cleanup.
pub(crate) struct Signals {
    listeners: Vec<tokio::signal::unix::Signal>,
}

/// The signals [`Signals`] turns into an interrupt.
pub const INTERRUPT_SIGNALS: [&str; 4] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];

impl Signals {
    /// Install the listeners (must be called within the runtime).
    pub(crate) fn install(rt: &tokio::runtime::Runtime) -> Option<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let _guard = rt.enter();
        let kinds = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::quit(),
        ];
        let listeners = kinds
            .into_iter()
            .map(signal)
            .collect::<std::io::Result<Vec<_>>>()
            .ok()?;
        Some(Signals { listeners })
    }

    /// Wait for one of [`INTERRUPT_SIGNALS`]; returns its name.
    pub(crate) async fn recv(&mut self) -> &'static str {
        let waits = self.listeners.iter_mut().map(|s| Box::pin(s.recv()));
        let (_, index, _) = futures_util::future::select_all(waits).await;
        INTERRUPT_SIGNALS[index]
    }
}

/// Cancel `interrupt` on any of [`INTERRUPT_SIGNALS`], saying `what`
/// happens then; the listeners live as long as the returned runtime (for
/// commands that drive several runs, each with `handle_signals` off).
pub(crate) fn cancel_on_signals(
    interrupt: &CancellationToken,
    what: &'static str,
) -> Result<tokio::runtime::Runtime, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    if let Some(mut signals) = Signals::install(&rt) {
        let token = interrupt.clone();
        rt.spawn(async move {
            let name = signals.recv().await;
            errln!("{name}: {what}");
            token.cancel();
        });
    }
    Ok(rt)
}

async fn wait_signal(signals: Option<&mut Signals>) {
    match signals {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}
