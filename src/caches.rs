//! Caches: named directories rfs keeps between runs
//! (`sandbox(#{ caches: #{ pip: "~/.cache/pip" } })`), one per
//! repository, provider and name, under `$RFS_STATE_DIR/caches/` (outside
//! any synced tree). A run holds an exclusive `flock` on each cache it
//! mounts from before its sandbox is created until after the sandbox is
//! destroyed, so concurrent runs sharing a cache take turns instead of
//! writing into it at once. Each cache's content digest is journaled at
//! mount and at the end; a cache over its size cap is emptied at the end.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};

/// The folder of every cache, under the state directory.
pub(crate) fn root(state_dir: &Path) -> PathBuf {
    state_dir.join("caches")
}

/// A cache's size cap when the person sets none (`RFS_CACHE_MAX_BYTES`).
pub(crate) const DEFAULT_MAX_BYTES: u64 = 2 * 1024 * 1024 * 1024;

/// The variable that sets every cache's size cap (bytes).
pub(crate) const MAX_BYTES_ENV: &str = "RFS_CACHE_MAX_BYTES";

/// How long a run waits for another run to release a cache.
pub(crate) const LOCK_WAIT: Duration = Duration::from_secs(600);

/// The size cap in force.
pub(crate) fn max_bytes() -> u64 {
    std::env::var(MAX_BYTES_ENV)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_MAX_BYTES)
}

/// Why a cache name is refused: one path component of letters, digits,
/// `-`, `_` and `.`, not starting with a dot, at most 64 bytes.
pub(crate) fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "cache name {name:?} is refused: a name is letters, digits, `-`, `_` and `.` (no path separator, not starting with a dot, at most 64 bytes)"
        ))
    }
}

/// The path under the sandbox's home a cache is mounted at (`~/.cache/pip`
/// → `.cache/pip`), or why it is refused: a cache lives inside the
/// sandbox user's home, nowhere else.
pub(crate) fn home_relative(name: &str, path: &str) -> Result<String, String> {
    let refuse = |why: &str| {
        Err(format!(
            "cache `{name}` at {path:?} is refused: {why} (a cache is mounted inside the sandbox's home: write it as \"~/.cache/pip\")"
        ))
    };
    let Some(rest) = path.strip_prefix("~/") else {
        return refuse("it does not start with `~/`");
    };
    let rest = rest.trim_end_matches('/');
    if rest.is_empty() {
        return refuse("it is the home itself");
    }
    if rest.contains('\0') || rest.contains(['\n', '\r']) {
        return refuse("it holds a NUL byte or a line break");
    }
    if rest
        .split('/')
        .any(|c| c.is_empty() || c == "." || c == "..")
    {
        return refuse("it has an empty, `.` or `..` component");
    }
    Ok(rest.to_owned())
}

/// The key of the repository rfs was started in: `NAME-HASH`, `HASH` of
/// its identity ([`repo_identity`]), `NAME` the last component of its
/// `origin` (else its folder's name), for a person reading `rfs cache`.
pub(crate) fn repo_key(invocation_dir: &Path) -> String {
    let (identity, name) = repo_identity(invocation_dir);
    let base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(40)
        .collect();
    let h = hex::encode(Sha256::digest(identity.as_bytes()));
    format!("{base}-{}", &h[..12])
}

/// What makes two checkouts the same project for their caches, and a
/// name for it. Not the checkout's path: an unrelated repository cloned
/// at the same path (a CI workspace) would read what another wrote, and a
/// `sitecustomize.py` left in a pip cache would run in its steps. The
/// identity is the `origin` URL the person cloned from (the checkout's
/// own `.git/config`: no committed file sets it) and the commit at the
/// root of `HEAD`'s first-parent history (two projects sharing an
/// origin by accident differ there). A repository without `origin` uses
/// its canonical path instead; a folder that is not a repository, its
/// path alone, as before. Branches and worktrees of one clone share
/// their caches; a fork cloned from another URL does not (the book's
/// caches page says what that means).
pub(crate) fn repo_identity(invocation_dir: &Path) -> (String, String) {
    let dir = std::fs::canonicalize(invocation_dir).unwrap_or_else(|_| invocation_dir.into());
    let folder_name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "root".into())
    };
    let Ok(repo) = git2::Repository::discover(&dir) else {
        return (format!("folder\0{}", dir.display()), folder_name(&dir));
    };
    let top = repo
        .workdir()
        .map(|w| std::fs::canonicalize(w).unwrap_or_else(|_| w.into()))
        .unwrap_or_else(|| dir.clone());
    let origin = repo
        .find_remote("origin")
        .ok()
        .and_then(|r| r.url().map(|u| u.trim_end_matches('/').to_owned()));
    let root = repo
        .revwalk()
        .ok()
        .and_then(|mut w| {
            w.push_head().ok()?;
            w.simplify_first_parent().ok()?;
            w.filter_map(|c| c.ok()).last()
        })
        .map(|oid| oid.to_string())
        .unwrap_or_else(|| "no-commit".into());
    match origin {
        Some(url) => {
            let name = url
                .rsplit(['/', ':'])
                .next()
                .map(|n| n.trim_end_matches(".git").to_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| folder_name(&top));
            (format!("origin\0{url}\0root\0{root}"), name)
        }
        None => (
            format!("path\0{}\0root\0{root}", top.display()),
            folder_name(&top),
        ),
    }
}

