//! The host directories a gVisor sandbox serves — the system directories
//! and the parts of the host's `/etc` bound into the private one — as
//! gVisor's file server (its gofer) sees them: id-mapped, as the
//! namespaces sandbox shows them ([`super::super::idmap`]).
//!
//! gVisor does its own permission checks, on the owners and modes its
//! gofer reports; a step is uid 0 there. Served as the host has them, a
//! root-owned `0700` directory or `0600` file would be the step's own.
//! So `runsc run` starts in a mount namespace of its own (a slave of the
//! host's: nothing propagates back) in which each of those directories is
//! covered by its id-mapped, read-only copy: a file the host's uid `n`
//! owns is reported owned by `IDMAP_BASE + n`, a uid no process of the
//! sandbox has, and a step reads only what the host's unprivileged users
//! may read. The namespace lives as long as the gVisor sandbox's
//! processes (its gofer and sandbox) and ends with them: nothing is left
//! mounted on the host.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};

/// The id-mapped copies of the host directories a bundle binds, made
/// before `runsc run` is started and moved over the host's paths in its
/// own mount namespace ([`IdMapped::apply`]).
pub(super) struct IdMapped {
    trees: Vec<(OwnedFd, CString)>,
}

/// Make the id-mapped copies of `dirs` (host paths), where steps would
/// otherwise be the host's root; none where rfs is not (its steps are an
/// unprivileged user of the host already).
pub(super) fn prepare(dirs: &[PathBuf]) -> Result<IdMapped, String> {
    let mut trees = vec![];
    if !super::super::idmap::needed() {
        return Ok(IdMapped { trees });
    }
    for d in dirs {
        let fd = super::super::idmap::tree(d).map_err(|e| e.to_string())?;
        let target = super::super::sys::cpath(d).map_err(|e| e.to_string())?;
        trees.push((fd, target));
    }
    Ok(IdMapped { trees })
}

impl IdMapped {
    /// The process `cmd` starts runs in a mount namespace of its own, a
    /// slave of rfs's, with each copy over its host path.
    pub(super) fn apply(self, cmd: &mut std::process::Command) {
        use std::os::unix::process::CommandExt as _;
        if self.trees.is_empty() {
            return;
        }
        // SAFETY: only raw system calls on data prepared before the fork.
        unsafe {
            cmd.pre_exec(move || {
                let fail = || Err(std::io::Error::last_os_error());
                if libc::unshare(libc::CLONE_NEWNS) != 0 {
                    return fail();
                }
                let root = c"/".as_ptr();
                let flags = libc::MS_REC | libc::MS_SLAVE;
                if libc::mount(
                    std::ptr::null(),
                    root,
                    std::ptr::null(),
                    flags,
                    std::ptr::null(),
                ) != 0
                {
                    return fail();
                }
                for (fd, target) in &self.trees {
                    if super::super::idmap::move_into(fd.as_raw_fd(), target) != 0 {
                        return fail();
                    }
                }
                Ok(())
            });
        }
    }
}

/// The host directories the bundle of a sandbox in `dir` binds: the
/// system directories that are directories (symlinks are recreated) and
/// the parts of `/etc` the composed `/etc` has mount points for.
pub(super) fn host_dirs(dir: &Path) -> Vec<PathBuf> {
    let system = super::super::mount_plan::SYSTEM_DIRS
        .iter()
        .map(PathBuf::from)
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_dir()));
    let etc = super::super::private_etc::etc_dir(dir);
    let bound = super::super::private_etc::BOUND
        .iter()
        .filter(|d| etc.join(d).is_dir() && !etc.join(d).is_symlink())
        .map(|d| Path::new("/etc").join(d));
    system.chain(bound).collect()
}
