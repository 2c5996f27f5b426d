//! Trees a sandbox could have touched, handled on the host (issue #43).
//!
//! Everything below a folder a sandbox wrote — its home and `/tmp`, a
//! cache it was given, an upper layer of an overlay — is treated as made
//! by an attacker who is still running: a name may be swapped for a
//! symbolic link to `/etc` between two system calls, a file may be a
//! device node, a program may carry a setuid bit. So rfs never walks such
//! a tree *by path* as the host's user. Every operation here works by
//! file descriptor beneath a root opened once without following links:
//!
//! - each component is opened with `O_NOFOLLOW` relative to its parent's
//!   descriptor (a folder of another filesystem is not entered), and what
//!   was opened is checked with `fstat` against what was listed: a swap
//!   makes the walk fail closed, never follow;
//! - what rfs keeps beyond the sandbox ([`copy`], [`clean`]) never keeps a
//!   device, fifo or socket, a setuid or setgid bit, a file capability
//!   (extended attributes are not copied), a world-writable mode or a
//!   foreign owner: files are created by rfs and so owned by it.

mod clean;
mod copy;
mod create;
mod digest;
pub mod digest_memo;
mod overlay_upper;
mod remove;

use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags};

pub use clean::{clean, Cleaned};
pub use copy::{copy, Copied};
pub use create::{create_dir_all, open_dir, place_file};
pub use digest::{digest, digest_with, TreeDigest};
pub use overlay_upper::apply_overlay_upper;
pub use remove::{empty, remove};

/// The mode bits rfs keeps on anything that outlives a sandbox: the
/// permission bits and the sticky bit, less setuid, setgid and write for
/// others.
pub fn kept_mode(mode: u32) -> u32 {
    mode & 0o1777 & !0o002
}

/// Open the folder `path` as the root of a walk: `path` itself is rfs's
/// own (a sandbox's folder under rfs's state directory), its last
/// component is not followed if it is a link.
pub fn open_root(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// The names in the folder `dir` (without `.` and `..`).
fn names(dir: impl AsFd) -> std::io::Result<Vec<std::ffi::CString>> {
    let mut d = rustix::fs::Dir::read_from(dir)?;
    let mut out = vec![];
    while let Some(e) = d.read() {
        let e = e?;
        let n = e.file_name();
        if n.to_bytes() != b"." && n.to_bytes() != b".." {
            out.push(n.to_owned());
        }
    }
    Ok(out)
}

/// The kind of `mode`.
fn kind(mode: u32) -> FileType {
    FileType::from_raw_mode(mode as _)
}

/// The error of a walk that found a name changed under it.
fn changed(name: &std::ffi::CStr) -> std::io::Error {
    std::io::Error::other(format!(
        "{:?} changed while rfs read it (a process of the sandbox is still writing there)",
        String::from_utf8_lossy(name.to_bytes())
    ))
}

/// Open the entry `name` of `dir` as listed by `st` (a folder or a
/// regular file), failing closed if it is no longer that very inode.
fn open_entry(
    dir: impl AsFd,
    name: &std::ffi::CStr,
    st: &rustix::fs::Stat,
    flags: OFlags,
) -> std::io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        dir,
        name,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY | OFlags::NONBLOCK,
        Mode::empty(),
    )
    .map_err(|e| match e {
        rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => changed(name),
        e => e.into(),
    })?;
    let now = rustix::fs::fstat(&fd)?;
    if now.st_ino != st.st_ino || now.st_dev != st.st_dev || kind(now.st_mode) != kind(st.st_mode) {
        return Err(changed(name));
    }
    Ok(fd)
}

#[cfg(test)]
mod tests;
