//! The one typed fold of a run's journal. EVIDENCE.md, the `--json`
//! summary and the attestation are views of a [`RunSummary`]: none of
//! them folds the events itself, and outcomes are enums, never strings
//! compared by hand.

use std::collections::BTreeMap;

use crate::events::{BundleManifest, Event};
pub use crate::outcome::{AssertionOutcome, RunOutcome, StepOutcome};

/// One step of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub name: String,
    pub command: String,
    /// Relative to the synced root, `""` for the root.
    pub cwd: String,
    pub allow_failure: bool,
    /// The last attempt's exit code.
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub attempts: u32,
    pub duration_ms: u64,
    /// The commit the step ran under.
    pub commit: Option<String>,
    /// Log files (relative to the bundle), in attempt order.
    pub logs: Vec<String>,
    /// The digest of the last attempt's stdout (`None`: no attempt ran;
    /// an attempt that printed nothing has the empty text's digest).
    pub stdout_sha256: Option<String>,
    /// The last provider error (cleared by a later attempt that ran).
    pub provider_error: Option<String>,
    /// The source workdir (the synced root) when the step started.
    pub workdir: Option<String>,
    /// What the last attempt printed last.
    pub output_tail: Option<crate::events::OutputTail>,
    /// What the step used (memory peak, processes, disk), where the
    /// provider says.
    pub usage: Option<crate::events::sandbox_facts::Usage>,
    pub outcome: StepOutcome,
}

impl StepRecord {
    /// A step that has not run any attempt.
    fn new(name: &str, cwd: &str, outcome: StepOutcome) -> StepRecord {
        StepRecord {
            name: name.to_owned(),
            command: String::new(),
            cwd: cwd.to_owned(),
            allow_failure: false,
            exit: None,
            timed_out: false,
            attempts: 0,
            duration_ms: 0,
            commit: None,
            logs: vec![],
            stdout_sha256: None,
            provider_error: None,
            workdir: None,
            output_tail: None,
            usage: None,
            outcome,
        }
    }
}

/// The SHA-256 of no bytes: the stdout digest of an attempt that printed
/// nothing.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// One binding of the source (`source.pin`; a re-sync adds one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub commit: String,
    pub tree_digest: String,
    pub archive_sha256: String,
    pub files: usize,
    pub workdir: String,
}

/// `rfs bisect`'s record: the range, each commit tested, the finding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bisect {
    pub good: String,
    pub bad: String,
    pub commits: usize,
    /// (commit, result, reason) in the order tested.
    pub tested: Vec<(String, crate::events::BisectResult, Option<String>)>,
    pub first_changed: Option<String>,
    /// Set when skipped commits hide the change.
    pub candidates: Vec<String>,
    pub ended: bool,
    /// The results at `good` and `bad` (set at the end).
    pub ends: Option<(crate::events::BisectResult, crate::events::BisectResult)>,
    /// The commit found, described.
    pub found: Option<crate::events::BisectFoundCommit>,
    /// Every commit with a result at the end (all lanes'), oldest first.
    pub results: Vec<crate::events::BisectTested>,
}

/// A re-sync: from commit, to commit, files shipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resync {
    pub from_commit: String,
    pub commit: String,
    pub shipped: usize,
}

/// A terminal session's recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    pub session: u32,
    pub command: String,
    pub path: String,
    /// How the session ended (`attach.end`'s `how`), and its exit code.
    pub ended: Option<(String, Option<i32>)>,
    /// The recording as closed (`attach.end`'s digested file): what a
    /// view may read, since `rfs verify` checked it.
    pub closed: Option<String>,
}

/// One `assert_screen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    pub session: u32,
    /// 1-based, per session.
    pub assert: u32,
    /// What was expected (redacted).
    pub pattern: String,
    pub outcome: AssertionOutcome,
    pub elapsed_ms: u64,
    /// The digest of the screen it saw.
    pub screen_digest: String,
    /// The screen's text snapshot file, if written.
    pub snapshot: Option<String>,
}

/// The most `print()` lines a summary keeps (the journal keeps them all).
pub const MAX_PRINTS: usize = 200;

/// How the run's sandbox was cleaned up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    NoSandbox,
    Kept {
        sandbox_id: String,
    },
    Verified {
        sandbox_id: String,
        why: String,
        inventory_count: usize,
        polls: u32,
        elapsed_ms: u64,
        /// `false`: it was already gone (rfs claims no destroy).
        destroyed_by_rfs: bool,
    },
    NotVerified {
        sandbox_id: String,
        error: String,
    },
}

