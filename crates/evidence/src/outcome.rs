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
    pub fn is_open(&self) -> bool {
        matches!(self, StepOutcome::Running)
    }

    /// Whether the step is why the run did not complete (a failure the
    /// script allowed is not).
    pub fn failed_the_run(&self) -> bool {
        !matches!(
            self,
            StepOutcome::Running | StepOutcome::Passed | StepOutcome::Failed { allowed: true, .. }
        )
    }
}

/// How one `assert_screen` ended (`attach.assert`'s `outcome`; the words
/// are the journal's since its first version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AssertionOutcome {
    /// The screen showed what was expected.
    Pass,
    /// It did not within the timeout.
    Timeout,
    /// An `absent` pattern appeared.
    Appeared,
    /// The program's output ended first.
    Ended,
    /// The provider's channel ended without the program's exit status.
    Lost,
    /// The run was interrupted.
    Cancelled,
}

impl AssertionOutcome {
    /// The journal's word for it.
    pub fn as_str(self) -> &'static str {
        match self {
            AssertionOutcome::Pass => "pass",
            AssertionOutcome::Timeout => "Timeout",
            AssertionOutcome::Appeared => "Appeared",
            AssertionOutcome::Ended => "Ended",
            AssertionOutcome::Lost => "Lost",
            AssertionOutcome::Cancelled => "Cancelled",
        }
    }

    /// The outcome a journal's word names. Journals of earlier versions
    /// wrote `Appeared(…)` with the match; a word this rfs does not know is
    /// a failure, never a pass.
    pub fn parse(word: &str) -> AssertionOutcome {
        match word {
            "pass" => AssertionOutcome::Pass,
            "Ended" => AssertionOutcome::Ended,
            "Lost" => AssertionOutcome::Lost,
            "Cancelled" => AssertionOutcome::Cancelled,
            w if w.starts_with("Appeared") => AssertionOutcome::Appeared,
            _ => AssertionOutcome::Timeout,
        }
    }

    /// Whether the screen did not show what was expected (an interrupted
    /// wait is not a failure of the screen).
    pub fn is_failure(self) -> bool {
        !matches!(self, AssertionOutcome::Pass | AssertionOutcome::Cancelled)
    }

    /// How a reader is told it (`passed`, `timed out`, …).
    pub fn describe(self) -> &'static str {
        match self {
            AssertionOutcome::Pass => "passed",
            AssertionOutcome::Timeout => "FAILED: not on screen before the timeout",
            AssertionOutcome::Appeared => "FAILED: appeared although it must be absent",
            AssertionOutcome::Ended => "FAILED: the program's output ended first",
            AssertionOutcome::Lost => "FAILED: the connection to the session was lost",
            AssertionOutcome::Cancelled => "cancelled (the run was interrupted)",
        }
    }
}
