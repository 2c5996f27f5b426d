//! Removing a tree a sandbox could have touched (a destroyed sandbox's
//! folder, a checkpoint): a step may have made any folder read-only
//! (`chmod -w`), which must not block the removal, and a name swapped for
//! a link must not make rfs change or remove anything outside it.

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{kind, names, open_entry, open_root};

/// Remove the folder `dir` and all below it, by descriptor: folders are
/// made writable (by descriptor, never following a link) as they are
/// emptied; a mount point inside the tree is not descended into (its
/// removal fails with `EBUSY`). A missing `dir` is fine.
pub fn remove(dir: &Path) -> std::io::Result<()> {
    let root = match open_root(dir) {
        Ok(fd) => fd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let dev = rustix::fs::fstat(&root)?.st_dev;
    empty_fd(&root, dev)?;
    drop(root);
    match std::fs::remove_dir(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        r => r,
    }
}

/// Remove everything inside the folder `dir`, by descriptor as
/// [`remove`] does, keeping `dir` itself (made owner-only: it was
/// emptied because what it held could not be kept).
pub fn empty(dir: &Path) -> std::io::Result<()> {
    let root = open_root(dir)?;
    let dev = rustix::fs::fstat(&root)?.st_dev;
    empty_fd(&root, dev)
}

pub(super) fn empty_fd(dir: &OwnedFd, dev: u64) -> std::io::Result<()> {
    rustix::fs::fchmod(dir, Mode::from_raw_mode(0o700))?;
    for name in names(dir)? {
        let st = match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let gone = if kind(st.st_mode) == FileType::Directory {
            if st.st_dev == dev {
                match open_entry(dir, &name, &st, OFlags::RDONLY | OFlags::DIRECTORY) {
                    Ok(sub) => empty_fd(&sub, dev)?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                    Err(e) => return Err(e),
                }
            }
            rustix::fs::unlinkat(dir, &name, AtFlags::REMOVEDIR)
        } else {
            rustix::fs::unlinkat(dir, &name, AtFlags::empty())
        };
        // Removed meanwhile by another removal of the same tree: fine.
        match gone {
            Ok(()) | Err(rustix::io::Errno::NOENT) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
