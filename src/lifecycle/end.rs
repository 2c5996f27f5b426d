//! The end of every run: [`end_run`].

use crate::runtime::Run;
use rfs_evidence::outcome::RunOutcome;

/// How a run's end went, beyond its outcome.
#[derive(Debug, Clone, Default)]
pub(crate) struct Ended {
    /// The sandbox's removal could not be verified.
    pub(crate) teardown_warning: Option<String>,
    /// Sealing the bundle or drawing its report failed: the evidence is
    /// incomplete.
    pub(crate) seal_error: Option<(&'static str, String)>,
    /// An interrupt came while a completed run was ending: it is
    /// journaled as interrupted, and its entry point says so.
    pub(crate) interrupted_at_end: bool,
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
    key: Option<&rfs_evidence::signing::SigningKey>,
) -> Ended {
    let (teardown_warning, interrupted_at_end) = run.finish_with(outcome, reason);
    let seal_error = seal_bundle(&run.cfg.out_dir, key).err();
    Ended {
        teardown_warning,
        seal_error,
        interrupted_at_end,
    }
}

/// After the journal is closed: the attestation (signed when there is a
/// key) and `journal.sig`, then `report.html`, the bundle's view for
/// people, made from the sealed bundle. Either failing fails the run (the
/// evidence would be incomplete): the error says which.
fn seal_bundle(
    out_dir: &std::path::Path,
    key: Option<&rfs_evidence::signing::SigningKey>,
) -> Result<(), (&'static str, String)> {
    rfs_evidence::seal::seal(out_dir, key).map_err(|e| ("sealing its evidence", e.to_string()))?;
    rfs_evidence::report::write_html(out_dir).map_err(|e| ("writing report.html", e.to_string()))
}