/// A file of the bundle the run executed (script, static or run-time
/// module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledFile {
    pub path: String,
    pub sha256: String,
}

/// Everything the views show, folded from the journal's events in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunSummary {
    pub run_id: String,
    pub script: String,
    pub out_dir: String,
    pub rfs_version: String,
    pub provider: String,
    pub provider_reason: String,
    pub sandbox_id: Option<String>,
    /// The isolation in force and why.
    pub isolation: Option<String>,
    /// The sandbox's environment by content (image id, host fingerprint).
    pub environment: Option<crate::events::Environment>,
    pub labels: Vec<(String, String)>,
    /// The first repository resolved.
    pub repo: Option<String>,
    /// Every pin, in order: the first is what the run synced, the last
    /// what its sandbox holds now.
    pub pins: Vec<Pin>,
    /// What kind of digest the archive digest is (`source.verify`).
    pub archive_digest_kind: Option<crate::events::DigestKind>,
    pub resyncs: Vec<Resync>,
    pub steps: Vec<StepRecord>,
    pub recordings: Vec<Recording>,
    /// The bundled script's digest (absent in the REPL).
    pub script_sha256: Option<String>,
    /// The script, then every module it loaded (static and run-time).
    pub bundle: Vec<BundledFile>,
    pub cleanup: Option<Cleanup>,
    /// The sandbox user's home directory.
    pub home: Option<String>,
    /// Every `assert_screen`, in order.
    pub assertions: Vec<Assertion>,
    /// The script's `print()` lines (the first [`MAX_PRINTS`]).
    pub prints: Vec<String>,
    /// `print()` lines past [`MAX_PRINTS`].
    pub prints_elided: usize,
    /// What was refused, and why, in order.
    pub refusals: Vec<String>,
    /// Set by `rfs bisect`.
    pub bisect: Option<Bisect>,
    /// What `collect()` and `put()` moved, in order (`artifact.*`).
    pub artifacts: Vec<ArtifactRow>,
    /// Background processes `spawn()` started (`spawn.*`).
    pub spawns: Vec<super::spawns::SpawnRow>,
    /// Service containers `service()` started (`service.*`).
    pub services: Vec<super::services::ServiceRow>,
    /// Caches the run mounted (`cache.*`).
    pub caches: Vec<super::caches::CacheRow>,
    /// The network policy and every connection through rfs's proxy.
    pub network: super::network_view::NetworkSummary,
    /// Set when `--allow-dirty` shipped a working tree (the first one).
    pub not_reproducible: Option<crate::events::WorkingTreeShipped>,
    /// `None` while the run has not ended.
    pub outcome: Option<RunOutcome>,
    pub reason: Option<String>,
}

/// What `collect()` or `put()` moved (`artifact.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactRow {
    Collected {
        path: String,
        files: Vec<crate::events::FileDigest>,
        links: Vec<crate::events::ArtifactLink>,
        skipped: Vec<String>,
        bytes: u64,
        /// Set for a JUnit report (`collect(path, #{ junit: true })`).
        junit: Option<crate::events::JunitCounts>,
    },
    Put {
        local: String,
        path: String,
        sha256: String,
        bytes: u64,
        bundled: Option<String>,
    },
}

impl RunSummary {
    /// `rfs bisect`'s facts.
    fn apply_bisect(&mut self, e: &Event) {
        match e {
            Event::BisectStart { good, bad, commits } => {
                self.bisect = Some(Bisect {
                    good: good.clone(),
                    bad: bad.clone(),
                    commits: *commits,
                    ..Bisect::default()
                });
            }
            Event::BisectCommit {
                commit,
                result,
                reason,
            } => {
                if let Some(b) = &mut self.bisect {
                    b.tested.push((commit.clone(), *result, reason.clone()));
                }
            }
            Event::BisectEnd {
                good_result,
                bad_result,
                first_changed,
                candidates,
                found,
                results,
                ..
            } => {
                if let Some(b) = &mut self.bisect {
                    b.first_changed.clone_from(first_changed);
                    b.candidates.clone_from(candidates);
                    b.ended = true;
                    b.ends = Some((*good_result, *bad_result));
                    b.found.clone_from(found);
                    b.results.clone_from(results);
                }
            }
            _ => {}
        }
    }

