//! A suite's setup (#36): `rfs test --setup FILE` or `rfs.toml`'s
//! `setup`, run once before the proofs as a run of its own (its bundle
//! is the suite folder's `_setup/`), ending with an implicit checkpoint
//! named `setup` when the script made none. Every proof then starts from
//! a fork of its last checkpoint; when the setup does not pass, no proof
//! runs and each says why. The suite removes the setup's checkpoints at
//! its end and verifies them gone.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::runtime::checkpoint::{CheckpointSink, MadeCheckpoint, StartFrom};
use crate::settings::{RunArgs, RunSettings};
use rfs_evidence::events::checkpoint_facts::CheckpointRemoved;

/// The setup run's folder in the suite's.
pub(crate) const FOLDER: &str = "_setup";

/// How the setup went (in the suite's events and index).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SetupResult {
    pub(crate) script: String,
    /// Its bundle (empty when it was refused before a run began).
    pub(crate) out_dir: String,
    pub(crate) run_id: String,
    pub(crate) exit_code: i32,
    pub(crate) duration_ms: u64,
    /// The checkpoint the proofs start from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) checkpoint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// Each checkpoint's removal at the suite's end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) removed: Vec<CheckpointRemoved>,
    /// Its last lines of output, when it did not pass (#46: a failed
    /// setup said only its exit code).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) output_tail: Vec<String>,
}

impl SetupResult {
    pub(crate) fn passed(&self) -> bool {
        self.exit_code == rfs_evidence::exit_code::SUCCESS && self.checkpoint.is_some()
    }

    /// Why no proof ran, when the setup did not pass.
    pub(crate) fn not_run_reason(&self) -> String {
        format!(
            "not run: the suite's setup {} did not pass (exit {}){}",
            self.script,
            self.exit_code,
            self.error
                .as_deref()
                .map(|e| format!(": {}", first_line(e)))
                .unwrap_or_default()
        )
    }
}

/// The first line of an error as rfs printed it, without its marks.
fn first_line(e: &str) -> String {
    let plain = rfs_evidence::journal::inert_markdown::strip_ansi(e);
    let line = plain.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    line.trim().trim_start_matches('×').trim().to_owned()
}

/// What the setup left: its result, what proofs start from, and the
/// checkpoints to remove at the end (with the settings that reach them).
pub(crate) struct SetupRun {
    pub(crate) result: SetupResult,
    pub(crate) start_from: Option<Arc<StartFrom>>,
    made: Vec<MadeCheckpoint>,
    /// Sandboxes the checkpoints hold (destroyed right after them).
    held: Vec<String>,
    settings: Option<RunSettings>,
}

/// Run the setup `script` into `out_dir/_setup`.
pub(crate) fn run(
    script: &Path,
    out_dir: &Path,
    template: &RunArgs,
    signing_key: Option<Arc<rfs_evidence::signing::SigningKey>>,
    interrupt: &CancellationToken,
) -> SetupRun {
    let started = Instant::now();
    // Named as the proofs are: relative to where rfs was started.
    let shown = std::env::current_dir()
        .ok()
        .and_then(|here| script.strip_prefix(here).ok().map(Path::to_path_buf))
        .unwrap_or_else(|| script.to_path_buf());
    let mut result = SetupResult {
        script: shown.display().to_string(),
        out_dir: String::new(),
        run_id: String::new(),
        exit_code: rfs_evidence::exit_code::SUCCESS,
        duration_ms: 0,
        checkpoint: None,
        error: None,
        removed: vec![],
        output_tail: vec![],
    };
    let args = RunArgs {
        script: script.to_path_buf(),
        out: Some(out_dir.join(FOLDER)),
        ..template.clone()
    };
    let settings = match RunSettings::from_args(args) {
        Ok(s) => s,
        Err(e) => {
            result.exit_code = e.exit_code();
            result.error = Some(format!("{:?}", miette::Report::new(e)));
            return SetupRun {
                result,
                start_from: None,
                made: vec![],
                held: vec![],
                settings: None,
            };
        }
    };
    let sink = Arc::new(CheckpointSink::default());
    let tail = Arc::new(super::tail::Tail::default());
    let hooks = crate::runner::Hooks {
        reporter: tail.clone(),
        interrupt: interrupt.child_token(),
        signing_key,
        ..Default::default()
    };
    let link = crate::lifecycle::SetupLink {
        checkpoint_sink: Some(sink.clone()),
        ..Default::default()
    };
    let report = crate::runner::run_linked(
        settings.clone(),
        hooks,
        Box::new(|run, s, engine, ast| {
            crate::script::execute(run, s, engine, ast)?;
            run.implicit_checkpoint()
        }),
        link,
    );
    let made = sink.all();
    let held = sink.held();
    result.run_id = report.run_id.clone();
    result.exit_code = report.exit_code;
    if report.exit_code != rfs_evidence::exit_code::SUCCESS {
        result.output_tail = tail.lines();
    }
    result.duration_ms = started.elapsed().as_millis().try_into().unwrap_or(u64::MAX);
    result.error = report
        .error
        .map(|e| format!("{:?}", miette::Report::new(e)));
    if report.out_dir.join("journal.jsonl").exists() {
        result.out_dir = report.out_dir.display().to_string();
    }
    let start_from = match made.last() {
        Some(last) if report.exit_code == rfs_evidence::exit_code::SUCCESS => {
            result.checkpoint = Some(last.checkpoint.id.clone());
            Some(crate::runtime::checkpoint::start_from(
                last.clone(),
                &report.run_id,
                &report.out_dir,
            ))
        }
        _ => None,
    };
    SetupRun {
        result,
        start_from,
        made,
        held,
        settings: Some(settings),
    }
}

