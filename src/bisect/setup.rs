//! `rfs bisect --setup FILE` (#36): the setup runs once, before any
//! commit is tested, as a run of its own (its bundle is the bisect
//! folder's `_setup/`), ending with a checkpoint as a suite's setup does.
//! Every lane's sandbox is then a fork of that checkpoint. The setup does
//! not depend on the commit tested: when it bound a source, a lane's
//! first bind adopts it at the checkpoint's own commit and moves it to
//! the lane's commit by a verified re-sync (never the checkpoint's tree
//! passed off as another commit's). Its checkpoints are removed at the
//! end, each verified gone.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::runtime::checkpoint::StartFrom;
use crate::settings::RunArgs;
use crate::suite::setup::SetupRun;

/// Run the setup into `folder/_setup`: the run (its checkpoints to
/// remove) and what every lane starts from; or, when it did not pass,
/// the exit code of the bisection (no commit is tested).
pub(crate) fn run(
    script: &Path,
    folder: &Path,
    template: &RunArgs,
    key: Option<Arc<rfs_evidence::signing::SigningKey>>,
    interrupt: &CancellationToken,
) -> Result<(SetupRun, Arc<StartFrom>), i32> {
    errln!(
        "rfs bisect: setup {} (once, before any commit is tested)",
        script.display()
    );
    let mut s = crate::suite::setup::run(script, folder, template, key, interrupt);
    if let (true, Some(from)) = (s.result.passed(), s.start_from.clone()) {
        errln!(
            "rfs bisect: setup passed in {:.2} s; every lane starts from a fork of checkpoint {}",
            s.result.duration_ms as f64 / 1000.0,
            from.made.checkpoint.id
        );
        let from = StartFrom {
            resync_to_other_commits: true,
            ..(*from).clone()
        };
        return Ok((s, Arc::new(from)));
    }
    errln!(
        "rfs bisect: no commit tested: the setup {} did not pass (exit {}){}",
        s.result.script,
        s.result.exit_code,
        s.result
            .error
            .as_deref()
            .map(|e| format!(":\n{e}"))
            .unwrap_or_default()
    );
    let code = if interrupt.is_cancelled() {
        rfs_evidence::exit_code::INTERRUPTED
    } else if s.result.exit_code == rfs_evidence::exit_code::SUCCESS {
        rfs_evidence::exit_code::INTERNAL
    } else {
        s.result.exit_code
    };
    remove(&mut s);
    Err(code)
}

/// Remove the setup's checkpoints, each said; whether every one was
/// verified gone.
pub(crate) fn remove(s: &mut SetupRun) -> bool {
    let mut all = true;
    for r in s.remove_checkpoints() {
        all &= r.verified;
        errln!(
            "rfs bisect: setup checkpoint {} {}: {}",
            r.checkpoint_id,
            if r.verified {
                "removed, verified gone"
            } else {
                "NOT verified removed"
            },
            r.detail
        );
    }
    all
}
