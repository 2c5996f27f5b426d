//! `rfs rm ID...`: destroy the named sandboxes rfs created, each verified
//! gone. Only sandboxes carrying rfs's label; only this user's unless
//! `--all`; not one a live run is using (or whose owner cannot be judged
//! from here) unless `--force`. An id no provider knows is an error.

use std::time::Duration;

use crate::runtime::teardown::destroy_verified;
use rfs_evidence::error::Error;
use rfs_evidence::exit_code;
use rfs_sandbox::provider::owner::{owner_liveness, Liveness};
use rfs_sandbox::provider::{labels, Provider, SandboxInfo};

/// How long one removal may take to be verified.
const VERIFY_WITHIN: Duration = Duration::from_secs(60);

/// What `rfs rm` may remove beyond this user's ended runs' sandboxes.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scope {
    /// Other users' sandboxes too (and unlabelled ones).
    pub all: bool,
    /// Sandboxes of live runs, and of owners that cannot be judged.
    pub force: bool,
}

/// Why one named sandbox was not removed.
enum NotRemoved {
    /// No provider knows the id (exit 2).
    Unknown(String),
    /// It is not one `rfs rm` may remove as asked (exit 3).
    Refused(String),
    /// Destroying it failed or was not verified (exit 5).
    Failed(String),
}

/// `rfs rm`: every id in turn; the exit code is the worst outcome.
pub(crate) fn rm(ids: &[String], only: Option<String>, scope: Scope) -> Result<i32, Error> {
    let rt = tokio::runtime::Runtime::new().map_err(Error::internal)?;
    let providers = super::reachable(&rt, only, "rm")?;
    let mut code = exit_code::SUCCESS;
    for id in ids {
        match rt.block_on(remove_one(&providers, id, scope)) {
            Ok(line) => outln!("{line}"),
            Err(e) => {
                let (why, c) = match e {
                    NotRemoved::Unknown(w) => (w, exit_code::USAGE),
                    NotRemoved::Refused(w) => (w, exit_code::REFUSED),
                    NotRemoved::Failed(w) => (w, exit_code::INTERNAL),
                };
                errln!("rfs rm: {why}");
                code = worse(code, c);
            }
        }
    }
    Ok(code)
}

/// The more serious of two exit codes (failed > refused > usage).
fn worse(a: i32, b: i32) -> i32 {
    let rank = |c| match c {
        exit_code::INTERNAL => 3,
        exit_code::REFUSED => 2,
        exit_code::USAGE => 1,
        _ => 0,
    };
    if rank(b) > rank(a) {
        b
    } else {
        a
    }
}

async fn remove_one(
    providers: &[std::sync::Arc<dyn Provider>],
    id: &str,
    scope: Scope,
) -> Result<String, NotRemoved> {
    let mut errors = vec![];
    let mut found = None;
    for p in providers {
        match p.get(id).await {
            Ok(Some(info)) => {
                found = Some((p.as_ref(), info));
                break;
            }
            Ok(None) => {}
            Err(e) => errors.push(format!("{}: {e}", p.name())),
        }
    }
    let Some((p, info)) = found else {
        let asked = if errors.is_empty() {
            String::new()
        } else {
            format!(" ({})", errors.join("; "))
        };
        return Err(NotRemoved::Unknown(format!(
            "no provider knows sandbox {id}{asked}; `rfs ps` lists the live ones"
        )));
    };
    allowed(&info, scope).map_err(NotRemoved::Refused)?;
    match destroy_verified(p, id, VERIFY_WITHIN).await {
        Ok(proof) => Ok(format!(
            "removed {} sandbox {id} (run {}), verified gone after {} poll(s), {} ms",
            p.name(),
            info.labels.get(labels::RUN_ID).map_or("?", String::as_str),
            proof.polls,
            proof.elapsed_ms
        )),
        Err(e) => Err(NotRemoved::Failed(format!(
            "FAILED to remove {} sandbox {id}: {e}",
            p.name()
        ))),
    }
}

/// Whether `rfs rm` may remove `info` as asked; why not, naming the flag
/// that would allow it.
fn allowed(info: &SandboxInfo, scope: Scope) -> Result<(), String> {
    let id = &info.id;
    if info.labels.get(labels::CREATED_BY).map(String::as_str) != Some(labels::CREATED_BY_VALUE) {
        return Err(format!(
            "sandbox {id} was not created by rfs (it has no {}={} label); rfs removes only its own",
            labels::CREATED_BY,
            labels::CREATED_BY_VALUE
        ));
    }
    let me = rfs_sandbox::provider::owner::uid();
    match info.labels.get(labels::OWNER_USER) {
        Some(u) if *u == me => {}
        _ if scope.all => {}
        Some(u) => {
            return Err(format!(
                "sandbox {id} belongs to user id {u}, not to you ({me}); `rfs rm --all` removes other users' sandboxes"
            ))
        }
        None => {
            return Err(format!(
                "sandbox {id} carries no owner label, so it is not known to be yours; `rfs rm --all` removes it"
            ))
        }
    }
    match owner_liveness(&info.labels) {
        Liveness::Gone(_) => Ok(()),
        _ if scope.force => Ok(()),
        Liveness::Alive => Err(format!(
            "sandbox {id} is in use by its live run (rfs pid {}); end that run (it removes its sandbox unless --keep), or `rfs rm --force`",
            info.labels.get(labels::OWNER_PID).map_or("?", String::as_str)
        )),
        Liveness::Unknown(why) => Err(format!(
            "the owner of sandbox {id} cannot be judged from here ({why}); `rfs rm --force` removes it anyway"
        )),
    }
}
