//! `rfs test`: a folder of proofs run as a suite, each proof a whole
//! `rfs run` in its own sandbox with its own bundle, `--jobs` at a time.
//!
//! - [`plan`]: which proofs (paths, `rfs.toml`'s `proofs`, `proofs/`) and
//!   the name filters;
//! - [`pool`]: the workers, retries, fail-fast and the interrupt;
//! - [`events`]: the one typed event stream the pool emits;
//! - [`display`], [`files`] (with [`page`], `index.html`) and `--json` ([`events::JsonLines`]): its
//!   consumers.

pub(crate) mod display;
pub(crate) mod events;
pub(crate) mod files;
mod index;
mod page;
pub(crate) mod plan;
pub(crate) mod pool;
pub(crate) mod setup;
mod setup_view;
mod tail;
mod totals;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::settings::{self, RunArgs, RunSettings};
use rfs_evidence::error::Error;
use rfs_evidence::exit_code;
use rfs_sandbox::provider::registry::ProviderKind;

/// How many proofs run at once on a remote provider when neither
/// `--jobs`, `RFS_JOBS` nor `rfs.toml`'s `jobs` says.
pub(crate) const DEFAULT_REMOTE_JOBS: usize = 8;
/// Env var: how many proofs run at once (after `--jobs`).
pub(crate) const JOBS_ENV: &str = "RFS_JOBS";

/// The raw inputs of `rfs test`.
#[derive(Debug, Default)]
pub(crate) struct SuiteArgs {
    pub(crate) paths: Vec<PathBuf>,
    pub(crate) filters: plan::Filters,
    pub(crate) jobs: Option<usize>,
    pub(crate) retries: u32,
    pub(crate) fail_fast: bool,
    /// The suite's folder (default `$RFS_STATE_DIR/suites/<suite-id>`).
    pub(crate) out: Option<PathBuf>,
    pub(crate) junit: Option<PathBuf>,
    pub(crate) json: bool,
    /// Every proof's run arguments but its script and folder.
    pub(crate) template: RunArgs,
    pub(crate) sign_key: Option<PathBuf>,
    /// `--setup FILE`: run once, every proof forks its checkpoint.
    pub(crate) setup: Option<PathBuf>,
    /// Draw the progress bar and colours (a terminal).
    pub(crate) terminal: bool,
    pub(crate) color: bool,
}

/// Run the suite; the exit code (see [`events::Counts::exit_code`]).
pub(crate) fn run(a: SuiteArgs) -> Result<i32, Error> {
    let here = std::env::current_dir()
        .map_err(|e| Error::Usage(format!("cannot read the current directory: {e}")))?;
    let file =
        crate::repo_config::find(&here).map_err(|e| Error::Usage(format!("refused: {e}")))?;
    let (configured, setup) = configured_proofs_and_setup(&a, &here, file.as_ref())?;
    let file = file.map(|(_, c)| c).unwrap_or_default();
    // Given no path, the suite is the repository's wherever in it rfs
    // starts (as git and cargo find their root): `rfs.toml`'s folder, else
    // `proofs/` at the repository's root, named from that root.
    let root =
        rfs_sandbox::source::allowed_repos::work_tree_of(&here).unwrap_or_else(|| here.clone());
    let (configured, base) = match (a.paths.is_empty(), configured) {
        (true, Some(c)) => (Some(c), root),
        (true, None) => (Some(root.join(plan::DEFAULT_FOLDER)), root),
        (false, c) => (c, here.clone()),
    };
    let mut proofs = plan::plan(&a.paths, configured.as_deref(), &base, &a.filters)
        .map_err(|e| Error::Usage(format!("rfs test: {e}")))?;
    let unused_setups = match &setup {
        Some(_) => vec![],
        None => plan::setup_like(&a.paths, configured.as_deref(), &base),
    };
    say_unused_setups(&unused_setups);
    if let Some(s) = &setup {
        // The setup is not a proof of the suite, wherever it lies.
        let same =
            |p: &std::path::Path| std::fs::canonicalize(p).ok() == std::fs::canonicalize(s).ok();
        proofs.retain(|p| !same(&p.path));
        if proofs.is_empty() {
            return Err(Error::Usage("rfs test: no proofs besides the setup".into()));
        }
    }
    // Every proof's settings are validated before the first one runs (a
    // misspelt provider is one usage error, not forty refusals).
    let first = RunSettings::from_args(RunArgs {
        script: proofs[0].path.clone(),
        out: None,
        ..a.template.clone()
    })?;
    let jobs = jobs(a.jobs, first.provider.kind(), file.jobs)?;
    let suite_id = settings::new_run_id();
    let out_dir = suite_out_dir(&a, &first, &suite_id, &here)?;
    if let Some(j) = &a.junit {
        crate::ci::Views::from_args(Some(j.clone()))?;
    }
    let signing_key = rfs_evidence::signing::key::for_run(a.sign_key.as_deref())?;
    let files = Arc::new(
        files::Files::create(&out_dir, a.junit.clone()).map_err(|e| {
            Error::Usage(format!(
                "cannot start the suite in {} (is it an earlier suite's folder?): {e}",
                out_dir.display()
            ))
        })?,
    );
    let view: Box<dyn events::SuiteReporter> = if a.json {
        Box::new(events::JsonLines)
    } else {
        Box::new(display::Console::new(a.terminal, a.color))
    };
    let fanout = events::Fanout(vec![Box::new(files.clone()), view]);
    let interrupt = CancellationToken::new();
    let _signals = crate::lifecycle::cancel_on_signals(
        &interrupt,
        "rfs test: cancelling every running proof and removing its sandbox",
    )?;
    let pool = pool::Pool {
        suite_id,
        out_dir: out_dir.clone(),
        provider: first.provider.name.clone(),
        proofs,
        jobs,
        retries: a.retries,
        fail_fast: a.fail_fast,
        template: a.template,
        signing_key,
        setup,
    };
    let done = pool.run(&fanout, &interrupt);
    let errors = files
        .errors
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    step_summary(&out_dir);
    if done.exit_code != exit_code::SUCCESS {
        // Said again where a failing suite's reader looks: last.
        say_unused_setups(&unused_setups);
    }
    if !errors.is_empty() {
        for e in &errors {
            errln!("rfs: error: {e}");
        }
        if done.exit_code == exit_code::SUCCESS {
            return Ok(exit_code::INTERNAL);
        }
    }
    Ok(done.exit_code)
}

