//! Caches: named directories rfs keeps between runs
//! (`sandbox(#{ caches: #{ pip: "~/.cache/pip" } })`), one per
//! repository, provider and name, under `$RFS_STATE_DIR/caches/` (outside
//! any synced tree). A run holds an exclusive `flock` on each cache it
//! mounts from before its sandbox is created until after the sandbox is
//! destroyed, so concurrent runs sharing a cache take turns instead of
//! writing into it at once. Each cache's content digest is journaled at
//! mount and at the end; a cache over its size cap is emptied at the end.

use std::fs::File;
use std::io::Read as _;
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

/// The key of the repository rfs was started in: the folder holding
/// `.git` (else the folder itself), as `NAME-HASH` of its canonical path.
pub(crate) fn repo_key(invocation_dir: &Path) -> String {
    let dir = std::fs::canonicalize(invocation_dir).unwrap_or_else(|_| invocation_dir.into());
    let top = dir
        .ancestors()
        .find(|a| a.join(".git").exists())
        .unwrap_or(&dir)
        .to_path_buf();
    let base: String = top
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
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
    let h = hex::encode(Sha256::digest(top.as_os_str().as_encoded_bytes()));
    format!("{base}-{}", &h[..12])
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

/// What a cache holds: a sha256 over every entry (path, kind, size, and
/// the file's sha256 or the link's target, in path order), its files and
/// their bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Content {
    pub sha256: String,
    pub files: u64,
    pub bytes: u64,
}

/// The content of folder `dir` (never follows a link).
pub(crate) fn content(dir: &Path) -> std::io::Result<Content> {
    let mut entries = vec![];
    walk(dir, "", &mut entries)?;
    entries.sort();
    let mut h = Sha256::new();
    let (mut files, mut bytes) = (0, 0);
    for (rel, line, size) in &entries {
        h.update(rel.as_bytes());
        h.update([0]);
        h.update(line.as_bytes());
        h.update([b'\n']);
        if line.starts_with("file") {
            files += 1;
            bytes += size;
        }
    }
    Ok(Content {
        sha256: hex::encode(h.finalize()),
        files,
        bytes,
    })
}

fn walk(dir: &Path, rel: &str, out: &mut Vec<(String, String, u64)>) -> std::io::Result<()> {
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name().to_string_lossy().into_owned();
        let r = if rel.is_empty() {
            name
        } else {
            format!("{rel}/{name}")
        };
        let t = e.file_type()?;
        if t.is_dir() {
            out.push((r.clone(), "dir".into(), 0));
            walk(&e.path(), &r, out)?;
        } else if t.is_symlink() {
            let target = std::fs::read_link(e.path())?;
            out.push((r, format!("link {}", target.display()), 0));
        } else if t.is_file() {
            let mut f = File::open(e.path())?;
            let mut h = Sha256::new();
            let mut buf = vec![0u8; 64 * 1024];
            let mut size = 0u64;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                size += n as u64;
                h.update(&buf[..n]);
            }
            out.push((
                r,
                format!("file {size} {}", hex::encode(h.finalize())),
                size,
            ));
        } else {
            out.push((r, "other".into(), 0));
        }
    }
    Ok(())
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
