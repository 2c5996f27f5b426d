//! Where the MCP `save` tool may write, and how it writes there.
//!
//! What an MCP client asks for can only narrow what the person running
//! rfs allowed, and starting `rfs mcp` in a repository allows one thing:
//! writing a script into that repository. So a path is refused when it is
//! absolute, leaves the repository's work tree (`../`), lies in its `.git`
//! (hooks and config run code for the person), or lies in the run's own
//! output folder (the journal and evidence). The file is reached from the
//! repository's root one folder at a time with `O_NOFOLLOW`, so no
//! component may be a symlink; an existing entry that is not a regular
//! file (a FIFO, device, socket, folder) is refused before anything opens
//! it, so nothing can block the server. A new file is created with
//! `O_EXCL`; an existing one (with `overwrite`) is replaced by renaming a
//! new file over it, never written through (a hard link to a file outside
//! keeps its content).

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write as _;
use std::os::fd::{FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{openat, renameat, AtFlags, OFlag};
use nix::sys::stat::{fstatat, Mode, SFlag};

/// Where `save` may write: inside `repo`, relative to `base`, never in
/// `out_dir`.
#[derive(Debug, Clone)]
pub(crate) struct Bounds {
    /// The repository's work tree (or the start directory outside one).
    pub repo: PathBuf,
    /// Where `rfs mcp` was started: relative paths start here.
    pub base: PathBuf,
    /// The run's output folder.
    pub out_dir: PathBuf,
}

impl Bounds {
    /// The bounds of a session started in `invocation_dir`.
    pub(crate) fn of(invocation_dir: &Path, out_dir: &Path) -> Bounds {
        let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
        let base = canon(invocation_dir);
        let repo = git2::Repository::discover(invocation_dir)
            .ok()
            .and_then(|r| r.workdir().map(canon))
            .unwrap_or_else(|| base.clone());
        Bounds {
            repo,
            base,
            out_dir: canon(out_dir),
        }
    }
}

/// Why a save was refused (the message names the path).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum SaveRefusal {
    #[error("refused: {0:?} is an absolute path; give a path relative to where rfs mcp started ({1}), inside the repository")]
    Absolute(String, String),
    #[error("refused: {0:?} resolves to {1}, outside the repository {2} (rfs mcp writes only inside the repository it was started in)")]
    Outside(String, String, String),
    #[error("refused: {0:?} names a folder, not a file")]
    NotAFile(String),
    #[error("refused: {0:?} lies in the repository's .git folder (git's own files and hooks are not written by rfs mcp)")]
    GitDir(String),
    #[error("refused: {0:?} lies in this run's output folder {1} (its journal and evidence are written by rfs alone)")]
    OutDir(String, String),
    #[error("refused: {0:?}: {1} is a symlink (rfs mcp never writes through a symlink)")]
    Symlink(String, String),
    #[error("refused: {0:?}: {1} is {2}, not a regular file (rfs mcp writes only regular files)")]
    Special(String, String, &'static str),
    #[error("refused: {0:?}: the folder {1} does not exist")]
    NoFolder(String, String),
    #[error("refused: {0:?}: {1} is not a folder")]
    NotAFolder(String, String),
    #[error("{0} exists; pass overwrite: true to replace it")]
    Exists(String),
    #[error("cannot write {0}: {1}")]
    Io(String, String),
}

/// Write `text` to `requested` (relative to where rfs mcp started) within
/// `bounds`; the path written.
pub(crate) fn write(
    bounds: &Bounds,
    requested: &str,
    text: &[u8],
    overwrite: bool,
) -> Result<PathBuf, SaveRefusal> {
    let target = resolve(bounds, requested)?;
    let rel = target
        .strip_prefix(&bounds.repo)
        .expect("resolve keeps the path inside the repository");
    let shown = |p: &Path| p.display().to_string();
    let names: Vec<&OsStr> = rel.iter().collect();
    let (file_name, folders) = names.split_last().expect("not the root");
    // From the repository's root, one folder at a time, following no link.
    let mut dir = open_dir(None, &bounds.repo)
        .map_err(|e| SaveRefusal::Io(shown(&bounds.repo), e.to_string()))?;
    let mut here = bounds.repo.clone();
    for name in folders {
        here.push(name);
        dir = match open_dir(Some(&dir), Path::new(name)) {
            Ok(d) => d,
            Err(Errno::ENOENT) => {
                return Err(SaveRefusal::NoFolder(requested.into(), shown(&here)))
            }
            Err(Errno::ELOOP | Errno::ENOTDIR) => {
                return Err(match kind_at(&dir, Path::new(name)) {
                    Some(SFlag::S_IFLNK) => SaveRefusal::Symlink(requested.into(), shown(&here)),
                    _ => SaveRefusal::NotAFolder(requested.into(), shown(&here)),
                });
            }
            Err(e) => return Err(SaveRefusal::Io(shown(&here), e.to_string())),
        };
    }
    let name = Path::new(file_name);
    let mode = match fstatat(Some(raw(&dir)), name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Err(Errno::ENOENT) => None,
        Err(e) => return Err(SaveRefusal::Io(shown(&target), e.to_string())),
        Ok(st) => {
            let kind = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
            match kind {
                SFlag::S_IFREG if overwrite => Some(st.st_mode & 0o777),
                SFlag::S_IFREG => return Err(SaveRefusal::Exists(shown(&target))),
                SFlag::S_IFLNK => {
                    return Err(SaveRefusal::Symlink(requested.into(), shown(&target)))
                }
                k => {
                    return Err(SaveRefusal::Special(
                        requested.into(),
                        shown(&target),
                        kind_name(k),
                    ))
                }
            }
        }
    };
    let io = |e: std::io::Error| SaveRefusal::Io(shown(&target), e.to_string());
    match mode {
        None => {
            let f = create_new(&dir, name, 0o644).map_err(|e| match e {
                Errno::EEXIST => SaveRefusal::Exists(shown(&target)),
                e => SaveRefusal::Io(shown(&target), e.to_string()),
            })?;
            fill(f, text).map_err(io)?;
        }
        Some(mode) => {
            let mut tmp_name = OsStr::new(".").to_os_string();
            tmp_name.push(file_name);
            tmp_name.push(format!(".rfs-mcp-{}.tmp", uuid::Uuid::new_v4().simple()));
            let tmp = Path::new(&tmp_name);
            let f = create_new(&dir, tmp, mode)
                .map_err(|e| SaveRefusal::Io(shown(&target), e.to_string()))?;
            let renamed = fill(f, text).map_err(io).and_then(|()| {
                renameat(Some(raw(&dir)), tmp, Some(raw(&dir)), name)
                    .map_err(|e| SaveRefusal::Io(shown(&target), e.to_string()))
            });
            if renamed.is_err() {
                let _ = nix::unistd::unlinkat(
                    Some(raw(&dir)),
                    tmp,
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
            }
            renamed?;
        }
    }
    Ok(target)
}

/// `requested` as a path in the repository, or why not (checked as text,
/// before anything is opened).
fn resolve(bounds: &Bounds, requested: &str) -> Result<PathBuf, SaveRefusal> {
    let p = Path::new(requested);
    if p.is_absolute() {
        return Err(SaveRefusal::Absolute(
            requested.into(),
            bounds.base.display().to_string(),
        ));
    }
    let target = rfs_evidence::out_dir::lexical(&bounds.base.join(p));
    let Ok(rel) = target.strip_prefix(&bounds.repo) else {
        return Err(SaveRefusal::Outside(
            requested.into(),
            target.display().to_string(),
            bounds.repo.display().to_string(),
        ));
    };
    if rel.as_os_str().is_empty() || requested.ends_with('/') {
        return Err(SaveRefusal::NotAFile(requested.into()));
    }
    if rel
        .components()
        .any(|c| matches!(c, Component::Normal(n) if n.as_bytes().eq_ignore_ascii_case(b".git")))
    {
        return Err(SaveRefusal::GitDir(requested.into()));
    }
    if target.starts_with(&bounds.out_dir) {
        return Err(SaveRefusal::OutDir(
            requested.into(),
            bounds.out_dir.display().to_string(),
        ));
    }
    Ok(target)
}

fn raw(fd: &OwnedFd) -> RawFd {
    use std::os::fd::AsRawFd as _;
    fd.as_raw_fd()
}

fn open_dir(at: Option<&OwnedFd>, name: &Path) -> Result<OwnedFd, Errno> {
    let fd = openat(
        at.map(raw),
        name,
        OFlag::O_DIRECTORY | OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )?;
    // SAFETY: `openat` returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A new file (never an existing entry, never through a link; a FIFO
/// cannot be opened this way, and non-blocking in any case).
fn create_new(dir: &OwnedFd, name: &Path, mode: u32) -> Result<File, Errno> {
    let fd = openat(
        Some(raw(dir)),
        name,
        OFlag::O_WRONLY
            | OFlag::O_CREAT
            | OFlag::O_EXCL
            | OFlag::O_NOFOLLOW
            | OFlag::O_NONBLOCK
            | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )?;
    // SAFETY: as in `open_dir`.
    Ok(File::from(unsafe { OwnedFd::from_raw_fd(fd) }))
}

fn fill(mut f: File, text: &[u8]) -> std::io::Result<()> {
    f.write_all(text)?;
    f.sync_all()
}

fn kind_at(dir: &OwnedFd, name: &Path) -> Option<SFlag> {
    fstatat(Some(raw(dir)), name, AtFlags::AT_SYMLINK_NOFOLLOW)
        .ok()
        .map(|st| SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT)
}

fn kind_name(k: SFlag) -> &'static str {
    match k {
        SFlag::S_IFIFO => "a FIFO",
        SFlag::S_IFCHR => "a character device",
        SFlag::S_IFBLK => "a block device",
        SFlag::S_IFSOCK => "a socket",
        SFlag::S_IFDIR => "a folder",
        _ => "a special file",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bounds(root: &Path) -> Bounds {
        Bounds {
            repo: root.to_path_buf(),
            base: root.join("sub"),
            out_dir: root.join("evidence"),
        }
    }

    #[test]
    fn paths_are_checked_as_text_first() {
        let b = bounds(Path::new("/r"));
        assert!(matches!(
            resolve(&b, "/etc/x"),
            Err(SaveRefusal::Absolute(..))
        ));
        assert!(matches!(
            resolve(&b, "../../x"),
            Err(SaveRefusal::Outside(..))
        ));
        assert!(matches!(resolve(&b, ".."), Err(SaveRefusal::NotAFile(..))));
        assert!(matches!(
            resolve(&b, "../.git/hooks/pre-commit"),
            Err(SaveRefusal::GitDir(..))
        ));
        assert!(matches!(
            resolve(&b, "../.GIT/config"),
            Err(SaveRefusal::GitDir(..))
        ));
        assert!(matches!(
            resolve(&b, "../evidence/journal.jsonl"),
            Err(SaveRefusal::OutDir(..))
        ));
        assert_eq!(resolve(&b, "x.rhai").unwrap(), Path::new("/r/sub/x.rhai"));
        assert_eq!(
            resolve(&b, "../y/../x.rhai").unwrap(),
            Path::new("/r/x.rhai")
        );
    }
}