/// A note for each file that looks like a suite setup but is not used.
fn say_unused_setups(files: &[String]) {
    for f in files {
        errln!(
            "rfs: note: {} looks like a suite setup and was not used (no --setup, and rfs.toml names no `setup`); pass --setup {} to run it once before the proofs, each proof then starting from its checkpoint",
            crate::reporter::text::inline(f),
            crate::reporter::text::inline(f)
        );
    }
}

/// The proofs folder and the setup `rfs.toml` names (each checked to be a
/// plain path inside the repository), the setup `--setup` gives first.
fn configured_proofs_and_setup(
    a: &SuiteArgs,
    here: &std::path::Path,
    file: Option<&(std::path::PathBuf, crate::repo_config::RepoConfig)>,
) -> Result<(Option<std::path::PathBuf>, Option<std::path::PathBuf>), Error> {
    let configured = match file.as_ref() {
        Some((path, c)) => match &c.proofs {
            Some(p) => Some(
                configured_folder(path.parent().unwrap_or(here), p)
                    .map_err(|why| Error::Usage(format!("refused: {}: {why}", path.display())))?,
            ),
            None => None,
        },
        None => None,
    };
    let setup = match (&a.setup, file.as_ref()) {
        (Some(f), _) => {
            Some(setup::given_file(f).map_err(|why| Error::Usage(format!("refused: {why}")))?)
        }
        (None, Some((path, c))) => match &c.setup {
            Some(s) => Some(
                setup::configured_file(path.parent().unwrap_or(here), s)
                    .map_err(|why| Error::Usage(format!("refused: {}: {why}", path.display())))?,
            ),
            None => None,
        },
        (None, None) => None,
    };
    Ok((configured, setup))
}

/// Where the suite's files go: `--out` (checked), else the state
/// directory's `suites/<id>`.
fn suite_out_dir(
    a: &SuiteArgs,
    first: &RunSettings,
    suite_id: &str,
    here: &std::path::Path,
) -> Result<std::path::PathBuf, Error> {
    Ok(match &a.out {
        Some(o) => {
            let o = std::path::absolute(o).unwrap_or_else(|_| o.clone());
            rfs_evidence::out_dir::check(&o, here)
                .map_err(|r| Error::Usage(format!("refused: {r}")))?;
            o
        }
        None => first.state_dir.join("suites").join(suite_id),
    })
}