/// A cache's folder: `<root>/<provider>/<repo>/<name>`.
pub(crate) fn dir(root: &Path, provider: &str, repo: &str, name: &str) -> PathBuf {
    root.join(provider).join(repo).join(name)
}

/// Create cache `name`'s folder: the caches root and its provider and
/// repository folders are rfs's user's alone (mode 0700, narrowed where an
/// older rfs made them wider), so while a sandbox writes in a cache — a
/// Docker container's root is this machine's root there — no other user
/// of this machine can reach what it writes.
pub(crate) fn create(root: &Path, provider: &str, repo: &str, name: &str) -> std::io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    let parents = [
        root.to_path_buf(),
        root.join(provider),
        root.join(provider).join(repo),
    ];
    for p in &parents {
        match std::fs::DirBuilder::new().mode(0o700).create(p) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                // The state directory itself is missing: made as before.
                std::fs::create_dir_all(p)?;
            }
            Err(e) => return Err(e),
        }
        let meta = std::fs::symlink_metadata(p)?;
        if !meta.is_dir() {
            return Err(std::io::Error::other(format!(
                "{} is not a folder",
                p.display()
            )));
        }
        // SAFETY: geteuid cannot fail.
        if meta.uid() != unsafe { libc::geteuid() } {
            return Err(std::io::Error::other(format!(
                "{} is owned by another user (uid {}): rfs keeps its caches only in folders of its own",
                p.display(),
                meta.uid()
            )));
        }
        if meta.permissions().mode() & 0o7777 != 0o700 {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    match std::fs::create_dir(dir(root, provider, repo, name)) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => Err(e),
        _ => Ok(()),
    }
}

/// What [`rfs_sandbox::untrusted_tree::clean`] changed in a cache, said.
pub(crate) fn cleaned_text(c: &rfs_sandbox::untrusted_tree::Cleaned) -> String {
    let mut said = vec![];
    if c.special_removed > 0 {
        said.push(format!(
            "removed {} device(s), fifo(s) or socket(s)",
            c.special_removed
        ));
    }
    if c.modes_narrowed > 0 {
        said.push(format!(
            "dropped the setuid, setgid or world-write bits of {} entries",
            c.modes_narrowed
        ));
    }
    if c.owners_taken > 0 {
        said.push(format!(
            "gave {} entries of another owner to rfs's user",
            c.owners_taken
        ));
    }
    if c.other_filesystems > 0 {
        said.push(format!(
            "left {} mount point(s) inside it unread",
            c.other_filesystems
        ));
    }
    said.join("; ")
}

/// What a cache holds: the digest of its tree, read by descriptor and
/// encoded without ambiguity (names and link targets as raw bytes with
/// their lengths, special files by kind and device numbers: see
/// [`rfs_sandbox::untrusted_tree::digest`]), its files and their bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Content {
    pub sha256: String,
    pub files: u64,
    pub bytes: u64,
    /// Every entry (files, folders, links, others).
    pub entries: u64,
}

/// What each entry of a cache is charged against its cap at least: a
/// filesystem block, and an inode besides (a cache of a million empty
/// files took 52 s to tear down and 12 s to digest on every run).
pub(crate) const ENTRY_CHARGE: u64 = 4096;

impl Content {
    /// What the cache is charged against its cap: its bytes, and a block
    /// for every entry.
    pub(crate) fn charged(&self) -> u64 {
        self.bytes
            .saturating_add(self.entries.saturating_mul(ENTRY_CHARGE))
    }
}

/// The content of folder `dir` (never follows a link).
pub(crate) fn content(dir: &Path) -> std::io::Result<Content> {
    let d = rfs_sandbox::untrusted_tree::digest(dir)?;
    Ok(Content {
        sha256: d.sha256,
        files: d.files,
        bytes: d.bytes,
        entries: d.entries,
    })
}

/// An exclusive hold on one cache (released when dropped).
#[derive(Debug)]
pub(crate) struct Held {
    _file: nix::fcntl::Flock<File>,
}

