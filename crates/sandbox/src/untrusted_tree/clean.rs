//! Making a tree a sandbox wrote fit to keep on the host, in place (a
//! cache bound into a sandbox as it is: a Docker container's, or a local
//! sandbox's where rfs is not root).

use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{kept_mode, kind, names, open_entry, open_root};

/// What [`clean`] changed.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Cleaned {
    /// Devices, fifos and sockets removed.
    pub special_removed: u64,
    /// Entries whose setuid, setgid or world-write bit was dropped.
    pub modes_narrowed: u64,
    /// Entries of another owner given to rfs's own user.
    pub owners_taken: u64,
    /// Entries on another filesystem (a mount inside the tree) removed
    /// from view: not descended into.
    pub other_filesystems: u64,
}

impl Cleaned {
    /// Whether anything was changed.
    pub fn changed(&self) -> bool {
        *self != Cleaned::default()
    }
}

/// Walk the folder `dir` by descriptor and leave nothing a host user
/// could misuse: devices, fifos and sockets are removed; setuid, setgid
/// and world-write bits dropped; an entry of another owner (a container's
/// root, where rfs is not root) is given to rfs's user where rfs may
/// (root), and otherwise the walk fails naming it. Links are never
/// followed; their targets are left as they are (a link is data).
pub fn clean(dir: &Path) -> std::io::Result<Cleaned> {
    let root = open_root(dir)?;
    let st = rustix::fs::fstat(&root)?;
    let mut done = Cleaned::default();
    let me = Me::now();
    tidy(&root, &st, &me, &mut done)?;
    walk(&root, st.st_dev, &me, &mut done)?;
    Ok(done)
}

struct Me {
    uid: u32,
    gid: u32,
}

impl Me {
    fn now() -> Me {
        Me {
            uid: rustix::process::geteuid().as_raw(),
            gid: rustix::process::getegid().as_raw(),
        }
    }
}

fn walk(dir: &OwnedFd, dev: u64, me: &Me, done: &mut Cleaned) -> std::io::Result<()> {
    for name in names(dir)? {
        let st = match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        // A mount point is a folder (a file on an overlay reports its
        // layer's device).
        if kind(st.st_mode) == FileType::Directory && st.st_dev != dev {
            done.other_filesystems += 1;
            continue;
        }
        match kind(st.st_mode) {
            FileType::Directory => {
                let sub = open_entry(dir, &name, &st, OFlags::RDONLY | OFlags::DIRECTORY)?;
                walk(&sub, dev, me, done)?;
                tidy(&sub, &st, me, done)?;
            }
            FileType::RegularFile => {
                if needs_tidy(&st, me) {
                    let f = open_entry(dir, &name, &st, OFlags::RDONLY).map_err(|e| {
                        match e.raw_os_error() {
                            Some(libc::EACCES) | Some(libc::EPERM) => {
                                foreign(&name, rustix::io::Errno::ACCESS)
                            }
                            _ => e,
                        }
                    })?;
                    tidy(&f, &st, me, done)?;
                }
            }
            FileType::Symlink => {
                if st.st_uid != me.uid || st.st_gid != me.gid {
                    rustix::fs::chownat(
                        dir,
                        &name,
                        Some(rustix::fs::Uid::from_raw(me.uid)),
                        Some(rustix::fs::Gid::from_raw(me.gid)),
                        AtFlags::SYMLINK_NOFOLLOW,
                    )
                    .map_err(|e| foreign(&name, e))?;
                    done.owners_taken += 1;
                }
            }
            _ => {
                rustix::fs::unlinkat(dir, &name, AtFlags::empty())?;
                done.special_removed += 1;
            }
        }
    }
    Ok(())
}

fn needs_tidy(st: &rustix::fs::Stat, me: &Me) -> bool {
    let mode = st.st_mode & 0o7777;
    kept_mode(mode) != mode || st.st_uid != me.uid || st.st_gid != me.gid
}

/// Give `fd` rfs's owner and the kept mode, counting what changed.
fn tidy(fd: &OwnedFd, st: &rustix::fs::Stat, me: &Me, done: &mut Cleaned) -> std::io::Result<()> {
    if st.st_uid != me.uid || st.st_gid != me.gid {
        rustix::fs::fchown(
            fd,
            Some(rustix::fs::Uid::from_raw(me.uid)),
            Some(rustix::fs::Gid::from_raw(me.gid)),
        )
        .map_err(|e| foreign(c"an entry", e))?;
        done.owners_taken += 1;
    }
    let mode = st.st_mode & 0o7777;
    if kept_mode(mode) != mode {
        rustix::fs::fchmod(fd, Mode::from_raw_mode(kept_mode(mode) as _))?;
        done.modes_narrowed += 1;
    }
    Ok(())
}

fn foreign(name: &std::ffi::CStr, e: rustix::io::Errno) -> std::io::Error {
    std::io::Error::other(format!(
        "{:?} is owned by another user and rfs cannot take it ({e}): it is not kept",
        String::from_utf8_lossy(name.to_bytes())
    ))
}
