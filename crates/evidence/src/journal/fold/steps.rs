//! Folding a step's events in: its start, attempts, refusal and end.

use super::{RunSummary, StepOutcome, StepRecord, EMPTY_SHA256};
use crate::events::Event;

impl RunSummary {
    /// The newest step of that name that has not ended.
    fn open_step(&mut self, name: &str) -> Option<&mut StepRecord> {
        self.steps
            .iter_mut()
            .rev()
            .find(|s| s.name == name && s.outcome.is_open())
    }

    /// `collect(path)` found nothing the step `name` (the last that ran)
    /// should have written: that step failed the run, whatever its exit
    /// said, so the views show it (its command, its last output) as any
    /// failed step.
    pub(super) fn fail_for_missing(&mut self, name: &str, path: &str) {
        let Some(row) = self.steps.iter_mut().rev().find(|s| s.name == name) else {
            return;
        };
        let ended = match &row.outcome {
            StepOutcome::Failed { summary, .. } => summary.clone(),
            _ => match row.exit {
                Some(code) => format!("exit {code}"),
                None => "ended".to_owned(),
            },
        };
        row.outcome = StepOutcome::Failed {
            allowed: false,
            summary: format!("{ended}; it wrote no {path}, which collect() takes"),
        };
    }

    /// Fold one step event in (a step's rows: started, attempts, end).
    pub(super) fn apply_step(&mut self, e: &Event) {
        match e {
            Event::StepStart {
                name,
                command,
                cwd,
                allow_failure,
                commit,
                ..
            } => self.steps.push(StepRecord {
                command: command.clone(),
                allow_failure: *allow_failure,
                commit: commit.clone(),
                workdir: self.pins.last().map(|p| p.workdir.clone()),
                ..StepRecord::new(name, cwd, StepOutcome::Running)
            }),
            Event::StepRefused { name, cwd, reason } => {
                let outcome = StepOutcome::Refused {
                    reason: reason.clone(),
                };
                match self.open_step(name) {
                    Some(row) => row.outcome = outcome,
                    // Refused before it started: it never reached the
                    // sandbox.
                    None => self.steps.push(StepRecord::new(name, cwd, outcome)),
                }
            }
            Event::StepEnd {
                name,
                ok,
                exit,
                timed_out,
                attempts,
                duration_ms,
                summary,
                usage,
                ..
            } => {
                if let Some(row) = self.open_step(name) {
                    row.usage = usage.clone().filter(|u| !u.is_empty());
                    row.exit = *exit;
                    row.timed_out = *timed_out;
                    row.attempts = *attempts;
                    row.duration_ms = *duration_ms;
                    row.outcome = if *ok {
                        StepOutcome::Passed
                    } else {
                        StepOutcome::Failed {
                            allowed: row.allow_failure,
                            summary: summary.clone(),
                        }
                    };
                }
            }
            Event::StepAttempt { .. } | Event::StepProviderError { .. } => self.apply_attempt(e),
            _ => {}
        }
    }

    /// Fold one attempt of a step in (its exit or provider error, logs).
    fn apply_attempt(&mut self, e: &Event) {
        match e {
            Event::StepAttempt {
                name,
                attempt,
                exit,
                timed_out,
                cancelled,
                duration_ms,
                stdout_log,
                stderr_log,
                output_tail,
                output_cut,
                ..
            } => {
                if let Some(row) = self.open_step(name) {
                    row.output_tail.clone_from(output_tail);
                    row.output_cut.clone_from(output_cut);
                    row.attempts = *attempt;
                    row.exit = *exit;
                    row.timed_out = *timed_out;
                    row.duration_ms += duration_ms;
                    row.provider_error = None;
                    row.logs.extend(logs(stdout_log, stderr_log));
                    row.stdout_sha256 = Some(match stdout_log {
                        Some(f) => f.sha256.clone(),
                        None => EMPTY_SHA256.to_owned(),
                    });
                    if *cancelled {
                        row.outcome = StepOutcome::Cancelled { attempt: *attempt };
                    }
                }
            }
            Event::StepProviderError {
                name,
                attempt,
                error,
                duration_ms,
                stdout_log,
                stderr_log,
                output_tail,
                output_cut,
            } => {
                if let Some(row) = self.open_step(name) {
                    row.output_tail.clone_from(output_tail);
                    row.output_cut.clone_from(output_cut);
                    row.attempts = *attempt;
                    row.exit = None;
                    row.duration_ms += duration_ms;
                    row.provider_error = Some(error.clone());
                    row.logs.extend(logs(stdout_log, stderr_log));
                }
            }
            _ => {}
        }
    }
}

fn logs<'a>(
    stdout: &'a Option<crate::events::FileDigest>,
    stderr: &'a Option<crate::events::FileDigest>,
) -> impl Iterator<Item = String> + 'a {
    [stdout, stderr]
        .into_iter()
        .flatten()
        .map(|f| f.path.clone())
}
