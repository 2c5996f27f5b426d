//! The facts of a source's transfer: its verification inside the
//! sandbox ([`SourceVerified`]) and a re-sync to another commit
//! ([`SourceResynced`]).

use serde::{Deserialize, Serialize};

use super::*;

/// `source.verify`: the sandbox's report on the uploaded source matched.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceVerified {
    pub sandbox_id: String,
    pub archive_sha256_local: String,
    pub archive_sha256_sandbox: String,
    pub archive_bytes: u64,
    pub entries_compared: usize,
    pub file_set_equal: bool,
    pub content_equal: bool,
    pub build_ms: u64,
    pub upload_ms: u64,
    pub verify_ms: u64,
    /// `stream` (built while the sandbox extracts) or `file`.
    pub transfer: Transfer,
    /// `gzip` or `none`.
    pub compression: Compression,
    /// Bytes sent to the sandbox (compressed size when compressed).
    #[serde(default)]
    pub wire_bytes: u64,
    /// Sum of the synced files' sizes.
    #[serde(default)]
    pub tree_bytes: u64,
    /// The whole sync: build, provisioning, transfer, verification.
    #[serde(default)]
    pub sync_ms: u64,
    /// What verified inside the sandbox: `native` (rfs's own
    /// executable) or `posix` (the shell script with POSIX tools).
    pub verifier: Verifier,
    /// Why the native verifier the provider offers was not used (it
    /// did not start in the sandbox, say): absent when it was, or when
    /// the provider offers none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verifier_fallback: Option<String>,
    /// How a streamed archive reached the verifier's standard input:
    /// `stdin` (the provider's command channel) or `fifo` (a pipe this
    /// machine shares with the sandbox); absent for a file transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_route: Option<String>,
    /// Why a faster route for the stream was tried and not taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_fallback: Option<String>,
    /// What `archive_sha256_local`/`_sandbox` are: `sha256` (of the
    /// whole tar stream) or `tar-entries-sha256` (the stream with each
    /// entry's content replaced by its SHA-256; the native verifier's).
    pub archive_digest: DigestKind,
}

/// `source.resync`: a later `sync_source()` moved the bound source to
/// another commit in the same sandbox, shipping only what differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SourceResynced {
    pub sandbox_id: String,
    /// The commit and tree the sandbox held before.
    pub from_commit: String,
    pub from_tree_digest: String,
    pub commit: String,
    pub tree_digest: String,
    /// Files and symlinks the diff between the two trees added,
    /// modified and deleted.
    pub added: usize,
    pub modified: usize,
    pub deleted: usize,
    /// Files and symlinks shipped: what the diff added or modified,
    /// plus tracked ones the sandbox held otherwise (`rewritten`: the
    /// same in both commits, but steps changed their content, mode,
    /// type or target, or removed them). Without such steps, exactly
    /// `git diff --name-status`'s A, M and T paths.
    pub shipped: usize,
    pub rewritten: usize,
    /// Files and symlinks removed because the new commit does not track
    /// them (the sandbox held them): `git diff`'s D paths.
    pub removed: usize,
    /// The paths of `shipped`, `rewritten` and `removed`, in byte order.
    #[serde(default)]
    pub shipped_paths: Vec<String>,
    #[serde(default)]
    pub rewritten_paths: Vec<String>,
    #[serde(default)]
    pub removed_paths: Vec<String>,
    /// Untracked files and symlinks (steps' outputs) left in place.
    pub kept_untracked: usize,
    pub archive_sha256_local: String,
    pub archive_sha256_sandbox: String,
    pub archive_bytes: u64,
    /// Entries of the new tree checked in the sandbox (type, mode,
    /// symlink target), and files whose content it hashed.
    pub entries_compared: usize,
    pub contents_compared: usize,
    pub inspect_ms: u64,
    pub build_ms: u64,
    pub upload_ms: u64,
    pub apply_ms: u64,
    pub sync_ms: u64,
}
