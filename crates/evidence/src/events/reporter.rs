//! The consumer side of the event stream: every view of a live run (the
//! console, `--json`, a suite's tail) is a [`Reporter`].

use super::{Event, Stream};

/// Receives a run's events. Implementations must be cheap and never fail
/// the run.
pub trait Reporter: Send + Sync {
    /// A fact, right after it reached the journal.
    fn event(&self, event: &Event);

    /// One line (or a final partial line) of a step's output, redacted.
    /// Output goes to the step's log file, not to the journal.
    fn output(&self, _step: &str, _stream: Stream, _line: &str) {}

    /// A problem with rfs's own record keeping that cannot itself be
    /// journaled (EVIDENCE.md or the journal could not be written).
    fn warning(&self, _text: &str) {}
}

/// A reporter that drops everything (for embedding and tests).
#[derive(Debug, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn event(&self, _: &Event) {}
}