    /// The fold of `events`.
    pub fn of<'a>(events: impl IntoIterator<Item = &'a Event>) -> RunSummary {
        let mut s = RunSummary::default();
        for e in events {
            s.apply(e);
        }
        s
    }

    /// What failed first: the first step that failed the run (with its
    /// index) and the first screen assertion that failed.
    /// None for `rfs bisect`: a failing step is a result it looks for.
    pub fn first_failures(&self) -> (Option<(usize, &StepRecord)>, Option<&Assertion>) {
        if self.bisect.is_some() {
            return (None, None);
        }
        let step = self
            .steps
            .iter()
            .enumerate()
            .find(|(_, st)| st.outcome.failed_the_run());
        let assertion = self.assertions.iter().find(|a| a.outcome.is_failure());
        (step, assertion)
    }

    /// The pin the sandbox holds now.
    pub fn pin(&self) -> Option<&Pin> {
        self.pins.last()
    }

    /// The newest step of that name that has not ended.
    fn open_step(&mut self, name: &str) -> Option<&mut StepRecord> {
        self.steps
            .iter_mut()
            .rev()
            .find(|s| s.name == name && s.outcome.is_open())
    }

    /// Fold one event in.
    pub fn apply(&mut self, e: &Event) {
        match e {
            Event::RunStart {
                run_id,
                script,
                out_dir,
                provider,
                provider_reason,
                rfs_version,
                bundle,
                ..
            } => {
                self.run_id.clone_from(run_id);
                self.script.clone_from(script);
                self.out_dir.clone_from(out_dir);
                self.provider.clone_from(provider);
                self.provider_reason.clone_from(provider_reason);
                self.rfs_version.clone_from(rfs_version);
                if let Some(b) = bundle {
                    self.script_sha256 = Some(b.script.sha256.clone());
                    self.bundle = bundled(b);
                }
            }
            Event::ArtifactCollected {
                path,
                files,
                links,
                skipped,
                bytes,
                junit,
                ..
            } => self.artifacts.push(ArtifactRow::Collected {
                path: path.clone(),
                files: files.clone(),
                links: links.clone(),
                skipped: skipped.clone(),
                bytes: *bytes,
                junit: *junit,
            }),
            Event::ArtifactPut {
                local,
                path,
                sha256,
                bytes,
                bundled,
            } => self.artifacts.push(ArtifactRow::Put {
                local: local.clone(),
                path: path.clone(),
                sha256: sha256.clone(),
                bytes: *bytes,
                bundled: bundled.clone(),
            }),
            Event::NetConnect(c) => self.network.connections.push(c.clone()),
            Event::BundleModule { path, sha256, .. } => self.bundle.push(BundledFile {
                path: path.clone(),
                sha256: sha256.clone(),
            }),
            Event::Placement {
                provider,
                sandbox_id,
                labels,
                isolation,
                home,
                environment,
                ..
            } => {
                self.environment = environment.as_deref().cloned();
                self.provider.clone_from(provider);
                self.sandbox_id = Some(sandbox_id.clone());
                self.home = Some(home.clone());
                self.isolation = isolation.as_ref().map(|i| i.describe());
                self.network.policy = isolation.as_ref().and_then(|i| i.network_policy.clone());
                self.labels = labels_of(labels);
            }
            Event::SourceResolved {
                repo, working_tree, ..
            } => {
                if self.repo.is_none() {
                    self.repo = Some(repo.clone());
                }
                if self.not_reproducible.is_none() {
                    self.not_reproducible.clone_from(working_tree);
                }
            }
            Event::BisectStart { .. } | Event::BisectCommit { .. } | Event::BisectEnd { .. } => {
                self.apply_bisect(e)
            }
            Event::SourceVerify { archive_digest, .. } => {
                self.archive_digest_kind = Some(*archive_digest);
            }
            Event::SourcePin {
                commit,
                tree_digest,
                archive_sha256,
                files,
                workdir,
                ..
            } => self.pins.push(Pin {
                commit: commit.clone(),
                tree_digest: tree_digest.clone(),
                archive_sha256: archive_sha256.clone(),
                files: *files,
                workdir: workdir.clone(),
            }),
            Event::SourceResync {
                from_commit,
                commit,
                shipped,
                ..
            } => self.resyncs.push(Resync {
                from_commit: from_commit.clone(),
                commit: commit.clone(),
                shipped: *shipped,
            }),
            Event::CacheMount { .. } | Event::CacheEnd { .. } => {
                super::caches::apply(&mut self.caches, e)
            }
            Event::SpawnStart { .. }
            | Event::SpawnReady { .. }
            | Event::SpawnWaitFailed { .. }
            | Event::SpawnEnd { .. } => super::spawns::apply(&mut self.spawns, e),
            Event::ServiceStart { .. }
            | Event::ServiceReady { .. }
            | Event::ServiceWaitFailed { .. }
            | Event::ServiceEnd { .. } => {
                if let Some(row) = super::services::apply(&mut self.services, e) {
                    self.services.push(row);
                }
            }
            Event::StepStart { .. }
            | Event::StepAttempt { .. }
            | Event::StepProviderError { .. }
            | Event::StepRefused { .. }
            | Event::StepEnd { .. } => self.apply_step(e),
            Event::AttachStart { .. }
            | Event::AttachEnd { .. }
            | Event::AttachAssert { .. }
            | Event::Print { .. }
            | Event::Refused { .. } => self.apply_shown(e),
            Event::CleanupNone { .. }
            | Event::CleanupKept { .. }
            | Event::CleanupVerified { .. }
            | Event::CleanupFailed { .. } => self.cleanup = cleanup_of(e),
            Event::RunEnd {
                outcome, reason, ..
            } => {
                let run = RunOutcome::parse(outcome);
                for row in self.steps.iter_mut().filter(|s| s.outcome.is_open()) {
                    row.outcome = match &row.provider_error {
                        Some(error) => StepOutcome::ProviderFailed {
                            error: error.clone(),
                        },
                        None => StepOutcome::Unfinished { run },
                    };
                }
                self.reason.clone_from(reason);
                self.outcome = Some(run);
            }
            _ => {}
        }
    }

    /// Fold in what the script showed or was refused: terminal
    /// sessions and their assertions, `print()` lines, refusals.
    fn apply_shown(&mut self, e: &Event) {
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

    /// Fold one step event in (a step's rows: started, attempts, end).
    fn apply_step(&mut self, e: &Event) {
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
                ..
            } => {
                if let Some(row) = self.open_step(name) {
                    row.output_tail.clone_from(output_tail);
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
            } => {
                if let Some(row) = self.open_step(name) {
                    row.output_tail.clone_from(output_tail);
                    row.attempts = *attempt;
                    row.exit = None;
                    row.duration_ms += duration_ms;
                    row.provider_error = Some(error.clone());
                    row.logs.extend(logs(stdout_log, stderr_log));
                }
            }
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
            _ => {}
        }
    }
}

