//! The keeper of a gVisor sandbox: rfs's own executable, started with
//! [`ARG`], that runs `runsc run --detach` as its child while being a
//! child subreaper (`PR_SET_CHILD_SUBREAPER`), so gVisor's sandbox and
//! file-server processes — orphaned when `runsc run` returns — become its
//! children, and it reaps them the moment they exit.
//!
//! Without it they are reparented to the host's PID 1, and `runsc
//! delete` waits until PID 1 reaps them: on a machine whose init reaps
//! lazily (as the one this was measured on) that held every gVisor
//! teardown for 1.2 to 1.9 s; with the keeper it takes about 50 ms.
//!
//! Protocol: `rfs rfs-gvisor-keeper STATUS_FD -- PROGRAM ARGS…`. The
//! keeper runs `PROGRAM ARGS…` with its own standard streams (which are
//! the sandbox's), writes that program's exit code (a signal `n` as
//! `128 + n`) as 4 native-endian bytes on `STATUS_FD` and closes it,
//! lets go of its standard streams (the sandbox keeps its own copies),
//! then reaps until it has no child left and exits. It ends when
//! gVisor's processes have ended: when rfs destroys the sandbox, or when
//! rfs died and the sandbox's first process saw its lifeline close. It
//! leads its own process group, so a terminal's Ctrl-C or hang-up, which
//! rfs turns into an orderly end, does not kill it.

use std::os::fd::{FromRawFd as _, RawFd};
use std::os::unix::process::ExitStatusExt as _;

/// The first argument that makes rfs's executable a keeper.
pub const ARG: &str = "rfs-gvisor-keeper";

/// rfs's executable started as a keeper (`args`: its arguments after
/// argv[0]). `None`: not a keeper.
pub fn main_if_keeper(args: &[std::ffi::OsString]) -> Option<i32> {
    if args.first()? != ARG {
        return None;
    }
    Some(match keep(&args[1..]) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rfs-gvisor-keeper: {e}");
            1
        }
    })
}

fn keep(args: &[std::ffi::OsString]) -> Result<(), String> {
    let usage = || format!("usage: rfs {ARG} STATUS_FD -- PROGRAM ARGS...");
    let status_fd: RawFd = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse().ok())
        .ok_or_else(usage)?;
    if args.get(1).is_none_or(|a| a != "--") || args.len() < 3 {
        return Err(usage());
    }
    // SAFETY: the descriptor was handed to this process for it alone;
    // runsc and gVisor must not inherit it (rfs would wait on it).
    let mut status_file = unsafe {
        libc::fcntl(status_fd, libc::F_SETFD, libc::FD_CLOEXEC);
        std::fs::File::from_raw_fd(status_fd)
    };
    // SAFETY: prctl with constant arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } != 0 {
        return Err(format!(
            "cannot become a child subreaper: {}",
            std::io::Error::last_os_error()
        ));
    }
    let ran = std::process::Command::new(&args[2])
        .args(&args[3..])
        .status();
    let code = match &ran {
        Ok(s) => s.code().unwrap_or_else(|| 128 + s.signal().unwrap_or(0)),
        Err(_) => 127,
    };
    // Let go of the sandbox's pipes first: rfs must not see the keeper
    // holding them once it knows runsc's status.
    release_standard_streams();
    use std::io::Write as _;
    let said = status_file.write_all(&code.to_ne_bytes());
    drop(status_file);
    // Reap whatever happens (rfs gone included): gVisor's processes are
    // this process's until they end.
    super::super::sys::reap_until_no_child();
    ran.map_err(|e| format!("cannot run {}: {e}", args[2].to_string_lossy()))?;
    said.map_err(|e| format!("cannot say runsc's status: {e}"))
}

/// Point the standard streams at `/dev/null`: the sandbox holds its own
/// ends of rfs's pipes, and rfs must see them close when it ends, not
/// when the keeper does.
fn release_standard_streams() {
    let Ok(null) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
    else {
        return;
    };
    use std::os::fd::AsRawFd as _;
    for fd in 0..3 {
        // SAFETY: dup2 onto the standard descriptors of this process.
        unsafe { libc::dup2(null.as_raw_fd(), fd) };
    }
}
