//! Finding the repository, resolving the revision once, and deciding what
//! may ship: dirty trees and submodules are explicit decisions.

use std::os::unix::ffi::OsStrExt as _;
use std::path::{Path, PathBuf};

use git2::{ObjectType, Oid, Repository, StatusOptions, TreeWalkMode, TreeWalkResult};

use super::{SourceError, SourceOptions, SubmodulePolicy};

/// A submodule shipped at its pinned commit.
#[derive(Debug, Clone)]
pub struct PinnedSubmodule {
    /// Path relative to the synced root.
    pub path: String,
    pub commit: Oid,
    /// The initialised submodule's git directory.
    pub repo_path: PathBuf,
}

/// The revision resolved once; everything after uses only these ids.
#[derive(Debug, Clone)]
pub struct ResolvedSource {
    /// Repository working directory (or git dir for a bare repository).
    pub repo_root: PathBuf,
    pub commit: Oid,
    /// The synced tree: the commit's root tree or the `subdir` subtree.
    pub tree: Oid,
    pub subdir: Option<String>,
    /// Dirty paths shipped around (only with `allow_dirty`).
    pub dirty: Vec<String>,
    /// `--allow-dirty`: `commit` is a snapshot of the working tree on top
    /// of this commit, holding the uncommitted paths [`Self::uncommitted`].
    pub working_tree_of: Option<Oid>,
    pub uncommitted: Vec<String>,
    pub submodules: Vec<PinnedSubmodule>,
    /// Untracked paths that are rfs's own outputs the person named on
    /// the command line (see [`super::own_outputs`]): not dirt, not
    /// shipped.
    pub own_outputs_ignored: Vec<String>,
}

/// Find the repository containing `dir`.
pub fn discover(dir: &Path) -> Result<Repository, SourceError> {
    Repository::discover(dir).map_err(|_| SourceError::NotARepo {
        dir: dir.display().to_string(),
    })
}

/// The repository's root directory (work tree, or git dir when bare).
pub fn root_of(repo: &Repository) -> PathBuf {
    repo.workdir().unwrap_or_else(|| repo.path()).to_path_buf()
}

/// Resolve `opts` into pinned ids, refusing per the fail-closed rules.
pub fn resolve(opts: &SourceOptions) -> Result<ResolvedSource, SourceError> {
    let repo = discover(&opts.repo)?;
    let root = root_of(&repo);
    if repo.head().is_err() || repo.is_empty().unwrap_or(true) {
        return Err(SourceError::NoCommits {
            repo: root.display().to_string(),
        });
    }
    let commit = repo
        .revparse_single(&opts.rev)
        .and_then(|o| o.peel_to_commit())
        .map_err(|e| SourceError::BadRevision {
            rev: opts.rev.clone(),
            message: e.message().to_owned(),
        })?;
    let mut commit_id = commit.id();
    let own = super::own_outputs::in_repo(&root, &opts.own_outputs);
    let (mut dirty, own_outputs_ignored) = dirty_paths(&repo, &own)?;
    let mut working_tree_of = None;
    let mut uncommitted = vec![];
    if opts.working_tree && opts.rev == "HEAD" && dirty.iter().any(|p| !is_settings_file(p)) {
        working_tree_of = Some(commit_id);
        commit_id = super::working_tree::snapshot(&repo, commit_id, &own_outputs_ignored)?;
        uncommitted = std::mem::take(&mut dirty);
    }
    let commit = repo.find_commit(commit_id)?;
    let root_tree = commit.tree()?;
    let tree = match &opts.subdir {
        None => root_tree.id(),
        Some(sub) => {
            let clean = sub.trim_matches('/');
            let entry =
                root_tree
                    .get_path(Path::new(clean))
                    .map_err(|_| SourceError::BadSubdir {
                        path: sub.clone(),
                        commit: commit_id.to_string(),
                    })?;
            if entry.kind() != Some(ObjectType::Tree) {
                return Err(SourceError::BadSubdir {
                    path: sub.clone(),
                    commit: commit_id.to_string(),
                });
            }
            entry.id()
        }
    };
    // An uncommitted rfs.toml is rfs's settings, read from the working
    // tree when rfs starts (and narrowing only); it is not source, so it
    // does not make the tree dirty. It is journaled among the paths not
    // shipped.
    let code: Vec<String> = dirty
        .iter()
        .filter(|p| !is_settings_file(p))
        .cloned()
        .collect();
    if !code.is_empty() && !opts.allow_dirty {
        return Err(SourceError::Dirty { paths: code });
    }
    let gitlinks = gitlinks(&repo, tree)?;
    let submodules = match (gitlinks.is_empty(), opts.submodules) {
        (true, _) => vec![],
        (false, SubmodulePolicy::Refuse) => {
            return Err(SourceError::Submodules {
                paths: gitlinks.into_iter().map(|(p, _)| p).collect(),
            })
        }
        (false, SubmodulePolicy::Include) => pin_submodules(&repo, &opts.subdir, gitlinks)?,
    };
    Ok(ResolvedSource {
        repo_root: root,
        commit: commit_id,
        tree,
        subdir: opts.subdir.as_ref().map(|s| s.trim_matches('/').to_owned()),
        dirty,
        working_tree_of,
        uncommitted,
        submodules,
        own_outputs_ignored,
    })
}

