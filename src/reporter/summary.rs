//! A run's summary, folded from its events: what `--json` prints last.

use serde::Serialize;

use crate::events::Event;

/// One step of the run as it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    pub name: String,
    /// `ok`, `failed`, `refused` or `interrupted` (started, never ended).
    pub status: &'static str,
    /// The last attempt's exit code (`null` when it had none).
    pub exit: Option<i32>,
    pub duration_ms: u64,
    pub attempts: u32,
    /// The commit the step ran under (`null` before any sync).
    pub commit: Option<String>,
}

/// The run as a whole (the last `--json` line).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// `null` when the arguments were refused before a run id existed.
    pub run_id: Option<String>,
    /// `completed`, `failed`, `refused`, `interrupted` or `error` (as
    /// `run.end` says), or `usage` when the arguments were refused before
    /// the run began.
    pub outcome: String,
    pub exit_code: i32,
    pub provider: Option<String>,
    pub sandbox_id: Option<String>,
    pub commit: Option<String>,
    pub tree_digest: Option<String>,
    pub steps: Vec<StepSummary>,
    /// EVIDENCE.md of the run (`null` when the run was refused before its
    /// output directory existed).
    pub evidence: Option<String>,
}

impl Summary {
    /// Take one event into account.
    pub fn apply(&mut self, event: &Event) {
        match event {
            Event::RunStart {
                run_id,
                provider,
                out_dir,
                ..
            } => {
                self.run_id = Some(run_id.clone());
                self.provider = Some(provider.clone());
                self.evidence = Some(
                    std::path::Path::new(out_dir)
                        .join("EVIDENCE.md")
                        .display()
                        .to_string(),
                );
            }
            Event::Placement {
                provider,
                sandbox_id,
                ..
            } => {
                self.provider = Some(provider.clone());
                self.sandbox_id = Some(sandbox_id.clone());
            }
            Event::SourcePin {
                commit,
                tree_digest,
                ..
            } => {
                self.commit = Some(commit.clone());
                self.tree_digest = Some(tree_digest.clone());
            }
            Event::StepStart { name, commit, .. } => self.steps.push(StepSummary {
                name: name.clone(),
                status: "interrupted",
                exit: None,
                duration_ms: 0,
                attempts: 0,
                commit: commit.clone(),
            }),
            Event::StepAttempt {
                name,
                attempt,
                exit,
                duration_ms,
                ..
            } => {
                if let Some(s) = self.open_step(name) {
                    s.attempts = *attempt;
                    s.exit = *exit;
                    s.duration_ms += duration_ms;
                }
            }
            Event::StepProviderError {
                name,
                attempt,
                duration_ms,
                ..
            } => {
                if let Some(s) = self.open_step(name) {
                    s.attempts = *attempt;
                    s.exit = None;
                    s.duration_ms += duration_ms;
                }
            }
            Event::StepRefused { name, .. } => match self.open_step(name) {
                Some(s) => s.status = "refused",
                // Refused before it started: it never reached the sandbox.
                None => self.steps.push(StepSummary {
                    name: name.clone(),
                    status: "refused",
                    exit: None,
                    duration_ms: 0,
                    attempts: 0,
                    commit: None,
                }),
            },
            Event::StepEnd {
                name,
                ok,
                exit,
                attempts,
                duration_ms,
                ..
            } => {
                if let Some(s) = self.open_step(name) {
                    s.status = if *ok { "ok" } else { "failed" };
                    s.exit = *exit;
                    s.attempts = *attempts;
                    s.duration_ms = *duration_ms;
                }
            }
            Event::RunEnd { outcome, .. } => self.outcome.clone_from(outcome),
            _ => {}
        }
    }

    /// The newest step of that name still running.
    fn open_step(&mut self, name: &str) -> Option<&mut StepSummary> {
        self.steps
            .iter_mut()
            .rev()
            .find(|s| s.name == name && s.status == "interrupted")
    }

    /// Close the summary with the process's exit code; a run refused
    /// before its journal existed has no `run.end`, so its outcome comes
    /// from the code.
    pub fn finish(&mut self, run_id: Option<&str>, exit_code: i32) {
        self.exit_code = exit_code;
        if self.run_id.is_none() {
            self.run_id = run_id.map(str::to_string);
        }
        if self.outcome.is_empty() {
            self.outcome = match exit_code {
                crate::exit_code::SUCCESS => "completed",
                crate::exit_code::REFUSED => "refused",
                crate::exit_code::USAGE => "usage",
                crate::exit_code::INTERRUPTED => "interrupted",
                crate::exit_code::SCRIPT_FAILED => "failed",
                _ => "error",
            }
            .to_string();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn start(name: &str) -> Event {
        Event::StepStart {
            name: name.into(),
            seq: 1,
            command: "true".into(),
            sandbox_id: "sb".into(),
            cwd: String::new(),
            cwd_remote: "/w".into(),
            env: vec![],
            timeout_s: None,
            retries: 1,
            allow_failure: false,
            commit: Some("c0ffee".into()),
            tree_digest: Some("7ree".into()),
        }
    }

    fn attempt(name: &str, attempt: u32, exit: i32, ms: u64) -> Event {
        Event::StepAttempt {
            name: name.into(),
            attempt,
            sandbox_id: "sb".into(),
            exit: Some(exit),
            signal: None,
            timed_out: false,
            cancelled: false,
            duration_ms: ms,
            stdout_log: None,
            stderr_log: None,
        }
    }

    #[test]
    fn a_step_that_never_ended_is_reported_interrupted_with_its_attempts() {
        let mut s = Summary::default();
        s.apply(&start("build"));
        s.apply(&attempt("build", 1, 1, 5));
        s.apply(&attempt("build", 2, 1, 7));
        s.finish(Some("r1"), crate::exit_code::INTERRUPTED);
        assert_eq!(
            s.steps,
            vec![StepSummary {
                name: "build".into(),
                status: "interrupted",
                exit: Some(1),
                duration_ms: 12,
                attempts: 2,
                commit: Some("c0ffee".into()),
            }]
        );
        assert_eq!(s.outcome, "interrupted");
        assert_eq!(s.run_id.as_deref(), Some("r1"));
    }

    #[test]
    fn two_steps_of_one_name_are_two_entries() {
        let mut s = Summary::default();
        for _ in 0..2 {
            s.apply(&start("t"));
            s.apply(&Event::StepEnd {
                name: "t".into(),
                ok: true,
                exit: Some(0),
                timed_out: false,
                attempts: 1,
                duration_ms: 3,
                sandbox_id: "sb".into(),
                summary: "exit 0".into(),
            });
        }
        assert_eq!(s.steps.len(), 2);
        assert!(s.steps.iter().all(|x| x.status == "ok"));
    }

    #[test]
    fn a_refusal_before_the_journal_is_a_refused_outcome() {
        let mut s = Summary::default();
        s.finish(None, crate::exit_code::REFUSED);
        assert_eq!(s.outcome, "refused");
        assert_eq!((s.run_id, s.evidence), (None, None));
    }
}
