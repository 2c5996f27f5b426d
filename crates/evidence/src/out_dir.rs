//! The output directory (`--out`): which one may be used, and how rfs
//! writes into it.
//!
//! A repository can commit anything under the folder a CI job passes as
//! `--out`, symlinks to host files included. So the folder must be new or
//! empty (never the repository itself, an ancestor of it, or `/`), may
//! not be reached through a symlink, and every file and directory rfs puts
//! in it is created by rfs itself: files with `O_CREAT | O_EXCL |
//! O_NOFOLLOW` (an existing file or symlink at that name is an error,
//! never written through), directories with `mkdir` (an existing one is an
//! error). No existing file is ever overwritten; rfs replaces only files
//! it created in this run, by renaming a new file of its own over them.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

/// Why an `--out` folder is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OutDirRefusal {
    #[error("--out {0} is the filesystem root")]
    Root(String),
    #[error("--out {out} contains {what} {inside}: the evidence would be written over it")]
    Contains {
        out: String,
        what: &'static str,
        inside: String,
    },
    #[error("--out {0} is a symlink (rfs writes evidence only into a folder it reaches without following links)")]
    Symlink(String),
    #[error("--out {out} is reached through the symlink {link} (rfs writes evidence only into a folder it reaches without following links)")]
    ThroughSymlink { out: String, link: String },
    #[error("--out {0} exists and is not a directory")]
    NotADirectory(String),
    #[error("--out {0} holds the output of an earlier run (a journal): use a new folder")]
    EarlierRun(String),
    #[error("--out {0} is not empty (rfs writes evidence only into a new or empty folder, so that nothing already there is overwritten or read as evidence)")]
    NotEmpty(String),
}

/// Check `out` (absolute) before anything is written: `invocation_dir` is
/// where rfs was started (and inside which the repository lies, if any).
pub fn check(out: &Path, invocation_dir: &Path) -> Result<(), OutDirRefusal> {
    let shown = || out.display().to_string();
    if out.parent().is_none() {
        return Err(OutDirRefusal::Root(shown()));
    }
    let repo = git2::Repository::discover(invocation_dir)
        .ok()
        .and_then(|r| r.workdir().map(Path::to_path_buf));
    for (what, inside) in [
        (
            "the directory rfs was started in",
            Some(invocation_dir.to_path_buf()),
        ),
        ("the repository", repo.clone()),
    ] {
        let Some(inside) = inside else { continue };
        let inside = lexical(&inside);
        if inside.starts_with(lexical(out)) {
            return Err(OutDirRefusal::Contains {
                out: shown(),
                what,
                inside: inside.display().to_string(),
            });
        }
    }
    // No link on the way: from the repository's root when the folder is
    // inside it (the repository's content is the untrusted part), else
    // the folder itself.
    let from = repo
        .as_deref()
        .map(lexical)
        .filter(|r| lexical(out).starts_with(r))
        .unwrap_or_else(|| lexical(out));
    for a in lexical(out).ancestors() {
        if !a.starts_with(&from) {
            break;
        }
        if std::fs::symlink_metadata(a).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(if a == lexical(out) {
                OutDirRefusal::Symlink(shown())
            } else {
                OutDirRefusal::ThroughSymlink {
                    out: shown(),
                    link: a.display().to_string(),
                }
            });
        }
    }
    match std::fs::symlink_metadata(out) {
        Err(_) => Ok(()),
        Ok(m) if !m.is_dir() => Err(OutDirRefusal::NotADirectory(shown())),
        Ok(_) => {
            let mut entries =
                std::fs::read_dir(out).map_err(|_| OutDirRefusal::NotEmpty(shown()))?;
            if std::fs::symlink_metadata(out.join("journal.jsonl")).is_ok() {
                return Err(OutDirRefusal::EarlierRun(shown()));
            }
            match entries.next() {
                None => Ok(()),
                Some(_) => Err(OutDirRefusal::NotEmpty(shown())),
            }
        }
    }
}

/// `p` with `.` and `..` resolved as text (the folder may not exist yet).
pub fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// Create `dir` and every missing parent, each by rfs itself; the last
/// one must not exist yet unless it is an empty real directory (checked
/// by [`check`]). A symlink anywhere on the way is an error.
pub fn create_root(dir: &Path) -> io::Result<()> {
    if let Some(parent) = dir.parent() {
        std::fs::create_dir_all(parent)?;
    }
    match std::fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
            let m = std::fs::symlink_metadata(dir)?;
            if m.is_dir() {
                Ok(())
            } else {
                Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} exists and is not a directory", dir.display()),
                ))
            }
        }
        Err(e) => Err(e),
    }
}

/// Create the directory `dir` inside the output directory: it must not
/// exist (a file, a directory or a symlink already there is an error).
pub fn create_dir(dir: &Path) -> io::Result<()> {
    std::fs::create_dir(dir).map_err(|e| named(e, dir))
}