fn bundled(b: &BundleManifest) -> Vec<BundledFile> {
    std::iter::once(&b.script)
        .chain(&b.modules)
        .map(|f| BundledFile {
            path: f.path.clone(),
            sha256: f.sha256.clone(),
        })
        .collect()
}

fn labels_of(labels: &BTreeMap<String, String>) -> Vec<(String, String)> {
    labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
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

/// How a cleanup event leaves the sandbox (`None` for any other event).
fn cleanup_of(e: &Event) -> Option<Cleanup> {
    match e {
        Event::CleanupNone { .. } => Some(Cleanup::NoSandbox),
        Event::CleanupKept { sandbox_id, .. } => Some(Cleanup::Kept {
            sandbox_id: sandbox_id.clone(),
        }),
        Event::CleanupVerified {
            sandbox_id,
            why,
            inventory_count,
            polls,
            elapsed_ms,
            saw_present_before,
            ..
        } => Some(Cleanup::Verified {
            sandbox_id: sandbox_id.clone(),
            why: why.clone(),
            inventory_count: *inventory_count,
            polls: *polls,
            elapsed_ms: *elapsed_ms,
            destroyed_by_rfs: *saw_present_before,
        }),
        Event::CleanupFailed {
            sandbox_id, error, ..
        } => Some(Cleanup::NotVerified {
            sandbox_id: sandbox_id.clone(),
            error: error.clone(),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::catalog::samples;

    #[test]
    fn every_kind_folds_and_outcomes_are_typed() {
        let s = RunSummary::of(&samples());
        assert_eq!(s.outcome, Some(RunOutcome::Failed));
        assert!(!s.steps.is_empty());
        assert!(s.steps.iter().all(|st| !st.outcome.is_open()));
    }

    #[test]
    fn the_empty_digest_is_the_sha256_of_no_bytes() {
        use sha2::Digest as _;
        assert_eq!(EMPTY_SHA256, hex::encode(sha2::Sha256::digest(b"")));
    }

    #[test]
    fn an_unknown_run_outcome_is_an_error_not_a_success() {
        assert_eq!(RunOutcome::parse("completed!"), RunOutcome::Error);
        for o in [
            RunOutcome::Completed,
            RunOutcome::Failed,
            RunOutcome::Refused,
            RunOutcome::Interrupted,
            RunOutcome::Error,
        ] {
            assert_eq!(RunOutcome::parse(o.as_str()), o);
        }
    }
}
