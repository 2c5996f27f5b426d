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

use rfs_evidence::outcome::RunOutcome;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::runtime::Run;
use crate::script::{self, Script};
use crate::settings::RunSettings;
use rfs_evidence::error::Error;
use rfs_evidence::events::{Reporter, Silent};
use rfs_evidence::exit_code;
use rfs_sandbox::provider::Provider;
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
    pub signing_key: Option<Arc<rfs_evidence::signing::SigningKey>>,
    /// Set by `rfs replay`: the run replayed (its commit is bound whatever
    /// the script asks; the first journal fact names it).
    pub replay_of: Option<rfs_evidence::events::ReplayOf>,
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
    run_journaled(
        &settings,
        hooks,
        body,
        crate::lifecycle::SetupLink::default(),
    )
}

/// [`run_with_body`] for a suite's setup or proof, tied to the setup by
/// `link`.
pub(crate) fn run_linked(
    settings: RunSettings,
    hooks: Hooks,
    body: Body,
    link: crate::lifecycle::SetupLink,
) -> RunReport {
    run_journaled(&settings, hooks, body, link)
}

/// [`crate::lifecycle::end_run`] for `rfs run`'s report: a sealing
/// failure fails the run.
fn end_into(
    report: &mut RunReport,
    run: &Run,
    outcome: RunOutcome,
    reason: Option<&str>,
    key: Option<&rfs_evidence::signing::SigningKey>,
) {
    into_report(report, crate::lifecycle::end_run(run, outcome, reason, key));
}

fn into_report(report: &mut RunReport, ended: crate::lifecycle::Ended) {
    report.teardown_warning = ended.teardown_warning;
    if ended.interrupted_at_end && report.error.is_none() {
        report.exit_code = Error::Interrupted.exit_code();
        report.error = Some(Error::Interrupted);
    }
    if let Some((what, e)) = ended.seal_error {
        failed_after(report, what, &e);
    }
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

/// A script, compiled and collected before anything else: a broken
/// script provisions nothing.
fn load(
    settings: &RunSettings,
) -> Result<(Script, rhai::AST, rfs_evidence::bundle::ScriptBundle), Error> {
    let script = Script::load(&settings.script)?;
    let ast = script::base_engine(&script.dir).and_then(|e| script::compile(&e, &script))?;
    let bundle = script::collect::bundle(&script)?;
    Ok((script, ast, bundle))
}

/// `report` failed with `e`.
fn fail(mut r: RunReport, e: Error) -> RunReport {
    r.exit_code = e.exit_code();
    r.error = Some(e);
    r
}

fn run_journaled(
    settings: &RunSettings,
    hooks: Hooks,
    body: Body,
    link: crate::lifecycle::SetupLink,
) -> RunReport {
    let key = hooks.signing_key.clone();
    let key = key.as_deref();
    let report = RunReport {
        run_id: settings.run_id.clone(),
        out_dir: settings.out_dir.clone(),
        exit_code: exit_code::SUCCESS,
        error: None,
        teardown_warning: None,
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => return fail(report, Error::internal(e)),
    };
    let signals = if hooks.handle_signals {
        crate::lifecycle::Signals::install(&rt)
    } else {
        None
    };
    let (script, ast, bundle) = match load(settings) {
        Ok(loaded) => loaded,
        Err(e) => return fail(report, e),
    };
    let started = crate::lifecycle::start(
        settings,
        rt.handle().clone(),
        crate::lifecycle::Start {
            provider: hooks.provider,
            script_path: script.path.clone(),
            reporter: hooks.reporter,
            bundle: Some(Arc::new(bundle)),
            key: hooks.signing_key.clone(),
            replay_of: hooks.replay_of.clone(),
            link,
        },
    );
    let run = match started {
        Ok(run) => run,
        Err(not) => {
            let mut report = fail(report, not.error);
            if let Some(ended) = not.ended {
                into_report(&mut report, ended);
            }
            return report;
        }
    };
    // An engine that cannot be built, or a script thread that cannot be
    // started, is rfs's error (no reason of the script's).
    let engine = script::run_engine(&run, &script, settings.vars.clone());
    let mut signals = signals;
    let result = engine.and_then(|engine| {
        let interrupt = hooks.interrupt.clone();
        spawn_body(&run, &script, (engine, ast), body)
            .map(|rx| wait_body(&rt, &run, rx, interrupt, signals.as_mut()))
    });
    // Ctrl-C while the run ends is not swallowed: it interrupts what is
    // left (background processes are killed, not stopped gracefully) and
    // the run says it was interrupted; the teardown still runs to its
    // verified end.
    let at_end = {
        let (r, interrupt) = (run.clone(), hooks.interrupt.clone());
        rt.spawn(async move {
            tokio::select! {
                _ = interrupt.cancelled() => {}
                _ = crate::lifecycle::wait_signal(signals.as_mut()) => {}
            }
            r.interrupt();
        })
    };
    let (outcome, reason) = match &result {
        Ok(Ok(())) => (RunOutcome::Completed, None),
        Ok(Err(e)) => (e.outcome(), Some(e.to_string())),
        Err(_) => (RunOutcome::Error, None),
    };
    let result = result.and_then(|r| r);
    let mut report = match result {
        Ok(()) => report,
        Err(e) => fail(report, e),
    };
    end_into(&mut report, &run, outcome, reason.as_deref(), key);
    at_end.abort();
    drop(run);
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    report
}

/// The body's outcome, from its own thread (the script's).
type BodyResult = tokio::sync::oneshot::Receiver<Result<(), Error>>;

/// Start the body on its own thread, with the script's stack.
fn spawn_body(
    run: &Arc<Run>,
    script: &Script,
    (engine, ast): (Engine, rhai::AST),
    body: Body,
) -> Result<BodyResult, Error> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    let (r2, s2) = (run.clone(), script.clone());
    std::thread::Builder::new()
        .name("rfs-script".into())
        .stack_size(SCRIPT_STACK)
        .spawn(move || {
            let _ = tx.send(body(&r2, &s2, engine, &ast));
        })
        .map_err(Error::internal)?;
    Ok(rx)
}

/// Wait for the body or for an interrupt, which cancels the run (steps
/// are killed, the script is terminated at its next operation), then
/// wait for the body to stop.
fn wait_body(
    rt: &tokio::runtime::Runtime,
    run: &Arc<Run>,
    rx: BodyResult,
    interrupt: CancellationToken,
    signals: Option<&mut crate::lifecycle::Signals>,
) -> Result<(), Error> {
    let mut signals = signals;
    let r3 = run.clone();
    let result = rt.block_on(async move {
        let mut rx = rx;
        tokio::select! {
            r = &mut rx => return r,
            _ = interrupt.cancelled() => {}
            _ = crate::lifecycle::wait_signal(signals.as_deref_mut()) => {}
        }
        r3.interrupt();
        rx.await
    });
    result.unwrap_or_else(|_| Err(Error::Internal("the script thread vanished".into())))
}

/// The signals a run turns into an interrupt.
pub use crate::lifecycle::INTERRUPT_SIGNALS;
