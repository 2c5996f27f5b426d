//! Host directories seen through an id-mapped, read-only mount, for
//! sandboxes of an rfs run as root (issue #35).
//!
//! Where rfs runs as root, a step is the host's uid 0 (without
//! capabilities): file permissions alone would let it read every file the
//! host's root owns with an owner-read bit (a `0600` key under `/opt`, a
//! `0640` file under `/usr`). Through an id-mapped mount a file owned by
//! the host's uid (gid) `n` appears owned by `IDMAP_BASE + n` — a uid that
//! no process of the sandbox has — so the step reads only what the
//! permissions grant to *others*: what the host's unprivileged users can
//! read. Inside the sandbox those files show as owned by `nobody`.
//!
//! The mounts are made by rfs itself (an id-mapped mount needs
//! `CAP_SYS_ADMIN` over the filesystem, which the sandbox's own user
//! namespace does not have): `open_tree` clones the directory as a
//! detached tree, `mount_setattr` makes it read-only, `nosuid`, `nodev`
//! and id-mapped, and the sandbox's init moves it into its root
//! (`move_mount`). Where rfs is not root, a step is an unprivileged user
//! already, and plain read-only binds are used.

use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::OnceLock;

use super::errors::*;

/// The first host id a file's owner maps to through the mount.
pub(super) const IDMAP_BASE: u32 = 2_000_000_000;
/// How many ids are mapped (owners above are unmapped: never the step's).
const IDMAP_COUNT: u32 = 65_536;

const MOUNT_ATTR_RDONLY: u64 = 0x1;
const MOUNT_ATTR_NOSUID: u64 = 0x2;
const MOUNT_ATTR_NODEV: u64 = 0x4;
const MOUNT_ATTR_IDMAP: u64 = 0x0010_0000;
const OPEN_TREE_CLONE: libc::c_uint = 1;
const AT_RECURSIVE: libc::c_uint = 0x8000;

/// Whether steps of this process's sandboxes would be the host's root
/// (rfs runs as the host's uid 0): their system directories are then
/// id-mapped. A root mapped from another uid (a rootless container) is
/// an unprivileged user on the host already.
pub(super) fn needed() -> bool {
    super::sys::host_root()
}

/// A user namespace whose map is `0 IDMAP_BASE IDMAP_COUNT` (made once:
/// a child is cloned into a new user namespace, its maps written, its
/// namespace opened, and the child let go).
fn mapping() -> Result<&'static OwnedFd, SetupError> {
    static NS: OnceLock<Result<OwnedFd, String>> = OnceLock::new();
    NS.get_or_init(make_mapping).as_ref().map_err(|e| {
        SetupError::View(format!(
            "creating the id mapping of the system directories: {e}"
        ))
    })
}

fn make_mapping() -> Result<OwnedFd, String> {
    let (r, w) = crate::provider::input::pipe_cloexec().map_err(|e| format!("pipe: {e}"))?;
    // SAFETY: a fork-like clone; the child only closes, reads and exits.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            (libc::CLONE_NEWUSER | libc::SIGCHLD) as libc::c_ulong,
            0usize,
            0usize,
            0usize,
            0usize,
        )
    };
    if pid < 0 {
        return Err(format!(
            "clone(CLONE_NEWUSER): {}",
            std::io::Error::last_os_error()
        ));
    }
    if pid == 0 {
        // SAFETY: raw calls in the child: wait until the parent lets go.
        unsafe {
            libc::close(w.as_raw_fd());
            let mut b = 0u8;
            libc::read(r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
            libc::_exit(0);
        }
    }
    drop(r);
    let map = format!("0 {IDMAP_BASE} {IDMAP_COUNT}\n");
    let result = (|| {
        std::fs::write(format!("/proc/{pid}/uid_map"), &map)
            .map_err(|e| format!("writing uid_map: {e}"))?;
        std::fs::write(format!("/proc/{pid}/gid_map"), &map)
            .map_err(|e| format!("writing gid_map: {e}"))?;
        std::fs::File::open(format!("/proc/{pid}/ns/user"))
            .map(OwnedFd::from)
            .map_err(|e| format!("opening its user namespace: {e}"))
    })();
    drop(w);
    super::sys::reap(pid as libc::pid_t);
    result
}

/// A detached, read-only, id-mapped copy of the host's `path` (and the
/// mounts below it), for the init to move into the sandbox's root.
pub(super) fn tree(path: &Path) -> Result<OwnedFd, SetupError> {
    let ns = mapping()?;
    let c = super::sys::cpath(path)?;
    let fail = |what: &str| SetupError::Step {
        what: format!("{what} {} for the sandbox", path.display()),
        errno: errno(),
    };
    // SAFETY: system calls on a NUL-terminated path; the descriptor
    // returned is owned here.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c.as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as libc::c_uint | AT_RECURSIVE,
        )
    };
    if fd < 0 {
        return Err(fail("cloning"));
    }
    // SAFETY: open_tree returned a new descriptor.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_IDMAP,
        attr_clr: 0,
        propagation: 0,
        userns_fd: ns.as_raw_fd() as u64,
    };
    let empty = CString::default();
    // SAFETY: mount_setattr on our descriptor with a valid attribute set.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_raw_fd(),
            empty.as_ptr(),
            libc::AT_EMPTY_PATH as libc::c_uint | AT_RECURSIVE,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r != 0 {
        return Err(fail(
            "id-mapping (mount_setattr; its filesystem must support id-mapped mounts)",
        ));
    }
    Ok(fd)
}

/// In the init: move the detached tree `fd` onto `target`. Raw calls only.
pub(super) unsafe fn move_into(fd: libc::c_int, target: &std::ffi::CStr) -> libc::c_long {
    const MOVE_MOUNT_F_EMPTY_PATH: libc::c_uint = 0x4;
    libc::syscall(
        libc::SYS_move_mount,
        fd,
        c"".as_ptr(),
        libc::AT_FDCWD,
        target.as_ptr(),
        MOVE_MOUNT_F_EMPTY_PATH,
    )
}
