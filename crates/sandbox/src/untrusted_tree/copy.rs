//! Copying a tree a sandbox could have touched (a checkpoint of its home
//! and `/tmp`) into a new folder of rfs's own, by file descriptor.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timespec, Timestamps};

use super::{kept_mode, kind, names, open_entry, open_root};

/// What a [`copy`] copied and what it left out.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Copied {
    /// Files, folders and links copied.
    pub entries: u64,
    /// Devices, fifos and sockets left out.
    pub special_skipped: u64,
    /// Entries whose setuid, setgid or world-write bit was dropped.
    pub modes_narrowed: u64,
    /// Entries on another filesystem (a mount inside the tree) left out.
    pub other_filesystems: u64,
}

/// Copy the folder `from` into `to`, a folder that must not exist yet
/// (created with `from`'s kept mode). Copy-on-write where the filesystem
/// can (`FICLONE`), hard links within the tree kept as links, owners
/// rfs's own, modes narrowed by [`kept_mode`], extended attributes not
/// copied. A name swapped for something else while the copy reads it
/// fails the copy; nothing outside `from` is ever read.
pub fn copy(from: &Path, to: &Path) -> std::io::Result<Copied> {
    let src = open_root(from)?;
    let st = rustix::fs::fstat(&src)?;
    std::fs::create_dir(to)?;
    let dst = open_root(to)?;
    let mut c = Copier {
        root: dst.try_clone()?,
        dev: st.st_dev,
        links: HashMap::new(),
        done: Copied::default(),
    };
    c.dir(&src, &dst, PathBuf::new())?;
    c.attributes(&dst, &st)?;
    Ok(c.done)
}

struct Copier {
    /// The destination's root.
    root: OwnedFd,
    /// The source tree's filesystem.
    dev: u64,
    /// Regular files with more than one link: their first copy, by
    /// source device and inode (an overlay's files keep their layer's
    /// device), as a path below the destination's root.
    links: HashMap<(u64, u64), PathBuf>,
    done: Copied,
}

impl Copier {
    fn dir(&mut self, src: &OwnedFd, dst: &OwnedFd, rel: PathBuf) -> std::io::Result<()> {
        for name in names(src)? {
            let st = match rustix::fs::statat(src, &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                // Removed since listed: nothing to copy.
                Err(rustix::io::Errno::NOENT) => continue,
                Err(e) => return Err(e.into()),
            };
            // A mount point is a folder of another filesystem. (Only a
            // folder's device says so: on an overlay with layers on two
            // filesystems, a file reports its layer's.)
            if kind(st.st_mode) == FileType::Directory && st.st_dev != self.dev {
                self.done.other_filesystems += 1;
                continue;
            }
            match kind(st.st_mode) {
                FileType::Directory => {
                    let s = open_entry(src, &name, &st, OFlags::RDONLY | OFlags::DIRECTORY)?;
                    rustix::fs::mkdirat(dst, &name, Mode::from_raw_mode(0o700))?;
                    let d = rustix::fs::openat(
                        dst,
                        &name,
                        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?;
                    self.dir(&s, &d, rel.join(as_path(&name)))?;
                    self.attributes(&d, &st)?;
                }
                FileType::RegularFile => self.file(src, dst, &name, &st, &rel)?,
                FileType::Symlink => {
                    let target = rustix::fs::readlinkat(src, &name, Vec::new())?;
                    rustix::fs::symlinkat(&target, dst, &name)?;
                    let _ =
                        rustix::fs::utimensat(dst, &name, &times(&st), AtFlags::SYMLINK_NOFOLLOW);
                }
                _ => {
                    self.done.special_skipped += 1;
                    continue;
                }
            }
            self.done.entries += 1;
        }
        Ok(())
    }

    fn file(
        &mut self,
        src: &OwnedFd,
        dst: &OwnedFd,
        name: &CStr,
        st: &rustix::fs::Stat,
        rel: &Path,
    ) -> std::io::Result<()> {
        let here = rel.join(as_path(name));
        if st.st_nlink > 1 {
            if let Some(first) = self.links.get(&(st.st_dev, st.st_ino)) {
                // Our own fresh tree: the first copy's path is ours.
                rustix::fs::linkat(&self.root, first, dst, name, AtFlags::empty())?;
                return Ok(());
            }
        }
        let s = open_entry(src, name, st, OFlags::RDONLY)?;
        // Created owner-only and written before its mode is set: never,
        // even for a moment, anything but rfs's own private file.
        let d = rustix::fs::openat(
            dst,
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(0o600),
        )?;
        if rustix::fs::ioctl_ficlone(&d, &s).is_err() {
            let (mut r, mut w) = (std::fs::File::from(s), std::fs::File::from(d));
            std::io::copy(&mut r, &mut w)?;
            self.attributes(&w, st)?;
        } else {
            self.attributes(&d, st)?;
        }
        if st.st_nlink > 1 {
            self.links.insert((st.st_dev, st.st_ino), here);
        }
        Ok(())
    }

    /// Give the copy `fd` the kept mode and the times of `st`.
    fn attributes(&mut self, fd: impl AsFd, st: &rustix::fs::Stat) -> std::io::Result<()> {
        let mode = st.st_mode & 0o7777;
        let kept = kept_mode(mode);
        if kept != mode {
            self.done.modes_narrowed += 1;
        }
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(kept as _))?;
        rustix::fs::futimens(&fd, &times(st))?;
        Ok(())
    }
}

/// `name` as a path component.
fn as_path(name: &CStr) -> &Path {
    use std::os::unix::ffi::OsStrExt as _;
    Path::new(std::ffi::OsStr::from_bytes(name.to_bytes()))
}

/// The access and modification times of `st`.
fn times(st: &rustix::fs::Stat) -> Timestamps {
    Timestamps {
        last_access: Timespec {
            tv_sec: st.st_atime as _,
            tv_nsec: st.st_atime_nsec as _,
        },
        last_modification: Timespec {
            tv_sec: st.st_mtime as _,
            tv_nsec: st.st_mtime_nsec as _,
        },
    }
}