/// Create the directory `dir` unless rfs already made it in this run (a
/// real directory, not a symlink).
pub fn ensure_dir(dir: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => Ok(()),
        Ok(_) => Err(named(
            io::Error::new(io::ErrorKind::AlreadyExists, "not a directory"),
            dir,
        )),
        Err(_) => create_dir(dir),
    }
}

/// Create the new file `path`: never through a symlink, never over an
/// existing file.
pub fn create_file(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| named(e, path))
}

/// Write the new file `path` with `bytes` (see [`create_file`]).
pub fn write_new(path: &Path, bytes: &[u8]) -> io::Result<()> {
    create_file(path)?.write_all(bytes)
}

/// Replace `path` (a file rfs created in this run, or none yet) with
/// `bytes`: through a new temp file of rfs's own, renamed over it; the
/// temp file is removed if anything fails.
pub fn replace(path: &Path, tmp: &Path, bytes: &[u8]) -> io::Result<()> {
    let _ = std::fs::symlink_metadata(tmp).map(|_| std::fs::remove_file(tmp));
    let written = write_new(tmp, bytes).and_then(|_| std::fs::rename(tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(tmp);
    }
    written
}

/// The most rfs reads of a journal, EVIDENCE.md, a signature or an
/// attestation of a bundle it verifies (a run of a million steps writes
/// far less); a larger file is refused before it is read.
pub const MAX_RECORD_BYTES: u64 = 256 << 20;
/// The most rfs reads of one bundled script or module.
pub const MAX_MODULE_BYTES: u64 = 16 << 20;

/// Open `rel` (relative, `/`-separated) under `base` for reading as a
/// bundle's file: every component reached without following a link, the
/// file itself a regular file (not a FIFO, device or directory: opening
/// never blocks) of at most `max` bytes. Returns the file and its size.
pub fn open_regular(base: &Path, rel: &str, max: u64) -> io::Result<(File, u64)> {
    let mut at = base.to_path_buf();
    let parts: Vec<&str> = rel.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() || *part == "." || *part == ".." {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{rel}: not a plain path inside the bundle"),
            ));
        }
        at.push(part);
        if i + 1 < parts.len() {
            let m = std::fs::symlink_metadata(&at)?;
            if !m.is_dir() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{rel}: {} is a symlink or not a directory (a bundle's files are read only inside it)", at.display()),
                ));
            }
        }
    }
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(&at)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{rel} is a symlink (a bundle's files are read only inside it, never through a link)"),
                )
            } else {
                e
            }
        })?;
    let m = file.metadata()?;
    if !m.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{rel} is not a regular file (a FIFO, device or directory)"),
        ));
    }
    if m.len() > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{rel} is larger than rfs reads ({max} bytes at most)"),
        ));
    }
    Ok((file, m.len()))
}

/// Read `rel` under `base` whole, as [`open_regular`] allows, never more
/// than `max` bytes even if it grows meanwhile.
pub fn read_regular(base: &Path, rel: &str, max: u64) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let (file, len) = open_regular(base, rel, max)?;
    let mut out = Vec::with_capacity(len as usize);
    file.take(max + 1).read_to_end(&mut out)?;
    if out.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{rel} grew past {max} bytes while it was read"),
        ));
    }
    Ok(out)
}

fn named(e: io::Error, path: &Path) -> io::Error {
    let why = if e.raw_os_error() == Some(libc::ELOOP) {
        "it is a symlink (rfs never writes through a link in its output directory)".to_owned()
    } else if e.kind() == io::ErrorKind::AlreadyExists {
        "it exists already (rfs never overwrites a file it did not create)".to_owned()
    } else {
        e.to_string()
    };
    io::Error::new(e.kind(), format!("{}: {why}", path.display()))
}

/// Where collected files go in the bundle.
pub const ARTIFACTS_DIR: &str = "artifacts";
/// Where put files are kept in the bundle.
pub const PUT_DIR: &str = "bundle/put";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_existing_file_or_link_is_ever_overwritten() {
        let d = tempfile::tempdir().unwrap();
        let victim = d.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = write_new(&victim, b"x").unwrap_err();
        assert!(e.to_string().contains("never overwrites"), "{e}");
        let e = write_new(&link, b"x").unwrap_err();
        assert!(
            e.to_string().contains("exists already") || e.to_string().contains("symlink"),
            "{e}"
        );
        // A planted temp name is removed (the link itself), not followed.
        replace(&d.path().join("new"), &link, b"fresh").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(d.path().join("new")).unwrap(),
            "fresh"
        );
        std::os::unix::fs::symlink(d.path(), &link).unwrap();
        assert!(
            ensure_dir(&link).is_err(),
            "a linked directory is not rfs's own"
        );
    }
}
