//! Folding in what the script showed or was refused.

use super::{Assertion, AssertionOutcome, Recording, RunSummary, MAX_PRINTS};
use crate::events::Event;

impl RunSummary {
    /// Fold in what the script showed or was refused: terminal
    /// sessions and their assertions, `print()` lines, refusals.
    pub(super) fn apply_shown(&mut self, e: &Event) {
        match e {
            Event::AttachStart {
                session,
                command,
                recording,
                ..
            } => self.recordings.push(Recording {
                session: *session,
                command: command.clone(),
                path: recording.clone(),
                ended: None,
                closed: None,
            }),
            Event::AttachEnd {
                session,
                how,
                exit,
                recording,
                ..
            } => {
                if let Some(r) = self.recordings.iter_mut().find(|r| r.session == *session) {
                    r.ended = Some((how.clone(), *exit));
                    r.closed = recording.as_ref().map(|f| f.path.clone());
                }
            }
            Event::AttachAssert {
                session,
                assert,
                pattern,
                outcome,
                elapsed_ms,
                screen_digest,
                snapshot,
            } => self.assertions.push(Assertion {
                session: *session,
                assert: *assert,
                pattern: pattern.clone(),
                outcome: AssertionOutcome::parse(outcome),
                elapsed_ms: *elapsed_ms,
                screen_digest: screen_digest.clone(),
                snapshot: snapshot.as_ref().map(|f| f.path.clone()),
            }),
            Event::Print { text } => {
                if self.prints.len() < MAX_PRINTS {
                    self.prints.push(text.clone());
                } else {
                    self.prints_elided += 1;
                }
            }
            Event::Refused { reason } => self.refusals.push(reason.clone()),
            _ => {}
        }
    }
}
