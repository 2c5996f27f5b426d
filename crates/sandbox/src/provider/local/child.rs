//! A command rfs started: on the host ([`LocalChild::Host`]) or inside a
//! sandbox's namespaces ([`SandboxChild`], waited for through a pidfd).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use super::sys::*;

/// A command started in a sandbox by [`Init::spawn`]: rfs's child, the
/// leader of its process group (and session, for a terminal). Dropped
/// before it was waited for, its group is killed (like `kill_on_drop`).
#[derive(Debug)]
pub struct SandboxChild {
    pid: libc::pid_t,
    /// Readable once the command has ended (`None`: kernels before 5.3).
    pidfd: Option<OwnedFd>,
    status: Option<std::process::ExitStatus>,
}

impl SandboxChild {
    pub(super) fn new(pid: libc::pid_t) -> SandboxChild {
        // SAFETY: our own unreaped child: the pid cannot be reused yet.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        SandboxChild {
            pid,
            // SAFETY: a fresh descriptor owned here.
            pidfd: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) }),
            status: None,
        }
    }

    /// Its pid as rfs sees it (= its process group id).
    pub fn id(&self) -> u32 {
        self.pid as u32
    }

    /// Whether it has ended (reaps it if so).
    pub fn try_wait(&mut self) -> io::Result<Option<std::process::ExitStatus>> {
        use std::os::unix::process::ExitStatusExt;
        if self.status.is_some() {
            return Ok(self.status);
        }
        let mut status = 0;
        // SAFETY: a plain wait for our own child.
        match unsafe { libc::waitpid(self.pid, &mut status, libc::WNOHANG) } {
            0 => Ok(None),
            r if r == self.pid => {
                self.status = Some(std::process::ExitStatus::from_raw(status));
                Ok(self.status)
            }
            _ => Err(io::Error::last_os_error()),
        }
    }

    /// Wait until it has ended.
    pub async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        if let Some(s) = self.try_wait()? {
            return Ok(s);
        }
        match &self.pidfd {
            Some(fd) => {
                // SAFETY: the pidfd stays open (owned by `self`) while
                // this registration lives; it is dropped before returning.
                let fd = unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        fd.as_raw_fd(),
                        tokio::io::Interest::READABLE,
                    )
                }
                .map_err(io::Error::from)?;
                loop {
                    let mut ready = fd.readable().await?;
                    if let Some(s) = self.try_wait()? {
                        return Ok(s);
                    }
                    ready.clear_ready();
                }
            }
            None => {
                let pid = self.pid;
                let status = tokio::task::spawn_blocking(move || reap(pid))
                    .await
                    .map_err(io::Error::other)?
                    .ok_or_else(io::Error::last_os_error)?;
                use std::os::unix::process::ExitStatusExt;
                self.status = Some(std::process::ExitStatus::from_raw(status));
                Ok(std::process::ExitStatus::from_raw(status))
            }
        }
    }
}

impl Drop for SandboxChild {
    fn drop(&mut self) {
        if matches!(self.try_wait(), Ok(Some(_))) {
            return;
        }
        // Unreaped, so the pid (and group id) is still ours.
        // SAFETY: signals to our own child and its group.
        unsafe {
            libc::kill(-self.pid, libc::SIGKILL);
            libc::kill(self.pid, libc::SIGKILL);
        }
        let pid = self.pid;
        std::thread::spawn(move || reap(pid));
    }
}

/// A command rfs started: on the host, or in a sandbox's namespaces.
#[derive(Debug)]
pub enum LocalChild {
    Host(tokio::process::Child),
    Sandbox(SandboxChild),
    /// A `runsc exec` client (isolation `gvisor`).
    Gvisor(super::gvisor::GvisorChild),
}

/// What kills a started command's process group (taken before the wait:
/// a reaped host child has no pid any more).
#[derive(Debug)]
pub enum Group {
    /// A process group of the host (a `runsc exec` client's: killed, it
    /// kills the command's group inside gVisor).
    Host(i32),
    /// A command of rfs's agent in a gVisor sandbox.
    Agent(super::gvisor::AgentGroup),
    None,
}

impl Group {
    /// SIGKILL the group; it being gone already is fine.
    pub fn kill(&self) {
        match self {
            Group::Host(pgid) => super::processes::kill_group(*pgid),
            Group::Agent(g) => g.kill(),
            Group::None => {}
        }
    }
}

impl LocalChild {
    /// Its pid (= its process group id), while it has not been reaped.
    pub fn id(&self) -> Option<u32> {
        match self {
            LocalChild::Host(c) => c.id(),
            LocalChild::Sandbox(c) => Some(c.id()),
            LocalChild::Gvisor(c) => c.id(),
        }
    }

    /// What kills its process group.
    pub fn group(&self) -> Group {
        match self {
            LocalChild::Gvisor(super::gvisor::GvisorChild::Agent(c)) => Group::Agent(c.group()),
            c => c.id().map_or(Group::None, |p| Group::Host(p as i32)),
        }
    }

    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            LocalChild::Host(c) => c.wait().await,
            LocalChild::Sandbox(c) => c.wait().await,
            LocalChild::Gvisor(c) => c.wait().await,
        }
    }
}
