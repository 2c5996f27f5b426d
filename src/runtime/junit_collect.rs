//! `collect(path, #{ junit: true })`: the collected file must be a JUnit
//! report rfs can read (bounded; see [`crate::report::junit_in`]), checked
//! before anything is kept, so a malformed one fails the script at its
//! `collect()` instead of reaching the JUnit views.

use super::artifacts::Entry;
use super::Run;
use crate::error::{Error, Result};
use crate::events::JunitCounts;
use crate::report::junit_in;

impl Run {
    /// The counts of the one JUnit file among `entries` (as it will be
    /// kept: redacted), or why it is not one.
    pub(super) fn junit_report(&self, what: &str, entries: &[Entry]) -> Result<JunitCounts> {
        let files: Vec<(&String, &Vec<u8>)> = entries
            .iter()
            .filter_map(|e| match e {
                Entry::File { rel, bytes } => Some((rel, bytes)),
                _ => None,
            })
            .collect();
        let [(rel, bytes)] = files[..] else {
            return Err(Error::ScriptFailed(format!(
                "{what}: a JUnit collect takes one file (the report the tests wrote), not a folder of {} file(s)",
                files.len()
            )));
        };
        let kept = self.state().redactor.redact(bytes);
        let suites = junit_in::parse(&kept).map_err(|e| {
            Error::ScriptFailed(format!(
                "{what}: {rel} is not a JUnit report rfs can read: {e}; nothing was kept"
            ))
        })?;
        Ok(junit_in::counts(&suites))
    }
}
