//! Folding in where the source came from: the repository, pins,
//! resyncs, collected and put files.

use super::{ArtifactRow, Pin, Resync, RunSummary};
use crate::events::Event;

impl RunSummary {
    /// Fold in a source event: the repository, its digest kind, a pin, a
    /// resync.
    pub(super) fn apply_source(&mut self, e: &Event) {
        match e {
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
            Event::SourceVerify(crate::events::SourceVerified { archive_digest, .. }) => {
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
            Event::SourceResync(crate::events::SourceResynced {
                from_commit,
                commit,
                shipped,
                ..
            }) => self.resyncs.push(Resync {
                from_commit: from_commit.clone(),
                commit: commit.clone(),
                shipped: *shipped,
            }),
            _ => {}
        }
    }

    /// Fold in what `collect()` or `put()` moved.
    pub(super) fn apply_artifact(&mut self, e: &Event) {
        match e {
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
            Event::ArtifactAbsent(a) => {
                self.artifacts.push(ArtifactRow::Absent {
                    path: a.path.clone(),
                    optional: a.optional,
                    step: a.step.clone(),
                });
                if let (false, Some(name)) = (a.optional, &a.step) {
                    self.fail_for_missing(name, &a.path);
                }
            }
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
            _ => {}
        }
    }
}
