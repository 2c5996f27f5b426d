//! `rfs ps`, `rfs shell ID`, `rfs rm ID…` and `rfs gc`: the sandboxes rfs
//! created.

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct PsCommand {
    /// Only this provider.
    #[arg(long)]
    provider: Option<String>,
    /// Every user's sandboxes, not only this user's.
    #[arg(long)]
    all: bool,
}

impl PsCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        crate::sandboxes::ps(self.provider, self.all)
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct ShellCommand {
    /// The sandbox id (`rfs ps` lists them).
    id: String,
    /// The sandbox's provider (default: the one that knows the id).
    #[arg(long)]
    provider: Option<String>,
}

impl ShellCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        crate::sandboxes::shell(&self.id, self.provider)
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct RmCommand {
    /// Sandbox ids (`rfs ps` lists them).
    #[arg(required = true)]
    ids: Vec<String>,
    /// Only this provider (default: the one that knows each id).
    #[arg(long)]
    provider: Option<String>,
    /// Also other users' sandboxes (and ones without an owner label).
    #[arg(long)]
    all: bool,
    /// Also sandboxes of live runs, and ones whose owner cannot be
    /// checked from here (another host).
    #[arg(long)]
    force: bool,
}

impl RmCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        crate::sandboxes::rm::rm(
            &self.ids,
            self.provider,
            crate::sandboxes::rm::Scope {
                all: self.all,
                force: self.force,
            },
        )
    }
}

#[derive(Debug, clap::Args)]
pub(crate) struct GcCommand {
    /// List what would be destroyed.
    #[arg(long)]
    dry_run: bool,
    /// Only this provider (default: every available provider).
    #[arg(long)]
    provider: Option<String>,
    /// Also destroy sandboxes whose owner cannot be checked from here
    /// (another host) once they started longer ago than this (90m, 2h, 1d).
    #[arg(long, value_name = "AGE")]
    older_than: Option<String>,
}

impl GcCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        gc(self.dry_run, self.provider, self.older_than)
    }
}

fn gc(dry_run: bool, only: Option<String>, older_than: Option<String>) -> Result<i32, Error> {
    let older_than = older_than
        .as_deref()
        .map(crate::gc::parse_age)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let rt = tokio::runtime::Runtime::new().map_err(Error::internal)?;
    let mut failed = false;
    for provider in crate::sandboxes::reachable(&rt, only, "gc")? {
        let entries = rt
            .block_on(crate::gc::collect_older_than(
                provider.as_ref(),
                dry_run,
                older_than,
            ))
            .map_err(|e| Error::Refused(e.to_string()))?;
        for e in entries {
            use crate::gc::GcAction::*;
            let (verb, why) = match &e.action {
                KeptAlive => ("kept (owner alive)", String::new()),
                KeptUnknown(w) => ("kept", w.clone()),
                WouldDestroy(w) => ("would destroy", w.clone()),
                Destroyed(w) => ("destroyed", w.clone()),
                Failed(w) => {
                    failed = true;
                    ("FAILED to destroy", w.clone())
                }
            };
            outln!("{} {} (run {}): {verb} {why}", e.provider, e.id, e.run_id);
        }
    }
    Ok(if failed {
        exit_code::INTERNAL
    } else {
        exit_code::SUCCESS
    })
}
