//! The closed sets of how things end: a run ([`RunOutcome`], the
//! journal's `run.end` word) and a step ([`StepOutcome`]). Views match on
//! these; none compares outcome strings.

use serde::Serialize;

/// How a run ended (`run.end`'s `outcome`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunOutcome {
    Completed,
    Failed,
    Refused,
    Interrupted,
    /// rfs itself failed (or the journal names an outcome this rfs does
    /// not know).
    Error,
}

impl RunOutcome {
    /// The journal's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            RunOutcome::Completed => "completed",
            RunOutcome::Failed => "failed",
            RunOutcome::Refused => "refused",
            RunOutcome::Interrupted => "interrupted",
            RunOutcome::Error => "error",
        }
    }

    /// The outcome a journal's word names (an unknown word is an error).
    pub fn parse(word: &str) -> RunOutcome {
        match word {
            "completed" => RunOutcome::Completed,
            "failed" => RunOutcome::Failed,
            "refused" => RunOutcome::Refused,
            "interrupted" => RunOutcome::Interrupted,
            _ => RunOutcome::Error,
        }
    }
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How one step ended, as far as the journal tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepOutcome {
    /// Started and not ended (yet).
    Running,
    /// `step.end` with success.
    Passed,
    /// `step.end` without success; `allowed` when the script allowed the
    /// failure; `summary` is the journal's (e.g. `exit 1, 23 ms`).
    Failed { allowed: bool, summary: String },
    /// Refused before (or instead of) running: nothing of it ran.
    Refused { reason: String },
    /// An attempt was cancelled by an interrupt.
    Cancelled { attempt: u32 },
    /// The provider could not run its last attempt, and the run ended.
    ProviderFailed { error: String },
    /// Never ended: the run ended first, with `run`.
    Unfinished { run: RunOutcome },
}

impl StepOutcome {
    /// Whether the step has not ended (a later step of the same name is
    /// a new row once it has).
    pub(crate) fn is_open(&self) -> bool {
        matches!(self, StepOutcome::Running)
    }
}
