//! The start of every run: [`start`].

use std::path::PathBuf;
use std::sync::Arc;

use super::end::{end_run, Ended};
use crate::runtime::{Run, RunConfig};
use crate::settings::RunSettings;
use rfs_evidence::error::Error;
use rfs_evidence::events::Reporter;
use rfs_evidence::outcome::RunOutcome;
use rfs_sandbox::provider::{select, Provider};

/// What a run's start needs besides its settings.
pub(crate) struct Start {
    /// Use this provider instead of building the chosen one.
    pub(crate) provider: Option<Arc<dyn Provider>>,
    /// The script (or `<repl>`, `<mcp>`) the run is of.
    pub(crate) script_path: PathBuf,
    pub(crate) reporter: Arc<dyn Reporter>,
    /// The script and its modules, copied into the bundle.
    pub(crate) bundle: Option<Arc<rfs_evidence::bundle::ScriptBundle>>,
    /// The key the journal and the attestation are signed with.
    pub(crate) key: Option<Arc<rfs_evidence::signing::SigningKey>>,
    /// Set by `rfs replay`: the run replayed.
    pub(crate) replay_of: Option<rfs_evidence::events::ReplayOf>,
    /// A suite's setup or proof: how the run is tied to the setup (#36).
    pub(crate) link: SetupLink,
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

/// A run that did not start: why, and — once its journal existed — how
/// its end went (it was ended and sealed as refused).
pub(crate) struct NotStarted {
    pub(crate) error: Error,
    pub(crate) ended: Option<Ended>,
}

impl NotStarted {
    /// The error an entry point without a report of its own (the REPL,
    /// an MCP session) ends with: a seal that failed after the refusal is
    /// said with it, a teardown that could not be verified is warned of.
    pub(crate) fn into_error(self) -> Error {
        let Some(ended) = self.ended else {
            return self.error;
        };
        if let Some(w) = &ended.teardown_warning {
            errln!("rfs: warning: {w}");
        }
        match ended.seal_error {
            Some((what, e)) => Error::Internal(format!("{}; then {what} failed: {e}", self.error)),
            None => self.error,
        }
    }
}

/// Start a run: the secrets of rfs's own environment (secret-named
/// variables, `--var`s) learned so that nothing shows them, the output
/// directory and journal opened, then the provider's preflight. A
/// provider that cannot work at all (daemon down, isolation or limits it
/// cannot give) refuses here, before anything is provisioned; that run is
/// ended and sealed, so its bundle verifies too.
pub(crate) fn start(
    settings: &RunSettings,
    rt: tokio::runtime::Handle,
    s: Start,
) -> Result<Arc<Run>, Box<NotStarted>> {
    // The secret-named `--var`s are learned by the run's own redactor
    // (`Run::start`, which teaches the process too).
    rfs_evidence::secrets::learn_from_env(std::iter::empty());
    let mut cfg = config(settings, s.provider, s.script_path);
    cfg.bundle = s.bundle;
    cfg.signer = s.key.as_ref().map(|k| k.signer());
    cfg.replay_of = s.replay_of;
    cfg.checkpoint_sink = s.link.checkpoint_sink;
    cfg.start_from = s.link.start_from;
    let run = Run::start(cfg, rt, s.reporter, &settings.vars)
        .map_err(|error| Box::new(NotStarted { error, ended: None }))?;
    if let Err(error) = run.preflight() {
        let reason = error.to_string();
        let ended = end_run(&run, RunOutcome::Refused, Some(&reason), s.key.as_deref());
        return Err(Box::new(NotStarted {
            error,
            ended: Some(ended),
        }));
    }
    Ok(run)
}

/// The run configuration for validated settings: the injected provider or
/// the chosen one.
pub(crate) fn config(
    settings: &RunSettings,
    provider: Option<Arc<dyn Provider>>,
    script_path: std::path::PathBuf,
) -> RunConfig {
    let provider = provider.unwrap_or_else(|| provider_of(settings));
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
        image_by_repository: settings.image_by_repository,
        max_lifetime: settings.max_lifetime,
        cleanup_deadline: settings.cleanup_deadline,
        bundle: None,
        signer: None,
        replay_of: None,
        isolation: settings.isolation.clone(),
        secret_names: settings.secret_names.clone(),
        allow_dirty: settings.allow_dirty,
        allowed_repos: settings.allowed_repos.clone(),
        max_log: settings.max_log.clone(),
        checkpoint_sink: None,
        start_from: None,
    }
}

/// The provider `settings` chose. One that cannot even be constructed
/// still gets a run (output dir, journal): it refuses at preflight with
/// the reason.
fn provider_of(settings: &RunSettings) -> Arc<dyn Provider> {
    select::build_with_snapshot(
        &settings.provider,
        &settings.state_dir,
        settings.image.clone(),
        settings.snapshot.clone(),
    )
    .unwrap_or_else(|e| {
        Arc::new(rfs_sandbox::provider::unavailable::Unavailable {
            name: settings.provider.name.clone(),
            // Its refusal says "provider X is unavailable: …" once.
            message: match e {
                rfs_sandbox::provider::ProviderError::Unavailable { message, .. } => message,
                other => other.to_string(),
            },
        })
    })
}