/// The lock file of cache folder `dir` (beside it).
fn lock_path(dir: &Path) -> PathBuf {
    let mut p = dir.as_os_str().to_owned();
    p.push(".lock");
    PathBuf::from(p)
}

/// Take cache `dir`'s exclusive lock, waiting up to `wait` for another
/// run to release it; returns the hold and how long it waited. `None`
/// within `wait`: another run holds it.
pub(crate) fn lock(dir: &Path, wait: Duration) -> std::io::Result<Option<(Held, Duration)>> {
    let start = Instant::now();
    let mut file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(lock_path(dir))?;
    loop {
        match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
            Ok(l) => return Ok(Some((Held { _file: l }, start.elapsed()))),
            Err((f, nix::errno::Errno::EWOULDBLOCK)) => {
                if start.elapsed() >= wait {
                    return Ok(None);
                }
                file = f;
                std::thread::sleep(Duration::from_millis(50));
            }
            Err((_, e)) => return Err(std::io::Error::from(e)),
        }
    }
}

/// One cache on disk.
#[derive(Debug, Clone)]
pub(crate) struct Listed {
    pub provider: String,
    pub repo: String,
    pub name: String,
    pub dir: PathBuf,
    pub content: Option<Content>,
}

/// Every cache under `root`.
pub(crate) fn list(root: &Path) -> Vec<Listed> {
    let mut out = vec![];
    let dirs = |p: &Path| -> Vec<(String, PathBuf)> {
        let mut v: Vec<_> = std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        v.sort();
        v
    };
    for (provider, p) in dirs(root) {
        for (repo, r) in dirs(&p) {
            for (name, d) in dirs(&r) {
                out.push(Listed {
                    provider: provider.clone(),
                    repo: repo.clone(),
                    content: content(&d).ok(),
                    name,
                    dir: d,
                });
            }
        }
    }
    out
}

/// Empty cache `dir` unless a run holds it; whether it was emptied.
pub(crate) fn prune(dir: &Path) -> std::io::Result<bool> {
    let Some((_held, _)) = lock(dir, Duration::ZERO)? else {
        return Ok(false);
    };
    empty(dir)?;
    Ok(true)
}

/// Remove everything inside `dir` (kept, empty).
pub(crate) fn empty(dir: &Path) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        if e.file_type()?.is_dir() {
            std::fs::remove_dir_all(e.path())?;
        } else {
            std::fs::remove_file(e.path())?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_paths_are_checked() {
        assert!(check_name("pip").is_ok() && check_name("cargo-registry.v1").is_ok());
        for bad in ["", "a/b", "..", ".hidden", "a b", &"x".repeat(65)] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        assert_eq!(home_relative("p", "~/.cache/pip").unwrap(), ".cache/pip");
        assert_eq!(home_relative("p", "~/.cache/pip/").unwrap(), ".cache/pip");
        for bad in [
            "/root/.cache",
            "~",
            "~/",
            "~/../etc",
            "~/a//b",
            "~/./a",
            ".cache",
        ] {
            assert!(home_relative("p", bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_caches_folders_are_rfss_users_alone_even_where_an_older_rfs_made_them_open() {
        use std::os::unix::fs::PermissionsExt as _;
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("caches");
        std::fs::create_dir_all(root.join("docker")).unwrap();
        std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755)).unwrap();
        create(&root, "docker", "repo-1", "pip").unwrap();
        for p in [
            root.clone(),
            root.join("docker"),
            root.join("docker/repo-1"),
        ] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o7777;
            assert_eq!(mode, 0o700, "{}", p.display());
        }
        assert!(root.join("docker/repo-1/pip").is_dir());
        create(&root, "docker", "repo-1", "pip").unwrap();
    }

    #[test]
    fn content_changes_with_a_file_and_a_second_lock_waits() {
        let d = tempfile::tempdir().unwrap();
        let c = d.path().join("c");
        std::fs::create_dir(&c).unwrap();
        let empty_digest = content(&c).unwrap();
        std::fs::write(c.join("a"), "x").unwrap();
        let one = content(&c).unwrap();
        assert_ne!(empty_digest.sha256, one.sha256);
        assert_eq!((one.files, one.bytes), (1, 1));
        let (held, _) = lock(&c, Duration::ZERO).unwrap().unwrap();
        assert!(lock(&c, Duration::from_millis(100)).unwrap().is_none());
        assert!(!prune(&c).unwrap(), "a held cache is not pruned");
        drop(held);
        assert!(prune(&c).unwrap());
        assert_eq!(content(&c).unwrap(), empty_digest);
    }
}
