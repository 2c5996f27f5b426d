//! What `collect()` makes of the report the tests wrote. Nothing there is
//! the failure of the step that ran last (it did not write it), unless
//! the script said `optional: true`. With `#{ junit: true }` the file
//! must be a JUnit report rfs can read (bounded; see
//! [`rfs_evidence::report::junit_in`]), checked before anything is kept, so a
//! malformed one fails the script at its `collect()` instead of reaching
//! the JUnit views.

use super::artifacts::{Collected, Entry};
use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::{Event, JunitCounts};
use rfs_evidence::report::junit_in;

impl Run {
    /// `collect()` found nothing at `rel`: journaled as absent. With
    /// `optional`, the run goes on; else it is the failure of the step
    /// that ended last (which the views show as a failed step, with its
    /// last output), or of the script when no step ran.
    pub(super) fn absent(&self, what: &str, rel: &str, optional: bool) -> Result<Collected> {
        let (shown, last) = {
            let st = self.state();
            (st.redactor.redact_str(rel), st.last_step.clone())
        };
        self.record(Event::ArtifactAbsent(
            rfs_evidence::events::artifact_facts::ArtifactAbsent {
                path: shown.clone(),
                optional,
                step: last.as_ref().map(|(name, _)| name.clone()),
            },
        ))?;
        if optional {
            return Ok(Collected {
                files: 0,
                bytes: 0,
                path: String::new(),
                absent: true,
            });
        }
        let go_on = "(pass #{ optional: true } to collect() if the run may go on without it)";
        Err(match last {
            Some((name, ended)) => Error::StepFailed {
                name,
                reason: format!(
                    "{ended}, and it wrote no `{shown}`, which {what} takes: nothing is there in the sandbox {go_on}"
                ),
            },
            None => Error::ScriptFailed(format!(
                "{what}: nothing is at `{shown}` in the sandbox, and no step ran before it to write it {go_on}"
            )),
        })
    }

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