/// `rfs.toml`'s `proofs` folder, under `dir` (the file's folder): a plain
/// relative path inside the repository, reached without a symlink (the
/// repository's file may only narrow what rfs reads, never point it at a
/// host folder).
fn configured_folder(dir: &std::path::Path, proofs: &str) -> Result<PathBuf, String> {
    use std::path::Component;
    let rel = std::path::Path::new(proofs);
    if proofs.trim().is_empty() {
        return Err("`proofs` is empty".into());
    }
    if rel.is_absolute() {
        return Err(format!(
            "`proofs = {proofs:?}` is absolute: it must be a folder inside the repository"
        ));
    }
    if rel
        .components()
        .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
    {
        return Err(format!(
            "`proofs = {proofs:?}` leaves the folder of rfs.toml: it must be a folder inside the repository"
        ));
    }
    let mut at = dir.to_path_buf();
    for c in rel.components() {
        at.push(c);
        if std::fs::symlink_metadata(&at).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(format!(
                "`proofs = {proofs:?}`: {} is a symlink; proofs are read only inside the repository, never through a link",
                at.display()
            ));
        }
    }
    Ok(dir.join(rel))
}

/// How many proofs run at once: `--jobs`, else `RFS_JOBS`, else
/// `rfs.toml`'s `jobs`, else the cores of this machine for a local
/// provider (its sandboxes share them) and [`DEFAULT_REMOTE_JOBS`] for a
/// remote one (its sandboxes bring their own).
pub(crate) fn jobs(
    flag: Option<usize>,
    kind: Option<ProviderKind>,
    file: Option<usize>,
) -> Result<usize, Error> {
    let env = std::env::var(JOBS_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let env = env
        .map(|v| {
            v.trim()
                .parse::<usize>()
                .map_err(|_| Error::Usage(format!("{JOBS_ENV}={v:?} is not a number of jobs")))
        })
        .transpose()?;
    let max = max_jobs(kind);
    let (n, origin) = match (flag, env, file) {
        (Some(n), _, _) => (n, "--jobs".to_owned()),
        (None, Some(n), _) => (n, JOBS_ENV.to_owned()),
        (None, None, Some(n)) => (n, "rfs.toml's `jobs`".to_owned()),
        (None, None, None) => {
            return Ok(match kind {
                Some(ProviderKind::Daytona) => DEFAULT_REMOTE_JOBS,
                _ => cores(),
            })
        }
    };
    if n == 0 {
        return Err(Error::Usage(format!("{origin} must be at least 1")));
    }
    if n > max {
        return Err(Error::Usage(format!(
            "refused: {origin} asks for {n} proofs at once; at most {max} run here ({})",
            max_jobs_why(kind)
        )));
    }
    Ok(n)
}

/// The cores of this machine.
fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The most sandboxes a suite or bisection runs at once: on a local
/// provider each one's processes share this machine's cores and memory
/// (`--jobs 1000` ran the machine out of memory), on a remote one each
/// costs API requests and an account's quota.
pub(crate) fn max_jobs(kind: Option<ProviderKind>) -> usize {
    match kind {
        Some(ProviderKind::Daytona) => MAX_REMOTE_JOBS,
        _ => (cores() * LOCAL_JOBS_PER_CORE).max(LOCAL_JOBS_PER_CORE),
    }
}

fn max_jobs_why(kind: Option<ProviderKind>) -> String {
    match kind {
        Some(ProviderKind::Daytona) => {
            format!("a remote provider's sandboxes are capped at {MAX_REMOTE_JOBS}")
        }
        _ => format!(
            "{LOCAL_JOBS_PER_CORE} per core on this machine's {} cores: its sandboxes share them and its memory",
            cores()
        ),
    }
}

/// Sandboxes per core at most on a local provider.
const LOCAL_JOBS_PER_CORE: usize = 4;
/// Sandboxes at once at most on a remote provider.
const MAX_REMOTE_JOBS: usize = 64;

/// GitHub Actions: the suite's index in the job's summary.
fn step_summary(out_dir: &std::path::Path) {
    let Some(path) = std::env::var_os("GITHUB_STEP_SUMMARY").filter(|v| !v.is_empty()) else {
        return;
    };
    if let Ok(md) = std::fs::read_to_string(out_dir.join(files::INDEX_MD)) {
        if let Err(e) =
            rfs_evidence::report::append(std::path::Path::new(&path), &format!("{md}\n"))
        {
            errln!("rfs: warning: GITHUB_STEP_SUMMARY: {e}");
        }
    }
}