impl SetupRun {
    /// Remove every checkpoint the setup made, each verified gone.
    pub(crate) fn remove_checkpoints(&mut self) -> Vec<CheckpointRemoved> {
        let Some(settings) = &self.settings else {
            return vec![];
        };
        let made = std::mem::take(&mut self.made);
        let held = std::mem::take(&mut self.held);
        if made.is_empty() && held.is_empty() {
            return vec![];
        }
        let provider = rfs_sandbox::provider::select::build_with_snapshot(
            &settings.provider,
            &settings.state_dir,
            settings.image.clone(),
            settings.snapshot.clone(),
        )
        .map_err(|e| format!("cannot reach its provider to remove it: {e}"));
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start a runtime to remove it: {e}"));
        let deadline = settings.cleanup_deadline;
        let mut removed: Vec<_> = made
            .iter()
            .map(|m| match (&provider, &rt) {
                (Ok(p), Ok(rt)) => rt.block_on(crate::runtime::checkpoint::remove_verified(
                    p.as_ref(),
                    &m.checkpoint.id,
                    deadline,
                )),
                (Err(why), _) | (_, Err(why)) => CheckpointRemoved {
                    checkpoint_id: m.checkpoint.id.clone(),
                    verified: false,
                    detail: why.clone(),
                },
            })
            .collect();
        // Then the sandboxes they held (their Daytona fork parents).
        removed.extend(held.iter().map(|id| match (&provider, &rt) {
            (Ok(p), Ok(rt)) => held_removed(
                id,
                rt.block_on(crate::runtime::teardown::destroy_verified(
                    p.as_ref(),
                    id,
                    deadline,
                )),
            ),
            (Err(why), _) | (_, Err(why)) => CheckpointRemoved {
                checkpoint_id: id.clone(),
                verified: false,
                detail: why.clone(),
            },
        }));
        self.result.removed.clone_from(&removed);
        removed
    }
}

/// How the destroy of sandbox `id`, held by a checkpoint, went.
fn held_removed(
    id: &str,
    r: Result<crate::runtime::teardown::GoneProof, crate::runtime::teardown::NotGone>,
) -> CheckpointRemoved {
    let what = "the setup's sandbox the checkpoint was forked from, destroyed after it";
    match r {
        Ok(proof) => CheckpointRemoved {
            checkpoint_id: id.to_owned(),
            verified: true,
            detail: format!(
                "{what}: verified gone ({} poll(s), {} ms)",
                proof.polls, proof.elapsed_ms
            ),
        },
        Err(e) => CheckpointRemoved {
            checkpoint_id: id.to_owned(),
            verified: false,
            detail: format!("{what}: {e}"),
        },
    }
}

/// The setup file `rfs.toml` names (`setup`), under `dir` (the file's
/// folder): a plain relative path to a regular file inside the
/// repository, reached without a symlink — a committed file may name the
/// setup, never point rfs at a host file.
pub(crate) fn configured_file(dir: &Path, setup: &str) -> Result<PathBuf, String> {
    use std::path::Component;
    let rel = Path::new(setup);
    if setup.trim().is_empty() {
        return Err("`setup` is empty".into());
    }
    if rel.is_absolute()
        || rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "`setup = {setup:?}` is not a plain relative path: it must be a file inside the repository"
        ));
    }
    let mut at = dir.to_path_buf();
    for c in rel.components() {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "`setup = {setup:?}`: {} is a symlink; the setup is read only inside the repository, never through a link",
                at.display()
            ));
        }
    }
    match std::fs::symlink_metadata(&at) {
        Ok(m) if m.is_file() => Ok(at),
        Ok(_) => Err(format!("`setup = {setup:?}` is not a regular file")),
        Err(e) => Err(format!("`setup = {setup:?}`: {}: {e}", at.display())),
    }
}

/// A `--setup FILE` the person gave: a regular file, never a link.
pub(crate) fn given_file(path: &Path) -> Result<PathBuf, String> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => Err(format!(
            "--setup {}: a symlink; the setup is a regular file, never run through a link",
            path.display()
        )),
        Ok(m) if m.is_file() => Ok(path.to_path_buf()),
        Ok(_) => Err(format!("--setup {}: not a regular file", path.display())),
        Err(e) => Err(format!("--setup {}: {e}", path.display())),
    }
}
