//! What the runtime reports as a run goes. The runtime never writes to the
//! terminal: it emits [`Event`]s and a [`Reporter`] decides how to show them.

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// One thing that happened.
#[derive(Debug, Clone)]
pub enum Event {
    RunStarted {
        run_id: String,
        provider: String,
        reason: String,
        out_dir: String,
    },
    SandboxPlaced {
        id: String,
        provider: String,
    },
    SourcePinned {
        commit: String,
        tree_digest: String,
        files: usize,
        workdir: String,
    },
    StepStarted {
        name: String,
        attempt: u32,
        cwd: String,
    },
    /// One line (or a final partial line) of a step's output, redacted.
    StepOutput {
        name: String,
        stream: Stream,
        line: String,
    },
    StepFinished {
        name: String,
        ok: bool,
        summary: String,
    },
    /// `print` from the script.
    Print(String),
    /// `debug` from the script.
    Debug(String),
    /// A problem that is reported and the run continues.
    Warning(String),
    CleanupVerified {
        id: String,
        elapsed_ms: u128,
    },
    RunFinished {
        outcome: String,
        out_dir: String,
    },
}

/// Receives events. Implementations must be cheap and never fail the run.
pub trait Reporter: Send + Sync {
    fn report(&self, event: &Event);
}

/// A reporter that drops everything (for embedding and tests).
#[derive(Debug, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn report(&self, _: &Event) {}
}
