//! Running a suite's proofs: `jobs` workers take proofs from one queue,
//! each proof a whole `rfs run` in its own sandbox (its own bundle), with
//! retries for failures, fail-fast (no new proof starts after a failure)
//! and one interrupt that cancels every running proof, each of which
//! then tears its sandbox down and verifies it gone.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;

use super::events::{Attempt, Counts, ProofResult, SuiteEvent, SuiteReporter, Verdict};
use super::plan::Proof;
use super::tail::Tail;
use crate::settings::{RunArgs, RunSettings};

/// What the pool runs and how.
pub(crate) struct Pool {
    pub(crate) suite_id: String,
    pub(crate) out_dir: PathBuf,
    pub(crate) provider: String,
    pub(crate) proofs: Vec<Proof>,
    pub(crate) jobs: usize,
    pub(crate) retries: u32,
    pub(crate) fail_fast: bool,
    /// Every proof's run arguments but its script and folder.
    pub(crate) template: RunArgs,
    pub(crate) signing_key: Option<Arc<rfs_evidence::signing::SigningKey>>,
    /// The suite's setup, run once before the proofs (#36).
    pub(crate) setup: Option<PathBuf>,
}

/// How the suite ended.
#[derive(Debug)]
pub(crate) struct Finished {
    pub(crate) exit_code: i32,
}

struct Shared<'a> {
    queue: Mutex<VecDeque<Proof>>,
    results: Mutex<Vec<ProofResult>>,
    /// Set by fail-fast: no proof starts any more.
    stop: Mutex<Option<String>>,
    interrupt: &'a CancellationToken,
    reporter: &'a dyn SuiteReporter,
    /// The setup's checkpoint every proof starts from.
    start_from: Option<Arc<crate::runtime::checkpoint::StartFrom>>,
}

impl Pool {
    /// Run every proof; `interrupt` cancels the suite.
    pub(crate) fn run(
        self,
        reporter: &dyn SuiteReporter,
        interrupt: &CancellationToken,
    ) -> Finished {
        let started = Instant::now();
        reporter.event(&SuiteEvent::Start {
            suite_id: self.suite_id.clone(),
            out_dir: self.out_dir.display().to_string(),
            provider: self.provider.clone(),
            jobs: self.jobs,
            proofs: self.proofs.iter().map(|p| p.name.clone()).collect(),
            retries: self.retries,
            fail_fast: self.fail_fast,
        });
        let mut setup = self.setup(reporter, interrupt);
        let blocked = setup
            .as_ref()
            .filter(|s| !s.result.passed())
            .map(|s| (s.result.not_run_reason(), s.result.exit_code));
        let shared = Shared {
            queue: Mutex::new(self.proofs.iter().cloned().collect()),
            results: Mutex::default(),
            stop: Mutex::new(blocked.as_ref().map(|(why, _)| why.clone())),
            interrupt,
            reporter,
            start_from: setup.as_ref().and_then(|s| s.start_from.clone()),
        };
        let workers = self.jobs.clamp(1, self.proofs.len().max(1));
        std::thread::scope(|s| {
            for _ in 0..workers {
                s.spawn(|| self.worker(&shared));
            }
        });
        let removal_failed = setup
            .as_mut()
            .is_some_and(|s| !remove_checkpoints(s, reporter));
        let interrupted = interrupt.is_cancelled();
        let stopped = lock(&shared.stop).clone().or_else(|| {
            interrupted.then(|| "interrupted: every running proof was cancelled".to_owned())
        });
        let not_run: Vec<Proof> = lock(&shared.queue).drain(..).collect();
        for p in &not_run {
            reporter.event(&SuiteEvent::ProofNotRun {
                name: p.name.clone(),
                reason: stopped.clone().unwrap_or_default(),
            });
        }
        let results = std::mem::take(&mut *lock(&shared.results));
        let mut counts = Counts {
            not_run: not_run.len(),
            ..Counts::default()
        };
        for r in &results {
            counts.add(r.verdict);
        }
        let mut exit_code = counts.exit_code(interrupted);
        if let Some((_, code)) = blocked.filter(|_| !interrupted) {
            // The setup's own failure is the suite's (never a green suite
            // of proofs that did not run).
            exit_code = if code == rfs_evidence::exit_code::SUCCESS {
                rfs_evidence::exit_code::INTERNAL
            } else {
                code
            };
        } else if removal_failed && exit_code == rfs_evidence::exit_code::SUCCESS {
            exit_code = rfs_evidence::exit_code::INTERNAL;
        }
        reporter.event(&SuiteEvent::End {
            counts,
            exit_code,
            duration_ms: millis(started),
            stopped,
        });
        Finished { exit_code }
    }

    /// The suite's setup, when it has one, run before any proof.
    fn setup(
        &self,
        reporter: &dyn SuiteReporter,
        interrupt: &CancellationToken,
    ) -> Option<super::setup::SetupRun> {
        let script = self.setup.as_ref()?;
        let s = super::setup::run(
            script,
            &self.out_dir,
            &self.template,
            self.signing_key.clone(),
            interrupt,
        );
        reporter.event(&SuiteEvent::SetupEnd(s.result.clone()));
        Some(s)
    }

