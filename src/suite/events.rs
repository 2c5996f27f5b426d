//! The suite's one typed event stream. The pool emits it; the console
//! display, `--json` and the files in the suite's folder (`suite.jsonl`,
//! `index.json`, JUnit) are its consumers.

use serde::Serialize;

/// How a proof ended, after its retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Verdict {
    Passed,
    /// Failed, then passed on a retry.
    Flaky,
    Failed,
    Refused,
    Interrupted,
    /// rfs itself failed (exit 4 or 5).
    Error,
}

impl Verdict {
    /// The verdict of one run's exit code.
    pub(crate) fn of_exit(code: i32) -> Verdict {
        use rfs_evidence::exit_code::*;
        match code {
            SUCCESS => Verdict::Passed,
            SCRIPT_FAILED => Verdict::Failed,
            REFUSED => Verdict::Refused,
            INTERRUPTED => Verdict::Interrupted,
            // A proof that does not compile or has bad arguments failed.
            USAGE => Verdict::Failed,
            _ => Verdict::Error,
        }
    }

    pub(crate) fn passed(self) -> bool {
        matches!(self, Verdict::Passed | Verdict::Flaky)
    }

    /// The word the console shows.
    pub(crate) fn word(self) -> &'static str {
        match self {
            Verdict::Passed => "PASS",
            Verdict::Flaky => "FLAKY",
            Verdict::Failed => "FAIL",
            Verdict::Refused => "REFUSED",
            Verdict::Interrupted => "CANCEL",
            Verdict::Error => "ERROR",
        }
    }
}

/// One run of a proof.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Attempt {
    /// Its bundle (absent when it was refused before a run began).
    pub(crate) out_dir: String,
    /// Not reproducible from its commit alone: `--allow-dirty` shipped
    /// the working tree, or it used a cache (its own or its setup's).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub(crate) not_reproducible: bool,
    pub(crate) run_id: String,
    pub(crate) exit_code: i32,
    pub(crate) duration_ms: u64,
    /// Its error as rfs printed it (the script's line included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<String>,
    /// The sandbox's removal could not be verified.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) teardown_warning: Option<String>,
}

/// A proof's result: its last attempt decides, earlier ones are kept.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ProofResult {
    pub(crate) name: String,
    pub(crate) script: String,
    pub(crate) verdict: Verdict,
    pub(crate) exit_code: i32,
    pub(crate) duration_ms: u64,
    pub(crate) attempts: Vec<Attempt>,
    /// The last lines of the last attempt's output (failures only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) output_tail: Vec<String>,
}

impl ProofResult {
    pub(crate) fn last(&self) -> Option<&Attempt> {
        self.attempts.last()
    }
}

/// Counts at the end of a suite.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Counts {
    pub(crate) passed: usize,
    pub(crate) flaky: usize,
    pub(crate) failed: usize,
    pub(crate) refused: usize,
    pub(crate) interrupted: usize,
    pub(crate) error: usize,
    /// Never started (fail-fast or Ctrl-C).
    pub(crate) not_run: usize,
}

impl Counts {
    pub(crate) fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Passed => self.passed += 1,
            Verdict::Flaky => self.flaky += 1,
            Verdict::Failed => self.failed += 1,
            Verdict::Refused => self.refused += 1,
            Verdict::Interrupted => self.interrupted += 1,
            Verdict::Error => self.error += 1,
        }
    }

    pub(crate) fn finished(&self) -> usize {
        self.passed + self.flaky + self.failed + self.refused + self.interrupted + self.error
    }

    /// The suite's exit code: the worst of its proofs' (rfs's own error
    /// over a refusal over a failure), 130 when it was interrupted.
    pub(crate) fn exit_code(&self, interrupted: bool) -> i32 {
        use rfs_evidence::exit_code::*;
        if interrupted {
            INTERRUPTED
        } else if self.error > 0 {
            INTERNAL
        } else if self.refused > 0 {
            REFUSED
        } else if self.failed > 0 || self.interrupted > 0 {
            SCRIPT_FAILED
        } else {
            SUCCESS
        }
    }
}

/// What happens in a suite, in order.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum SuiteEvent {
    /// The plan: how many proofs, how many at once, where the bundles go.
    Start {
        suite_id: String,
        out_dir: String,
        provider: String,
        jobs: usize,
        proofs: Vec<String>,
        retries: u32,
        fail_fast: bool,
    },
    /// The suite's setup ended (before any proof starts).
    SetupEnd(super::setup::SetupResult),
    /// A checkpoint of the setup removed at the suite's end.
    CheckpointRemoved(rfs_evidence::events::checkpoint_facts::CheckpointRemoved),
    /// A proof's attempt starts (attempt 1 is its first run).
    ProofStart { name: String, attempt: u32 },
    /// An attempt failed and the proof runs again.
    ProofRetry {
        name: String,
        attempt: u32,
        exit_code: i32,
    },
    /// A proof ended.
    ProofEnd(ProofResult),
    /// A proof never started.
    ProofNotRun { name: String, reason: String },
    /// The suite ended.
    End {
        counts: Counts,
        exit_code: i32,
        duration_ms: u64,
        /// Why it stopped early, if it did.
        #[serde(skip_serializing_if = "Option::is_none")]
        stopped: Option<String>,
    },
}

/// A consumer of the suite's events.
pub(crate) trait SuiteReporter: Send + Sync {
    fn event(&self, event: &SuiteEvent);
}

/// A consumer shared with whoever reads it afterwards.
impl<T: SuiteReporter + ?Sized> SuiteReporter for std::sync::Arc<T> {
    fn event(&self, event: &SuiteEvent) {
        (**self).event(event)
    }
}

/// Every consumer, in order.
pub(crate) struct Fanout(pub Vec<Box<dyn SuiteReporter>>);

impl SuiteReporter for Fanout {
    fn event(&self, event: &SuiteEvent) {
        for r in &self.0 {
            r.event(event);
        }
    }
}

/// `rfs test --json`: each event as one JSON line on stdout.
pub(crate) struct JsonLines;

impl SuiteReporter for JsonLines {
    fn event(&self, event: &SuiteEvent) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{}", serde_json::to_string(event).unwrap_or_default());
        let _ = out.flush();
    }
}

/// `40 proofs run: 38 passed, 1 flaky, 1 failed; 2 not run`.
pub(crate) fn summary_text(c: &Counts) -> String {
    let run = c.finished();
    let mut parts = vec![format!("{} passed", c.passed)];
    for (n, what) in [
        (c.flaky, "flaky"),
        (c.failed, "failed"),
        (c.refused, "refused"),
        (c.interrupted, "cancelled"),
        (c.error, "rfs errors"),
    ] {
        if n > 0 {
            parts.push(format!("{n} {what}"));
        }
    }
    let mut s = format!(
        "{run} {} run: {}",
        plural(run, "proof", "proofs"),
        parts.join(", ")
    );
    if c.not_run > 0 {
        s.push_str(&format!("; {} not run", c.not_run));
    }
    s
}

pub(super) fn plural<'a>(n: usize, one: &'a str, many: &'a str) -> &'a str {
    if n == 1 {
        one
    } else {
        many
    }
}
