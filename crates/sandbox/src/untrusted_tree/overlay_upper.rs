//! Writing what a sandbox changed through an overlay (its upper layer:
//! files, folders, whiteouts and opaque folders) into the folder that was
//! the lower layer — a cache's write-back — by descriptor on both sides.

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::{kept_mode, kind, names, open_entry, open_root};

/// Apply the overlay upper layer `upper` to the folder `to`: a whiteout
/// (a character device 0/0) removes its name, an opaque folder replaces
/// the folder whole, anything else is created anew by rfs (owned by it,
/// its mode narrowed by [`kept_mode`]). Devices, fifos and sockets are not
/// kept. No link on either side is followed.
pub fn apply_overlay_upper(upper: &Path, to: &Path) -> std::io::Result<()> {
    let (u, t) = (open_root(upper)?, open_root(to)?);
    apply(&u, &t)
}

fn apply(upper: &OwnedFd, to: &OwnedFd) -> std::io::Result<()> {
    for name in names(upper)? {
        let st = rustix::fs::statat(upper, &name, AtFlags::SYMLINK_NOFOLLOW)?;
        match kind(st.st_mode) {
            FileType::CharacterDevice if st.st_rdev == 0 => remove_entry(to, &name)?,
            FileType::Directory => {
                let from = open_entry(upper, &name, &st, OFlags::RDONLY | OFlags::DIRECTORY)?;
                let is_dir = rustix::fs::statat(to, &name, AtFlags::SYMLINK_NOFOLLOW)
                    .is_ok_and(|d| kind(d.st_mode) == FileType::Directory);
                if opaque(&from) || !is_dir {
                    remove_entry(to, &name)?;
                    rustix::fs::mkdirat(to, &name, Mode::from_raw_mode(0o700))?;
                }
                let dest = rustix::fs::openat(
                    to,
                    &name,
                    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                apply(&from, &dest)?;
                settle(&dest, &st)?;
            }
            FileType::RegularFile => {
                remove_entry(to, &name)?;
                let mut from = std::fs::File::from(open_entry(upper, &name, &st, OFlags::RDONLY)?);
                let dest = rustix::fs::openat(
                    to,
                    &name,
                    OFlags::WRONLY
                        | OFlags::CREATE
                        | OFlags::EXCL
                        | OFlags::NOFOLLOW
                        | OFlags::CLOEXEC,
                    Mode::from_raw_mode(0o600),
                )?;
                let mut w = std::fs::File::from(dest);
                let mut buf = vec![0u8; 64 * 1024];
                loop {
                    let n = from.read(&mut buf)?;
                    if n == 0 {
                        break;
                    }
                    std::io::Write::write_all(&mut w, &buf[..n])?;
                }
                settle(&w, &st)?;
            }
            FileType::Symlink => {
                remove_entry(to, &name)?;
                let target = rustix::fs::readlinkat(upper, &name, Vec::new())?;
                rustix::fs::symlinkat(&target, to, &name)?;
            }
            // Sockets, fifos and devices are not kept in a cache.
            _ => {}
        }
    }
    Ok(())
}

/// The kept mode and the modification time of `st` on `fd`.
fn settle(fd: impl std::os::fd::AsFd, st: &rustix::fs::Stat) -> std::io::Result<()> {
    rustix::fs::fchmod(
        &fd,
        Mode::from_raw_mode(kept_mode(st.st_mode & 0o7777) as _),
    )?;
    let t = |s: i64, n: i64| rustix::fs::Timespec {
        tv_sec: s as _,
        tv_nsec: n as _,
    };
    rustix::fs::futimens(
        &fd,
        &rustix::fs::Timestamps {
            last_access: t(st.st_atime as _, st.st_atime_nsec as _),
            last_modification: t(st.st_mtime as _, st.st_mtime_nsec as _),
        },
    )?;
    Ok(())
}

/// Whether the upper folder `dir` hides the lower one's content.
fn opaque(dir: &OwnedFd) -> bool {
    let mut value = [0u8; 2];
    matches!(
        rustix::fs::fgetxattr(dir, "trusted.overlay.opaque", &mut value),
        Ok(1) if value[0] == b'y'
    )
}

/// Remove whatever `name` is in `dir` (nothing there: fine), by
/// descriptor.
pub(super) fn remove_entry(dir: &OwnedFd, name: &std::ffi::CStr) -> std::io::Result<()> {
    let st = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => st,
        Err(rustix::io::Errno::NOENT) => return Ok(()),
        Err(e) => return Err(e.into()),
    };
    if kind(st.st_mode) == FileType::Directory {
        let sub = open_entry(dir, name, &st, OFlags::RDONLY | OFlags::DIRECTORY)?;
        super::remove::empty_fd(&sub, st.st_dev)?;
        rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR)?;
    } else {
        rustix::fs::unlinkat(dir, name, AtFlags::empty())?;
    }
    Ok(())
}
