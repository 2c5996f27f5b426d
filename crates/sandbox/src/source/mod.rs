//! Source binding: resolve a commit once, ship exactly its tree, verify it.
//!
//! - [`repo`] finds the repository and decides what may ship (refusals for
//!   missing repos, empty history, dirty trees and submodules).
//! - [`manifest`] is the expected file set and content of a tree.
//! - [`archive`] streams the tree from the object database into a tar (a
//!   file, or [`stream`] to a provider that reads it while it is built).
//! - [`remote_check`] extracts and verifies inside the sandbox (POSIX
//!   tools); [`native_check`] does the same as rfs's own executable where
//!   the provider can run it ([`native_extract`], [`native_read_back`],
//!   [`native_walk`]).

pub mod allowed_repos;
pub mod archive;
pub mod archive_digest;
pub mod delta;
pub mod manifest;
pub mod native_check;
pub mod native_extract;
pub mod native_read_back;
pub mod native_walk;
pub mod own_outputs;
pub mod pack_stream;
pub mod remote_check;
pub mod repo;
pub mod resync_remote;
pub mod stream;
pub mod working_tree;

use std::path::PathBuf;

/// The deepest folder nesting rfs ships: a tree is walked recursively
/// (a commit with a folder 500 levels deep overflowed the archive
/// thread's stack and aborted rfs mid-run), and is refused when it
/// resolves, before any sandbox exists. libgit2's status scan refuses a
/// working tree nested 100 levels deep already, so a checked-out tree
/// never reaches this bound; a commit shipped by its id may.
pub const MAX_TREE_DEPTH: usize = 100;

/// A [`SourceError::TooDeep`] for `path` (its first 200 bytes).
pub fn too_deep(path: &[u8], depth: usize) -> SourceError {
    let shown = String::from_utf8_lossy(&path[..path.len().min(200)]).into_owned();
    SourceError::TooDeep {
        path: shown,
        depth,
        max: MAX_TREE_DEPTH,
    }
}

/// How submodules are treated.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SubmodulePolicy {
    /// Refuse to sync a tree that contains submodules (default).
    #[default]
    Refuse,
    /// Ship each initialised submodule's pinned commit.
    Include,
}

/// What `sync_source(opts)` asks for.
#[derive(Debug, Clone)]
pub struct SourceOptions {
    /// Directory whose repository is synced (default: where rfs started).
    pub repo: PathBuf,
    /// Revision to resolve once (default `HEAD`).
    pub rev: String,
    /// Optional subdirectory of the commit's tree that becomes the synced root.
    pub subdir: Option<String>,
    pub allow_dirty: bool,
    /// `--allow-dirty`: when `rev` is `HEAD` and the working tree has
    /// changes, ship the working tree itself (see [`working_tree`]).
    pub working_tree: bool,
    pub submodules: SubmodulePolicy,
    /// Destination directory, relative to the sandbox home.
    pub dest: String,
    /// What the person named on the command line for rfs to write: not
    /// dirt while untracked (see [`own_outputs`]).
    pub own_outputs: Vec<own_outputs::OwnOutput>,
}

impl SourceOptions {
    pub fn new(repo: PathBuf) -> Self {
        SourceOptions {
            repo,
            rev: "HEAD".into(),
            subdir: None,
            allow_dirty: false,
            working_tree: false,
            submodules: SubmodulePolicy::Refuse,
            dest: "relayflows-source".into(),
            own_outputs: vec![],
        }
    }
}

/// Why a source could not be bound. Every variant is a refusal.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("{dir} is not inside a git repository, so there is no source to bind")]
    NotARepo { dir: String },
    #[error("repository {repo} has no commits yet; commit something before syncing")]
    NoCommits { repo: String },
    #[error("revision `{rev}` does not resolve to a commit: {message}")]
    BadRevision { rev: String, message: String },
    #[error("the working tree has uncommitted or untracked changes, which would not be synced: {}{}", list(.paths), " (commit them; or run with --allow-dirty to ship the working tree as it is, marked not reproducible; or pass sync_source allow_dirty: true to ship the committed tree anyway)")]
    Dirty { paths: Vec<String> },
    #[error("the tree contains submodules, which `git archive` would silently omit: {} (pass submodules: \"include\" to ship their pinned commits)", list(.paths))]
    Submodules { paths: Vec<String> },
    #[error("the included submodules contain submodules themselves, which rfs does not ship: {}", list(.paths))]
    NestedSubmodules { paths: Vec<String> },
    #[error("submodule {path} is not initialised here, so its pinned commit {commit} cannot be shipped (run `git submodule update --init`)")]
    SubmoduleNotInitialised { path: String, commit: String },
    #[error("subdirectory `{path}` is not a directory in commit {commit}")]
    BadSubdir { path: String, commit: String },
    #[error("sync_source rev {rev:?} is not a revision: give a commit id, branch, tag or expression such as HEAD~1 (no spaces, not starting with `-`)")]
    NotARevision { rev: String },
    #[error("{path} changed but was not shipped")]
    NotShipped { path: String },
    #[error("the tree has a folder {depth} levels deep ({path}…); rfs ships trees at most {max} levels deep")]
    TooDeep {
        path: String,
        depth: usize,
        max: usize,
    },
    #[error("git: {0}")]
    Git(String),
    #[error("building the source archive: {0}")]
    Io(String),
    /// The sandbox stopped reading a streamed archive: a consequence of
    /// its own failure, which says why.
    #[error("building the source archive: {}", stream::READER_GONE)]
    ReaderGone,
}

fn list(paths: &[String]) -> String {
    const MAX: usize = 20;
    let mut s = paths
        .iter()
        .take(MAX)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > MAX {
        s.push_str(&format!(" … and {} more", paths.len() - MAX));
    }
    s
}

impl From<git2::Error> for SourceError {
    fn from(e: git2::Error) -> Self {
        SourceError::Git(e.message().to_owned())
    }
}

impl From<std::io::Error> for SourceError {
    fn from(e: std::io::Error) -> Self {
        if stream::reader_gone(&e) {
            return SourceError::ReaderGone;
        }
        SourceError::Io(e.to_string())
    }
}

/// Render a git path (bytes) for humans: UTF-8 where valid, escapes otherwise.
pub fn display_path(p: &[u8]) -> String {
    let s = String::from_utf8_lossy(p);
    if s.chars().any(|c| c.is_control()) {
        format!("{:?}", s)
    } else {
        s.into_owned()
    }
}
