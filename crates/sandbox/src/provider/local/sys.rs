//! Raw system-call helpers of the isolation code: C strings, errno, and
//! what the forked and cloned children do between `fork`/`clone` and
//! `exec` (no allocation, no locks).

use std::ffi::CString;
use std::os::fd::RawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::errors::*;

pub(super) fn cs(s: &str) -> CString {
    CString::new(s).expect("no NUL in constant")
}

pub(super) fn cpath(p: &Path) -> Result<CString, SetupError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| SetupError::NulByte(p.display().to_string()))
}

/// Whether this process is the host's root: uid 0 in the initial user
/// namespace (not a root mapped from another uid in a user namespace,
/// as in a rootless container), with `CAP_SYS_ADMIN`.
pub(super) fn host_root() -> bool {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return false;
    }
    let initial = std::fs::read_to_string("/proc/self/uid_map")
        .is_ok_and(|m| m.split_whitespace().collect::<Vec<_>>() == ["0", "0", "4294967295"]);
    let sys_admin = std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .is_some_and(|caps| caps & (1 << 21) != 0)
    });
    initial && sys_admin
}

/// Where this process's command line lies in its memory (start, length;
/// length 0 if unknown): fields 48 and 49 of /proc/self/stat.
pub(super) fn own_args() -> (usize, usize) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return (0, 0);
    };
    // Fields after the command name (which may contain spaces), from 3.
    let Some(rest) = stat.rsplit_once(')').map(|(_, r)| r) else {
        return (0, 0);
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| f.get(n - 3).and_then(|v| v.parse::<usize>().ok());
    match (field(48), field(49)) {
        (Some(a), Some(b)) if b > a => (a, b - a),
        _ => (0, 0),
    }
}

/// Default dispositions for every signal (handlers inherited from rfs
/// must not run in the children), nothing blocked.
pub(super) unsafe fn reset_signals() {
    for sig in 1..libc::SIGRTMAX() {
        if sig != libc::SIGKILL && sig != libc::SIGSTOP {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    let mut set: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut set);
    libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
}

/// stdin/stdout/stderr to /dev/null.
pub(super) unsafe fn quiet_stdio() {
    let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
    if fd >= 0 {
        for t in 0..3 {
            libc::dup2(fd, t);
        }
        if fd > 2 {
            libc::close(fd);
        }
    }
}

/// Close every descriptor above stderr except `keep` (at most
/// [`KEEP_MAX`], each above stderr; no allocation: it runs between fork
/// and exec).
pub(super) unsafe fn keep_only(keep: &[RawFd]) {
    let mut sorted = [i32::MAX; KEEP_MAX];
    let n = keep.len().min(KEEP_MAX);
    sorted[..n].copy_from_slice(&keep[..n]);
    sorted[..n].sort_unstable();
    let mut from = 3;
    for &fd in &sorted[..n] {
        close_range(from, fd - 1);
        from = fd + 1;
    }
    close_range(from, i32::MAX);
}

/// The most descriptors [`keep_only`] keeps.
pub(super) const KEEP_MAX: usize = 32;

pub(super) unsafe fn close_range(from: RawFd, to: RawFd) {
    if from > to {
        return;
    }
    if libc::syscall(
        libc::SYS_close_range,
        from as libc::c_uint,
        to as libc::c_uint,
        0,
    ) != 0
    {
        // Kernels before 5.9.
        for fd in from..to.min(4096) + 1 {
            libc::close(fd);
        }
    }
}

pub(super) unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
    let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
    if fd < 0 {
        return false;
    }
    let n = libc::write(fd, data.as_ptr().cast(), data.len());
    let e = errno();
    libc::close(fd);
    if n != data.len() as isize {
        *libc::__errno_location() = e;
        return false;
    }
    true
}

/// Wait for one of our children that has ended or is ending.
pub(super) fn reap(pid: libc::pid_t) -> Option<libc::c_int> {
    let mut status = 0;
    loop {
        // SAFETY: a plain wait for our own child.
        if unsafe { libc::waitpid(pid, &mut status, 0) } == pid {
            return Some(status);
        }
        if errno() != libc::EINTR {
            return None;
        }
    }
}

/// No capabilities, in the sandbox's user namespace or anywhere, and no
/// way to gain any (a uid 0 inside would otherwise hold them all).
pub(super) unsafe fn drop_capabilities() {
    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    for cap in 0..64 {
        // EINVAL: past the kernel's last capability.
        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno() == libc::EINVAL {
            break;
        }
    }
    let _ = set_capabilities(0);
}

/// Make this thread's effective and permitted capabilities exactly `keep`
/// (a mask of capability(7)'s numbers below 32; none above), inheritable
/// none: `capset(2)` with a version-3 header.
pub(super) fn set_capabilities(keep: u32) -> std::io::Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: libc::c_int,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let data = [
        Data {
            effective: keep,
            permitted: keep,
            inheritable: 0,
        },
        Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        },
    ];
    // SAFETY: capset of this thread with a version-3 header and its two
    // data words.
    if unsafe { libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr()) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Wait for every child of this process (adopted orphans too) until it
/// has none: what a reaper does before it ends.
pub(super) fn reap_until_no_child() {
    // SAFETY: plain waits on this process's own children.
    unsafe {
        let mut status = 0;
        while libc::waitpid(-1, &mut status, 0) > 0 || super::errors::errno() == libc::EINTR {}
    }
}