/// The name of a repository's settings file.
pub const SETTINGS_FILE: &str = "rfs.toml";

/// Whether a repository path is an `rfs.toml` (rfs's settings, not source).
fn is_settings_file(path: &str) -> bool {
    let f = SETTINGS_FILE;
    path == f || path.strip_suffix(f).is_some_and(|p| p.ends_with('/'))
}

/// Tracked files with changes and untracked files that are not ignored;
/// then the untracked ones that are rfs's own outputs (`own`, from
/// [`super::own_outputs::in_repo`]), which are not dirt.
type Dirt = (Vec<String>, Vec<String>);
fn dirty_paths(repo: &Repository, own: &[(String, bool)]) -> Result<Dirt, SourceError> {
    if repo.is_bare() {
        return Ok((vec![], vec![]));
    }
    let mut so = StatusOptions::new();
    so.include_untracked(true)
        .recurse_untracked_dirs(true)
        .include_ignored(false)
        .exclude_submodules(false);
    let statuses = repo.statuses(Some(&mut so))?;
    let index = repo.index()?;
    let (mut out, mut mine) = (vec![], vec![]);
    for s in statuses.iter() {
        if s.status().is_empty() || s.status().contains(git2::Status::IGNORED) {
            continue;
        }
        if worktree_only(s.status()) && not_a_change(&index, s.path_bytes()) {
            continue;
        }
        let path = String::from_utf8_lossy(s.path_bytes()).into_owned();
        match super::own_outputs::exempt(s.status(), &path, own) {
            true => mine.push(path),
            false => out.push(path),
        }
    }
    out.sort();
    mine.sort();
    Ok((out, mine))
}

/// Whether a status is about the working tree alone (nothing staged).
fn worktree_only(st: git2::Status) -> bool {
    let wt = git2::Status::WT_MODIFIED
        | git2::Status::WT_DELETED
        | git2::Status::WT_TYPECHANGE
        | git2::Status::WT_RENAMED;
    !st.is_empty() && wt.contains(st)
}

/// Index entries git itself does not compare with the working tree:
/// skip-worktree (sparse checkout) and assume-unchanged. `git status`
/// reports no change for them, and neither does rfs (the committed tree
/// ships from the object database anyway).
fn not_a_change(index: &git2::Index, path: &[u8]) -> bool {
    /// `GIT_INDEX_ENTRY_VALID` (assume-unchanged), in `flags`.
    const ASSUME_UNCHANGED: u16 = 0x8000;
    /// `GIT_INDEX_ENTRY_SKIP_WORKTREE`, in `flags_extended`.
    const SKIP_WORKTREE: u16 = 1 << 14;
    index
        .get_path(Path::new(std::ffi::OsStr::from_bytes(path)), 0)
        .is_some_and(|e| e.flags & ASSUME_UNCHANGED != 0 || e.flags_extended & SKIP_WORKTREE != 0)
}

/// Every gitlink (submodule entry) below `tree`, with its pinned commit;
/// a tree nested deeper than [`super::MAX_TREE_DEPTH`] is refused.
fn gitlinks(repo: &Repository, tree: Oid) -> Result<Vec<(String, Oid)>, SourceError> {
    let tree = repo.find_tree(tree)?;
    let mut out = vec![];
    let mut too_deep = None;
    let walked = tree.walk(TreeWalkMode::PreOrder, |dir, entry| {
        // A folder's depth: the folders it is in, and itself.
        let depth = dir.bytes().filter(|b| *b == b'/').count() + 1;
        if entry.kind() == Some(ObjectType::Tree) && depth > super::MAX_TREE_DEPTH {
            too_deep = Some(super::too_deep(dir.as_bytes(), depth));
            return TreeWalkResult::Abort;
        }
        if entry.kind() == Some(ObjectType::Commit) {
            let name = String::from_utf8_lossy(entry.name_bytes());
            out.push((format!("{dir}{name}"), entry.id()));
        }
        TreeWalkResult::Ok
    });
    if let Some(e) = too_deep {
        return Err(e);
    }
    walked?;
    Ok(out)
}

fn pin_submodules(
    repo: &Repository,
    subdir: &Option<String>,
    links: Vec<(String, Oid)>,
) -> Result<Vec<PinnedSubmodule>, SourceError> {
    let prefix = subdir
        .as_ref()
        .map(|s| format!("{}/", s.trim_matches('/')))
        .unwrap_or_default();
    let all = repo.submodules()?;
    let mut out = vec![];
    for (path, commit) in links {
        let full = format!("{prefix}{path}");
        let not_init = || SourceError::SubmoduleNotInitialised {
            path: full.clone(),
            commit: commit.to_string(),
        };
        let sm = all
            .iter()
            .find(|s| s.path() == Path::new(&full))
            .ok_or_else(not_init)?;
        let sub = sm.open().map_err(|_| not_init())?;
        if sub.find_commit(commit).is_err() {
            return Err(not_init());
        }
        let nested = gitlinks(&sub, sub.find_commit(commit)?.tree_id())?;
        if !nested.is_empty() {
            return Err(SourceError::NestedSubmodules {
                paths: nested
                    .into_iter()
                    .map(|(p, _)| format!("{full}/{p}"))
                    .collect(),
            });
        }
        out.push(PinnedSubmodule {
            path,
            commit,
            repo_path: sub.path().to_path_buf(),
        });
    }
    Ok(out)
}