    fn worker(&self, shared: &Shared<'_>) {
        loop {
            if shared.interrupt.is_cancelled() || lock(&shared.stop).is_some() {
                return;
            }
            let Some(proof) = lock(&shared.queue).pop_front() else {
                return;
            };
            let result = self.proof(&proof, shared);
            if self.fail_fast && !result.verdict.passed() && !shared.interrupt.is_cancelled() {
                lock(&shared.stop)
                    .get_or_insert_with(|| format!("--fail-fast: {} did not pass", result.name));
            }
            shared.reporter.event(&SuiteEvent::ProofEnd(result.clone()));
            lock(&shared.results).push(result);
        }
    }

    /// A proof with its retries: a failed attempt runs again (a refusal
    /// or an error does not: running again would not change it).
    fn proof(&self, proof: &Proof, shared: &Shared<'_>) -> ProofResult {
        let started = Instant::now();
        let mut attempts = vec![];
        let mut tail;
        let mut n = 1;
        loop {
            shared.reporter.event(&SuiteEvent::ProofStart {
                name: proof.name.clone(),
                attempt: n,
            });
            let (attempt, t) = self.attempt(proof, n, shared);
            tail = t;
            let code = attempt.exit_code;
            attempts.push(attempt);
            let again = Verdict::of_exit(code) == Verdict::Failed
                && n <= self.retries
                && !shared.interrupt.is_cancelled();
            if !again {
                break;
            }
            shared.reporter.event(&SuiteEvent::ProofRetry {
                name: proof.name.clone(),
                attempt: n,
                exit_code: code,
            });
            n += 1;
        }
        let exit_code = attempts.last().map_or(0, |a| a.exit_code);
        let verdict = match Verdict::of_exit(exit_code) {
            Verdict::Passed if attempts.len() > 1 => Verdict::Flaky,
            v => v,
        };
        ProofResult {
            name: proof.name.clone(),
            script: proof.path.display().to_string(),
            verdict,
            exit_code,
            duration_ms: millis(started),
            attempts,
            output_tail: if verdict.passed() { vec![] } else { tail },
        }
    }

    /// One `rfs run` of the proof, into its own folder of the suite's.
    fn attempt(&self, proof: &Proof, n: u32, shared: &Shared<'_>) -> (Attempt, Vec<String>) {
        let interrupt = shared.interrupt;
        let started = Instant::now();
        let folder = match n {
            1 => proof.slug.clone(),
            n => format!("{}.attempt-{n}", proof.slug),
        };
        let args = RunArgs {
            script: proof.path.clone(),
            out: Some(self.out_dir.join(folder)),
            ..self.template.clone()
        };
        let settings = match RunSettings::from_args(args) {
            Ok(s) => s,
            Err(e) => {
                let a = Attempt {
                    out_dir: String::new(),
                    not_reproducible: false,
                    run_id: String::new(),
                    exit_code: e.exit_code(),
                    duration_ms: millis(started),
                    error: Some(render(e)),
                    teardown_warning: None,
                };
                return (a, vec![]);
            }
        };
        let tail = Arc::new(Tail::default());
        let hooks = crate::runner::Hooks {
            reporter: tail.clone(),
            interrupt: interrupt.child_token(),
            signing_key: self.signing_key.clone(),
            ..Default::default()
        };
        let link = crate::lifecycle::SetupLink {
            start_from: shared.start_from.clone(),
            ..Default::default()
        };
        let report =
            crate::runner::run_linked(settings, hooks, Box::new(crate::script::execute), link);
        // A run refused before its journal began leaves no bundle.
        let bundle = report.out_dir.join("journal.jsonl").exists();
        let a = Attempt {
            out_dir: if bundle {
                report.out_dir.display().to_string()
            } else {
                String::new()
            },
            not_reproducible: tail.not_reproducible(),
            run_id: report.run_id,
            exit_code: report.exit_code,
            duration_ms: millis(started),
            error: report.error.map(render),
            teardown_warning: report.teardown_warning,
        };
        (a, tail.lines())
    }
}

/// Remove the setup's checkpoints, each reported; whether every one was
/// verified gone.
fn remove_checkpoints(s: &mut super::setup::SetupRun, reporter: &dyn SuiteReporter) -> bool {
    let mut all = true;
    for r in s.remove_checkpoints() {
        all &= r.verified;
        reporter.event(&SuiteEvent::CheckpointRemoved(r));
    }
    all
}

/// An error as `rfs run` prints it (with the script's source span).
fn render(e: rfs_evidence::error::Error) -> String {
    format!("{:?}", miette::Report::new(e))
}

fn millis(since: Instant) -> u64 {
    since.elapsed().as_millis().try_into().unwrap_or(u64::MAX)
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
