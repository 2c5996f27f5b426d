//! One lane of `rfs bisect`: one run, one sandbox, the proof run once per
//! commit the search hands it, the source moved there by an incremental
//! re-sync each time. Several lanes share one [`Coordinator`].

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use super::search::{Found, Next, Search};
use crate::runtime::Run;
use crate::script::{self, Script};
use rfs_evidence::error::Error;
use rfs_evidence::events::{BisectResult, BisectTested, Event, Reporter};

/// The search, shared by the lanes.
pub(crate) struct Coordinator {
    pub commits: Vec<String>,
    /// `--skip`: commits not to test.
    pub skip: Vec<String>,
    /// The repository, to describe the commit found.
    pub repo: std::path::PathBuf,
    search: Mutex<Search>,
    changed: Condvar,
    /// A lane stopped the search (interrupt, rfs error).
    stopped: AtomicBool,
}

impl Coordinator {
    pub(crate) fn new(
        commits: Vec<String>,
        skip: Vec<String>,
        repo: std::path::PathBuf,
        trust_ends: bool,
    ) -> Coordinator {
        let search = if trust_ends {
            Search::trusting_ends(commits.len())
        } else {
            Search::new(commits.len())
        };
        Coordinator {
            search: Mutex::new(search),
            commits,
            skip,
            repo,
            changed: Condvar::new(),
            stopped: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Search> {
        self.search.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next commit for a lane, waiting while every useful one is being
    /// tested; `None` when the search is over (or stopped).
    fn next(&self) -> Option<usize> {
        let mut s = self.lock();
        loop {
            if self.stopped.load(Ordering::SeqCst) {
                return None;
            }
            match s.next() {
                Next::Test(i) => return Some(i),
                Next::Done(_) => {
                    self.changed.notify_all();
                    return None;
                }
                Next::Wait => s = self.changed.wait(s).unwrap_or_else(|p| p.into_inner()),
            }
        }
    }

    fn record(&self, i: usize, r: BisectResult) -> usize {
        let mut s = self.lock();
        s.record(i, r);
        self.changed.notify_all();
        s.tested()
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.changed.notify_all();
    }

    /// What the search found, once it is over.
    pub(crate) fn found(&self) -> Option<Found> {
        match self.lock().choose() {
            Next::Done(f) if !self.stopped.load(Ordering::SeqCst) => Some(f),
            _ => None,
        }
    }

    pub(crate) fn result(&self, i: usize) -> Option<BisectResult> {
        self.lock().result(i)
    }

    pub(crate) fn tested(&self) -> usize {
        self.lock().tested()
    }

    /// Every commit tested, oldest first (whichever lane tested it,
    /// whenever); ends taken on the person's word are not.
    pub(crate) fn results(&self) -> Vec<(usize, BisectResult)> {
        let s = self.lock();
        let last = self.commits.len() - 1;
        (0..self.commits.len())
            .filter(|&i| !(s.ends_trusted() && (i == 0 || i == last)))
            .filter_map(|i| s.result(i).map(|r| (i, r)))
            .collect()
    }

    /// `--trust-ends`: the ends were not tested.
    pub(crate) fn ends_trusted(&self) -> bool {
        self.lock().ends_trusted()
    }
}

/// Watches a lane's run for the exit code of its last failed step (125
/// means "cannot test this commit", as for `git bisect run`).
#[derive(Default)]
pub(crate) struct Watch {
    last_failed_exit: Mutex<Option<i32>>,
}

/// The exit code that skips a commit.
pub(crate) const SKIP_EXIT: i32 = 125;

impl Reporter for Watch {
    fn event(&self, event: &Event) {
        if let Event::StepEnd {
            ok: false, exit, ..
        } = event
        {
            *self
                .last_failed_exit
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = *exit;
        }
    }
}

/// The lane's body: test commits until the search is over.
pub(crate) fn body(
    coord: Arc<Coordinator>,
    watch: Arc<Watch>,
    vars: std::collections::BTreeMap<String, String>,
    good_bad: (String, String),
) -> crate::runner::Body {
    Box::new(move |run, script, engine, ast| {
        run.record(Event::BisectStart {
            good: good_bad.0.clone(),
            bad: good_bad.1.clone(),
            commits: coord.commits.len() - 1,
            ends_trusted: coord.ends_trusted(),
        })?;
        let mut first = Some(engine);
        while let Some(i) = coord.next() {
            let commit = coord.commits[i].clone();
            *watch
                .last_failed_exit
                .lock()
                .unwrap_or_else(|p| p.into_inner()) = None;
            let tested = if coord.skip.iter().any(|s| commit.starts_with(s.as_str())) {
                Ok((BisectResult::Skipped, Some("--skip".to_owned())))
            } else {
                let engine = match first.take() {
                    Some(e) => e,
                    None => script::run_engine(run, script, vars.clone())?,
                };
                test(run, script, engine, ast, &commit, &watch)
            };
            let (result, reason) = match tested {
                Ok(r) => r,
                Err(e) => {
                    coord.stop();
                    return Err(e);
                }
            };
            run.record(Event::BisectCommit {
                commit: commit.clone(),
                result,
                reason: reason.clone(),
            })?;
            let tested = coord.record(i, result);
            errln!(
                "rfs bisect: {} {}{} ({tested} tested)",
                &commit[..12.min(commit.len())],
                result.as_str(),
                reason
                    .map(|r| format!(": {}", first_line(&r)))
                    .unwrap_or_default()
            );
        }
        if let Some(found) = coord.found() {
            let (g, b) = (coord.result(0), coord.result(coord.commits.len() - 1));
            let candidates = match &found {
                Found::FirstChanged(i) => vec![*i],
                Found::OneOf(v) => v.clone(),
                _ => vec![],
            };
            run.record(Event::BisectEnd {
                good_result: g.unwrap_or(BisectResult::Skipped),
                bad_result: b.unwrap_or(BisectResult::Skipped),
                first_changed: match found {
                    Found::FirstChanged(i) => Some(coord.commits[i].clone()),
                    _ => None,
                },
                candidates: candidates
                    .iter()
                    .map(|&i| coord.commits[i].clone())
                    .collect(),
                tested: coord.tested(),
                found: match found {
                    Found::FirstChanged(i) => {
                        super::range::found_commit(&coord.repo, &coord.commits[i])
                    }
                    _ => None,
                },
                results: coord
                    .results()
                    .into_iter()
                    .map(|(i, result)| BisectTested {
                        commit: coord.commits[i].clone(),
                        result,
                    })
                    .collect(),
            })?;
        }
        Ok(())
    })
}

/// Move the source to `commit` and run the proof: its result, or the
/// error that ends the lane (an interrupt, rfs's own failure).
fn test(
    run: &Arc<Run>,
    script: &Script,
    engine: rhai::Engine,
    ast: &rhai::AST,
    commit: &str,
    watch: &Watch,
) -> Result<(BisectResult, Option<String>), Error> {
    let outcome = run
        .pin_commit(commit)
        .and_then(|()| script::execute(run, script, engine, ast));
    let e = match outcome {
        Ok(()) => return Ok((BisectResult::Passed, None)),
        Err(e) => e,
    };
    use rfs_evidence::outcome::RunOutcome;
    match e.outcome() {
        RunOutcome::Interrupted | RunOutcome::Error => Err(e),
        RunOutcome::Refused => Ok((BisectResult::Skipped, Some(e.to_string()))),
        _ if *watch
            .last_failed_exit
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            == Some(SKIP_EXIT) =>
        {
            Ok((
                BisectResult::Skipped,
                Some(format!(
                    "a step exited {SKIP_EXIT} (cannot test this commit)"
                )),
            ))
        }
        _ => Ok((BisectResult::Failed, Some(e.to_string()))),
    }
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}
