//! Setup once, fork per proof (#36), as journaled: a sandbox's state
//! recorded by `checkpoint(name)` (`checkpoint`), removed again
//! (`checkpoint.removed`), a run's sandbox started from one
//! (`placement.forked`) and its source bound from it without shipping
//! the tree again (`source.from_checkpoint`).

use serde::{Deserialize, Serialize};

use super::FileDigest;

/// `checkpoint`: the state of sandbox `sandbox_id` after the steps so
/// far, kept by the provider as `checkpoint_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpointed {
    /// The name the script gave (`setup` for the implicit one).
    pub name: String,
    pub checkpoint_id: String,
    pub provider: String,
    pub sandbox_id: String,
    /// How the provider keeps it (a frozen copy of the sandbox's folders,
    /// a committed image, a forked sandbox).
    pub how: String,
    /// The journal's head just before this fact: everything that ran
    /// before the checkpoint, hash-chained.
    pub journal_head: String,
    /// Lines of the journal before this fact.
    pub journal_lines: u64,
    /// The source pin in force (absent: no source bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tree_digest: Option<String>,
    /// Made by rfs at the end of a suite's setup that made none.
    pub implicit: bool,
    pub ms: u64,
}

/// `checkpoint.removed`: a checkpoint removed, and whether it was
/// verified gone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRemoved {
    pub checkpoint_id: String,
    pub verified: bool,
    /// How it was verified, or why it could not be.
    pub detail: String,
}

/// `placement.forked`: the run's sandbox started from checkpoint
/// `checkpoint_id` of the setup run `setup_run_id`, whose journal (up to
/// `setup_journal_head`) is carried in the bundle as `setup/journal.jsonl`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forked {
    pub sandbox_id: String,
    pub checkpoint_id: String,
    pub checkpoint_name: String,
    pub provider: String,
    pub setup_run_id: String,
    /// The setup journal's head just before its `checkpoint` fact.
    pub setup_journal_head: String,
    /// The setup run's journal, copied into this bundle.
    pub setup_journal: FileDigest,
    /// How the fork was made (`overlayfs over the checkpoint`, `a copy
    /// of the checkpoint (overlayfs not possible here: ...)`, ...).
    pub how: String,
    pub fork_ms: u64,
    /// The caches the setup run had mounted before its checkpoint: what
    /// they held came from earlier runs, not from a commit, and the fork
    /// inherits its effect, so this run is not reproducible either.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub setup_caches: Vec<SetupCache>,
}

/// A cache the setup run had mounted before the checkpoint a run forked
/// (its `cache.mount` fact: name, path in the sandbox, sha256 at mount).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SetupCache {
    pub name: String,
    pub path: String,
    pub sha256: String,
}

/// The caches a setup journal's `events` mounted before its checkpoint
/// `checkpoint_id` (none when it has no such checkpoint).
pub fn caches_before(events: &[super::Event], checkpoint_id: &str) -> Vec<SetupCache> {
    let mut caches = vec![];
    for e in events {
        match e {
            super::Event::CacheMount {
                name, path, sha256, ..
            } => caches.push(SetupCache {
                name: name.clone(),
                path: path.clone(),
                sha256: sha256.clone(),
            }),
            super::Event::Checkpoint(c) if c.checkpoint_id == checkpoint_id => return caches,
            _ => {}
        }
    }
    vec![]
}

/// `source.from_checkpoint`: the source bound from the checkpoint the
/// sandbox started from (its tree is already there; nothing shipped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceFromCheckpoint {
    pub sandbox_id: String,
    pub checkpoint_id: String,
    pub commit: String,
    pub tree_digest: String,
    pub files: usize,
    pub workdir: String,
}

#[cfg(test)]
pub(crate) fn samples() -> Vec<super::Event> {
    use super::Event;
    let s = |x: &str| x.to_owned();
    vec![
        Event::Checkpoint(Checkpointed {
            name: s("deps"),
            checkpoint_id: s("cp-1"),
            provider: s("local"),
            sandbox_id: s("local-1"),
            how: s("a frozen copy of the sandbox's home and /tmp"),
            journal_head: s("4ead"),
            journal_lines: 12,
            commit: Some(s("c0ffee")),
            tree_digest: Some(s("7ree")),
            implicit: false,
            ms: 40,
        }),
        Event::CheckpointRemoved(CheckpointRemoved {
            checkpoint_id: s("cp-1"),
            verified: true,
            detail: s("its folder is gone"),
        }),
        Event::PlacementForked(Forked {
            sandbox_id: s("local-2"),
            checkpoint_id: s("cp-1"),
            checkpoint_name: s("deps"),
            provider: s("local"),
            setup_run_id: s("r0"),
            setup_journal_head: s("4ead"),
            setup_journal: FileDigest {
                path: s("setup/journal.jsonl"),
                sha256: "0".repeat(64),
                bytes: 1,
            },
            how: s("overlayfs over the checkpoint"),
            fork_ms: 9,
            setup_caches: vec![SetupCache {
                name: s("pip"),
                path: s("~/.cache/pip"),
                sha256: "1".repeat(64),
            }],
        }),
        Event::SourceFromCheckpoint(SourceFromCheckpoint {
            sandbox_id: s("local-2"),
            checkpoint_id: s("cp-1"),
            commit: s("c0ffee"),
            tree_digest: s("7ree"),
            files: 3,
            workdir: s("/home/src"),
        }),
    ]
}
