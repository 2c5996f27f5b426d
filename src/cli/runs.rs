//! `rfs runs` and `rfs runs prune`: the bundles in the state directory.

use clap::Subcommand;

use crate::settings;
use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct RunsCommand {
    #[command(subcommand)]
    command: Option<RunsSubcommand>,
}

#[derive(Debug, Subcommand)]
enum RunsSubcommand {
    /// Remove old bundles: beyond the newest N runs, or last written
    /// longer ago than AGE (also finished suites and bisections). A run
    /// that has not ended is never removed.
    Prune {
        /// Remove bundles last written longer ago than this (90m, 2h, 7d).
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
        /// Keep only the newest N runs.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// List what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

impl RunsCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        match self.command {
            None => list_runs(),
            Some(RunsSubcommand::Prune {
                older_than,
                keep,
                dry_run,
            }) => prune(older_than, keep, dry_run),
        }
    }
}

/// `rfs runs`.
fn list_runs() -> Result<i32, Error> {
    let runs = crate::runs::list(&settings::state_dir().join("runs"));
    for r in &runs {
        outln!(
            "{}  {:<11} {:>3} steps  {:<8} {}  {}",
            r.run_id,
            r.outcome,
            r.steps,
            r.provider,
            r.script,
            r.dir.display()
        );
    }
    if runs.is_empty() {
        errln!(
            "rfs: no runs in {}",
            settings::state_dir().join("runs").display()
        );
    }
    Ok(exit_code::SUCCESS)
}

/// `rfs runs prune`.
fn prune(older_than: Option<String>, keep: Option<usize>, dry_run: bool) -> Result<i32, Error> {
    if older_than.is_none() && keep.is_none() {
        return Err(Error::Usage(
            "rfs runs prune: say what to remove: --older-than AGE (e.g. 7d) and/or --keep N".into(),
        ));
    }
    let older_than = older_than
        .as_deref()
        .map(crate::gc::parse_age)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let pruned = crate::runs::prune(&settings::state_dir(), older_than, keep, dry_run)
        .map_err(|e| Error::Internal(format!("cannot remove a bundle: {e}")))?;
    let verb = if dry_run { "would remove" } else { "removed" };
    for p in &pruned {
        outln!("{verb} {} ({})", p.dir.display(), p.why);
    }
    errln!("rfs runs prune: {verb} {} folder(s)", pruned.len());
    Ok(exit_code::SUCCESS)
}
