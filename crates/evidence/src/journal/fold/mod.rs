//! The one typed fold of a run's journal. EVIDENCE.md, the `--json`
//! summary and the attestation are views of a [`RunSummary`]: none of
//! them folds the events itself, and outcomes are enums, never strings
//! compared by hand.

use std::collections::BTreeMap;

use crate::events::{BundleManifest, Event};
pub use crate::outcome::{AssertionOutcome, RunOutcome, StepOutcome};

mod bisect;
mod records;
mod shown;
mod sources;
mod steps;

pub use records::{
    absent_why, ArtifactRow, Assertion, Bisect, BundledFile, Cleanup, Pin, Recording, Resync,
    StepRecord, EMPTY_SHA256, MAX_PRINTS,
};

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
    /// Host folders the person mounted read-only (`host.mount`).
    pub host_mounts: Vec<crate::events::host_mount_facts::HostMounted>,
    /// Checkpoints made, and the one the sandbox started from.
    pub checkpoints: super::checkpoints::Checkpoints,
    /// The network policy and every connection through rfs's proxy.
    pub network: super::network_view::NetworkSummary,
    /// Set when `--allow-dirty` shipped a working tree (the first one).
    pub not_reproducible: Option<crate::events::WorkingTreeShipped>,
    /// `None` while the run has not ended.
    pub outcome: Option<RunOutcome>,
    pub reason: Option<String>,
}

impl RunSummary {
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
            Event::NetConnect(c) => self.network.connections.push(c.clone()),
            Event::BundleModule { path, sha256, .. } => self.bundle.push(BundledFile {
                path: path.clone(),
                sha256: sha256.clone(),
            }),
            Event::Placement { .. } => self.apply_placement(e),
            Event::SourceResolved { .. }
            | Event::SourceVerify(..)
            | Event::SourcePin { .. }
            | Event::SourceResync(..) => self.apply_source(e),
            Event::ArtifactCollected { .. }
            | Event::ArtifactPut { .. }
            | Event::ArtifactAbsent(..) => self.apply_artifact(e),
            Event::BisectStart { .. } | Event::BisectCommit { .. } | Event::BisectEnd { .. } => {
                self.apply_bisect(e)
            }
            Event::HostMount(m) => self.host_mounts.push(m.clone()),
            Event::CacheMount { .. } | Event::CacheEnd { .. } => {
                super::caches::apply(&mut self.caches, e)
            }
            Event::Checkpoint(..)
            | Event::CheckpointRemoved(..)
            | Event::PlacementForked(..)
            | Event::SourceFromCheckpoint(..) => self.checkpoints.apply(e),
            Event::SpawnStart { .. }
            | Event::SpawnReady { .. }
            | Event::SpawnWaitFailed { .. }
            | Event::SpawnEnd { .. } => super::spawns::apply(&mut self.spawns, e),
            Event::ServiceStart { .. }
            | Event::ServiceReady { .. }
            | Event::ServiceWaitFailed { .. }
            | Event::ServiceEnd { .. } => super::services::apply(&mut self.services, e),
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

    /// Fold in where the run's sandbox was placed.
    fn apply_placement(&mut self, e: &Event) {
        if let Event::Placement {
            provider,
            sandbox_id,
            labels,
            isolation,
            home,
            environment,
            ..
        } = e
        {
            self.environment = environment.as_deref().cloned();
            self.provider.clone_from(provider);
            self.sandbox_id = Some(sandbox_id.clone());
            self.home = Some(home.clone());
            self.isolation = isolation.as_ref().map(|i| i.describe());
            self.network.policy = isolation.as_ref().and_then(|i| i.network_policy.clone());
            self.labels = labels_of(labels);
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

/// How a cleanup event leaves the sandbox (`None` for any other event).
fn cleanup_of(e: &Event) -> Option<Cleanup> {
    match e {
        Event::CleanupNone { .. } => Some(Cleanup::NoSandbox),
        Event::CleanupKept { sandbox_id, reason } => Some(Cleanup::Kept {
            sandbox_id: sandbox_id.clone(),
            reason: reason.clone(),
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
