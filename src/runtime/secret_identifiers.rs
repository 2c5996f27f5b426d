//! Secrets in identifiers a script builds (#44): a name, path or allow
//! entry is journaled and shown as it is — in placement facts, every
//! `net.connect` rule, EVIDENCE.md, report.html, JUnit, `--json`, the
//! console and bundle file names — so one holding a secret the run knows
//! (`arg("TOKEN")`, a secret-named variable) is refused before anything
//! runs, naming what held it but not the secret. Case does not hide one:
//! a host name is compared without case, as DNS and the proxy fold it.

use super::Run;
use rfs_evidence::error::Result;

impl Run {
    /// Refuse `value`, the script's `what`, when it holds a secret.
    pub(crate) fn refuse_secret_in(&self, what: &str, value: &str) -> Result<()> {
        // Without regard to case, which also finds it as it is.
        if self.state().redactor.holds_secret_ignoring_case(value) {
            return Err(self.refuse(format!(
                "{what} holds a secret the run was given (it would be journaled and shown as it is): refused before anything ran; keep secrets out of names, paths and allow entries"
            )));
        }
        Ok(())
    }
}
