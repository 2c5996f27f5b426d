//! rfs's agent inside a gVisor sandbox: the sandbox's first process
//! (rfs's own executable, bound read-only at [`super::bundle::OWN_EXE_INSIDE`],
//! started with [`ARG`]) starts commands on rfs's request ([`super::frames`]
//! on its standard input and output), so a command costs no `runsc exec`
//! (a Go program's start, then the sandbox's RPC) — only its own process
//! start under gVisor.
//!
//! A command is started as `runsc exec` started it: exactly its argv,
//! environment and working directory, uid and gid 0 without groups or
//! capabilities, leader of its own process group, its standard input
//! `/dev/null` ([`super::agent_spawn`]). A step's wrapper
//! ([`crate::provider::wrapper`]) is done natively: its checks in the
//! command's process, then one shell (`sh -c COMMAND`) instead of two.
//! Its output is sent in chunks as it comes, its end after what it wrote
//! before it ended. `KILL` ends its process group.
//!
//! The agent is a user of its own ([`AGENT_UID`], with only `CAP_SETUID`
//! and `CAP_SETGID` to make commands uid 0, and `CAP_KILL` to end their
//! groups; `CAP_CHOWN` too, used once at its start to make `/dev` its own
//! and then dropped, see [`own_dev`]): its channel to rfs (gVisor
//! gives a process's imported descriptors its owner, mode `0600`) cannot
//! be reopened through `/proc/1/fd` by a command — uid 0 without
//! `CAP_DAC_OVERRIDE` — nor the agent traced or signalled. It reaps every
//! process of the sandbox (orphans come to it) and ends when rfs's end of
//! its input closes (rfs ended the sandbox, or died): gVisor then ends
//! every process of the sandbox.

use std::collections::HashMap;
use std::io::Write as _;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};

use super::agent_spawn::{spawn, Stack};
use super::frames::{self, Decoder, Failed, Frame, Start};

/// The first argument that makes rfs's executable the agent.
pub const ARG: &str = "rfs-gvisor-agent";
/// The agent's uid and gid in the sandbox: no file or process of the
/// sandbox is theirs (the system directories' owners are id-mapped from
/// 2000000000 up).
pub const AGENT_UID: u32 = 1_999_999_999;

/// rfs's executable started as the agent (`args`: its arguments after
/// argv[0]): serve until rfs goes away. `None`: not the agent.
pub fn main_if_agent(args: &[std::ffi::OsString]) -> Option<i32> {
    (args.first()? == ARG).then(|| match serve() {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("rfs-gvisor-agent: {e}");
            1
        }
    })
}

/// A command the agent started.
struct Cmd {
    pid: i32,
    out: Option<OwnedFd>,
    err: Option<OwnedFd>,
    exited: bool,
    /// rfs is done with it (and killed its group): forgotten once ended.
    killed: bool,
}

struct Agent {
    cmds: HashMap<u32, Cmd>,
    by_pid: HashMap<i32, u32>,
    /// rfs's end: standard output.
    to_rfs: std::fs::File,
    /// Every command's standard input.
    null: OwnedFd,
    stack: Stack,
}

fn serve() -> std::io::Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    use nix::sys::signalfd::{SfdFlags, SignalFd};
    // SAFETY: prctl on this process.
    unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) };
    own_dev()?;
    let mut mask = SigSet::empty();
    mask.add(Signal::SIGCHLD);
    mask.thread_block()?;
    let sigchld = SignalFd::with_flags(&mask, SfdFlags::SFD_NONBLOCK | SfdFlags::SFD_CLOEXEC)?;
    let mut agent = Agent {
        cmds: HashMap::new(),
        by_pid: HashMap::new(),
        // SAFETY: the process's standard output, used by nothing else.
        to_rfs: unsafe { std::fs::File::from_raw_fd(1) },
        null: std::fs::File::open("/dev/null")?.into(),
        stack: Stack::new()?,
    };
    agent.send(frames::READY, 0, frames::HELLO)?;
    let mut requests = Decoder::default();
    let mut buf = vec![0u8; frames::CHUNK];
    loop {
        let mut fds = vec![poll_in(0), poll_in(sigchld.as_raw_fd())];
        let mut streams = vec![];
        for (id, c) in &agent.cmds {
            for (fd, is_err) in [(&c.out, false), (&c.err, true)] {
                if let Some(fd) = fd {
                    fds.push(poll_in(fd.as_raw_fd()));
                    streams.push((*id, is_err));
                }
            }
        }
        // SAFETY: poll on descriptors owned here, for as many as given.
        if unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, -1) } < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if fds[0].revents != 0 {
            match read(0, &mut buf) {
                // rfs closed its end: the sandbox ends with this process.
                Ok(0) => return Ok(()),
                Ok(n) => requests.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
            while let Some(f) = requests.next().map_err(std::io::Error::other)? {
                agent.request(f)?;
            }
        }
        if fds[1].revents != 0 {
            while let Ok(Some(_)) = sigchld.read_signal() {}
            agent.reap(&mut buf)?;
        }
        for (i, (id, is_err)) in streams.into_iter().enumerate() {
            if fds[2 + i].revents != 0 {
                agent.pump(id, is_err, &mut buf)?;
            }
        }
        agent.cmds.retain(|_, c| !(c.exited && c.killed));
    }
}

/// Make gVisor's `/dev` the agent's (mode `0755`), then drop
/// `CAP_CHOWN`. gVisor's `/dev` is a tmpfs of its sentry's memory whose
/// `size=` it ignores, writable by its owner, uid 0 — which every command
/// is: a step filled it with 3 GB past a `disk: "64M"` limit. Owned by
/// the agent, a command (uid 0 without `CAP_DAC_OVERRIDE` or
/// `CAP_FOWNER`) can create nothing there, nor change its mode; its
/// devices (`/dev/null`, ...) stay as writable as they were, and
/// `/dev/shm` is a folder of the sandbox's capped disk.
fn own_dev() -> std::io::Result<()> {
    // SAFETY: chown of a path, a C string literal.
    if unsafe { libc::chown(c"/dev".as_ptr(), AGENT_UID, AGENT_UID) } != 0 {
        let e = std::io::Error::last_os_error();
        return Err(std::io::Error::new(
            e.kind(),
            format!("cannot make /dev the agent's (a command could fill it): {e}"),
        ));
    }
    // capability(7)'s numbers: CAP_KILL, CAP_SETGID, CAP_SETUID.
    super::super::sys::set_capabilities((1 << 5) | (1 << 6) | (1 << 7))
}

fn poll_in(fd: RawFd) -> libc::pollfd {
    libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    }
}

fn read(fd: RawFd, buf: &mut [u8]) -> std::io::Result<usize> {
    // SAFETY: read into a buffer of that length.
    let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n as usize)
}

impl Agent {
    fn send(&mut self, kind: u8, id: u32, payload: &[u8]) -> std::io::Result<()> {
        self.to_rfs.write_all(&frames::encode(kind, id, payload))
    }

    fn request(&mut self, f: Frame) -> std::io::Result<()> {
        match f.kind {
            frames::START => self.start(f.id, &f.payload),
            frames::KILL => {
                if let Some(c) = self.cmds.get_mut(&f.id) {
                    // SAFETY: signals to a process group this agent made,
                    // and to its leader while it is not reaped.
                    unsafe {
                        libc::kill(-c.pid, libc::SIGKILL);
                        if !c.exited {
                            libc::kill(c.pid, libc::SIGKILL);
                        }
                    }
                    c.killed = true;
                }
                Ok(())
            }
            k => Err(std::io::Error::other(format!("unknown request kind {k}"))),
        }
    }

    fn start(&mut self, id: u32, payload: &[u8]) -> std::io::Result<()> {
        let failed = |a: &mut Agent, cwd: bool, message: String| {
            let f = serde_json::to_vec(&Failed { cwd, message }).unwrap_or_default();
            a.send(frames::FAILED, id, &f)
        };
        let s: Start = match serde_json::from_slice(payload) {
            Ok(s) => s,
            Err(e) => return failed(self, false, format!("a malformed request: {e}")),
        };
        let null = self.null.as_raw_fd();
        let spawned = match spawn(&s.argv, &s.env, &s.cwd, null, &mut self.stack) {
            Ok(c) => c,
            Err(e) => return failed(self, e.cwd, e.message),
        };
        for fd in [&spawned.out, &spawned.err] {
            // SAFETY: fcntl on a descriptor owned here.
            unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) };
        }
        let pid = spawned.pid;
        self.by_pid.insert(pid, id);
        self.cmds.insert(
            id,
            Cmd {
                pid,
                out: Some(spawned.out),
                err: Some(spawned.err),
                exited: false,
                killed: false,
            },
        );
        self.send(frames::STARTED, id, &(pid as u32).to_le_bytes())
    }

    /// Send what command `id` wrote on one stream (its end, if so).
    /// Whether more may be there.
    fn pump(&mut self, id: u32, is_err: bool, buf: &mut [u8]) -> std::io::Result<bool> {
        let Some(c) = self.cmds.get_mut(&id) else {
            return Ok(false);
        };
        let slot = if is_err { &mut c.err } else { &mut c.out };
        let Some(fd) = slot else {
            return Ok(false);
        };
        let (data, end) = if is_err {
            (frames::STDERR, frames::STDERR_END)
        } else {
            (frames::STDOUT, frames::STDOUT_END)
        };
        match read(fd.as_raw_fd(), buf) {
            Ok(0) => {
                *slot = None;
                self.send(end, id, &[])?;
                Ok(false)
            }
            Ok(n) => {
                self.send(data, id, &buf[..n])?;
                Ok(true)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(false),
            Err(_) => {
                *slot = None;
                self.send(end, id, &[])?;
                Ok(false)
            }
        }
    }

    /// Reap every ended process; for a command, send what it wrote
    /// before it ended, then its end.
    fn reap(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        loop {
            let mut status = 0;
            // SAFETY: a plain wait for any child.
            let pid = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
            if pid <= 0 {
                return Ok(());
            }
            let Some(id) = self.by_pid.remove(&pid) else {
                continue;
            };
            // (Bounded: a background process may hold the pipe and write
            // on; what it writes later follows as it comes.)
            for is_err in [false, true] {
                for _ in 0..64 {
                    if !self.pump(id, is_err, buf)? {
                        break;
                    }
                }
            }
            if let Some(c) = self.cmds.get_mut(&id) {
                c.exited = true;
            }
            self.send(frames::EXIT, id, &status.to_le_bytes())?;
        }
    }
}
