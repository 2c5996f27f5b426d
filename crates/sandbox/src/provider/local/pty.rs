//! A real PTY on the host for [`PtyRequest`]s (used by the local provider and
//! by tests).
//!
//! The child runs in its own session with the PTY as its controlling
//! terminal, with exactly `req.env` as its environment (nothing inherited)
//! and `req.cwd` as its working directory. Three tasks serve the
//! [`PtyChannel`]: a reader (master → `output`, ends at EOF/EIO or shortly
//! after the child exits), a writer (`input` → master, resize, kill) and a
//! waiter (child exit → `exit`). Dropping every `input` sender kills the
//! session like [`PtyInput::Kill`].

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use nix::fcntl::{fcntl, FcntlArg, FdFlag, OFlag};
use nix::pty::{openpty, Winsize};
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use tokio::io::unix::AsyncFd;
use tokio::sync::{mpsc, oneshot, watch};

use super::child::LocalChild;
use crate::provider::{
    ExecOutcome, ProviderError, ProviderResult, PtyChannel, PtyInput, PtyRequest,
};

/// Output chunks buffered in the channel before the reader waits (and the
/// child blocks on its writes): bounds memory when nobody reads.
const OUTPUT_QUEUE: usize = 64;
/// Largest single read from the master.
const READ_SIZE: usize = 64 * 1024;
/// After the child exits, output still arriving from processes that kept the
/// terminal open is forwarded until it pauses this long.
const DRAIN_IDLE: Duration = Duration::from_millis(100);

/// Start `req.argv` under a fresh PTY on this host.
pub async fn spawn_local_pty(req: &PtyRequest) -> ProviderResult<PtyChannel> {
    spawn_local_pty_in(req, None, [-1; 3]).await
}

/// Start `req.argv` under a fresh PTY, inside the namespaces of `init`
/// when given (`req.cwd` is then a path inside). The program is the
/// leader of its own session, with the PTY as its controlling terminal.
pub async fn spawn_local_pty_in(
    req: &PtyRequest,
    init: Option<std::sync::Arc<super::namespace_init::Init>>,
    cgroup: [std::os::fd::RawFd; 3],
) -> ProviderResult<PtyChannel> {
    let program = req
        .argv
        .first()
        .ok_or_else(|| ProviderError::Invalid("pty: empty argv".into()))?;
    let pty = open_pty(req)?;
    let err =
        |what: &str, e: &dyn std::fmt::Display| ProviderError::Io(format!("pty: {what}: {e}"));
    let cannot = |e: &dyn std::fmt::Display| {
        ProviderError::NotStarted(format!(
            "pty: cannot start {program:?} in {:?}: {e}",
            req.cwd
        ))
    };
    let mut child = match &init {
        // In the sandbox: its own session with the PTY as controlling
        // terminal (see `Init::spawn`).
        Some(init) => {
            let slave = pty.slave.as_fd();
            let spec = super::launch::SpawnSpec {
                argv: &req.argv,
                env: &req.env,
                cwd: &req.cwd,
                stdio: [slave, slave, slave],
                terminal: true,
                exec_fd: None,
                confine: None,
            };
            LocalChild::Sandbox(init.spawn(&spec).map_err(|e| cannot(&e))?)
        }
        None => LocalChild::Host(
            spawn_on_host(req, program, &pty.slave, cgroup).map_err(|e| cannot(&e))?,
        ),
    };
    drop(pty.slave);
    let pid = child
        .id()
        .ok_or_else(|| ProviderError::NotStarted("pty: child has no pid".into()))?
        as i32;

    // SAFETY: the `File` owns the master fd and nothing else closes or
    // replaces it while the `AsyncFd` holds it.
    let master = unsafe { AsyncFd::register(File::from(pty.master)) }
        .map_err(|e| err("AsyncFd", &e.to_string()))?;
    let master = Arc::new(master);
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let (out_tx, out_rx) = mpsc::channel(OUTPUT_QUEUE);
    let (exit_tx, exit_rx) = oneshot::channel();
    let (exited_tx, exited_rx) = watch::channel(false);
    let killed = Arc::new(std::sync::atomic::AtomicBool::new(false));

    let killed_seen = killed.clone();
    tokio::spawn(async move {
        let status = child.wait().await;
        let outcome = match status {
            // A session rfs killed reports `cancelled`, as on every provider.
            Ok(s) => ExecOutcome {
                exit: s.code(),
                signal: s.signal(),
                timed_out: false,
                cancelled: killed_seen.load(std::sync::atomic::Ordering::SeqCst),
            },
            Err(_) => ExecOutcome::default(),
        };
        let _ = exited_tx.send(true);
        let _ = exit_tx.send(outcome);
    });
    let target = Target {
        sid: pid,
        reaped: exited_rx.clone(),
        killed,
    };
    tokio::spawn(read_loop(master.clone(), out_tx, exited_rx));
    tokio::spawn(write_loop(master, in_rx, target));

    Ok(PtyChannel {
        input: in_tx,
        output: out_rx,
        exit: exit_rx,
    })
}

/// A PTY pair of `req`'s size, both ends close-on-exec, the master
/// non-blocking.
fn open_pty(req: &PtyRequest) -> ProviderResult<nix::pty::OpenptyResult> {
    if req.cols == 0 || req.rows == 0 {
        return Err(ProviderError::Invalid(format!(
            "pty: size must be at least 1x1, got {}x{}",
            req.cols, req.rows
        )));
    }
    let err =
        |what: &str, e: &dyn std::fmt::Display| ProviderError::Io(format!("pty: {what}: {e}"));

    let size = winsize(req.cols, req.rows);
    let pty = openpty(Some(&size), None).map_err(|e| err("openpty", &e))?;
    for fd in [&pty.master, &pty.slave] {
        fcntl(fd.as_raw_fd(), FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
            .map_err(|e| err("fcntl", &e))?;
    }
    let flags = fcntl(pty.master.as_raw_fd(), FcntlArg::F_GETFL).map_err(|e| err("fcntl", &e))?;
    fcntl(
        pty.master.as_raw_fd(),
        FcntlArg::F_SETFL(OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK),
    )
    .map_err(|e| err("fcntl", &e))?;

    Ok(pty)
}

/// Start `program` on the host as the leader of its own session, the PTY
/// (`slave`) its controlling terminal and standard streams.
fn spawn_on_host(
    req: &PtyRequest,
    program: &str,
    slave: &OwnedFd,
    cgroup: [std::os::fd::RawFd; 3],
) -> io::Result<tokio::process::Child> {
    let stdio = |fd: &OwnedFd| -> io::Result<Stdio> { Ok(Stdio::from(fd.try_clone()?)) };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(&req.argv[1..])
        .env_clear()
        .envs(req.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&req.cwd)
        .stdin(stdio(slave)?)
        .stdout(stdio(slave)?)
        .stderr(stdio(slave)?);
    // SAFETY: only async-signal-safe calls (write, setsid, ioctl) run
    // between fork and exec; stdio is already the PTY slave.
    unsafe {
        cmd.pre_exec(move || {
            if !super::cgroup::join(&cgroup) {
                return Err(io::Error::last_os_error());
            }
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            #[allow(clippy::useless_conversion)]
            if libc::ioctl(0, libc::TIOCSCTTY.into(), 0) == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.spawn()
}

fn winsize(cols: u16, rows: u16) -> Winsize {
    Winsize {
        ws_row: rows,
        ws_col: cols,
        ws_xpixel: 0,
        ws_ypixel: 0,
    }
}

/// Forward master output until EOF (EIO on Linux once every slave fd is
/// closed), or until output pauses after the child exited.
async fn read_loop(
    master: Arc<AsyncFd<File>>,
    out: mpsc::Sender<Vec<u8>>,
    mut exited: watch::Receiver<bool>,
) {
    let mut buf = vec![0u8; READ_SIZE];
    let mut receiver_gone = false;
    let mut child_done = false;
    loop {
        let ready = tokio::select! {
            r = master.readable() => r,
            r = exited.changed(), if !child_done => {
                // A dropped sender also means the waiter is done.
                child_done = r.is_err() || *exited.borrow();
                continue;
            }
            _ = tokio::time::sleep(DRAIN_IDLE), if child_done => return,
        };
        let Ok(mut guard) = ready else { return };
        match guard.try_io(|fd| fd.get_ref().read(&mut buf)) {
            Err(_would_block) => continue,
            Ok(Ok(0)) => return,
            Ok(Ok(n)) => {
                if !receiver_gone && out.send(buf[..n].to_vec()).await.is_err() {
                    // Keep draining so the child never blocks on a full PTY.
                    receiver_gone = true;
                }
            }
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => continue,
            // EIO: the slave side is closed for good.
            Ok(Err(_)) => return,
        }
    }
}

/// Pause before retrying a write the terminal did not take.
const WRITE_BACKOFF: Duration = Duration::from_millis(5);

/// Apply input: resizes and kills at once, bytes through a writer task (a
/// program that stops reading its terminal blocks writes, and must not
/// block a kill queued behind them). Ends, killing the session, when every
/// sender is gone.
async fn write_loop(
    master: Arc<AsyncFd<File>>,
    mut input: mpsc::UnboundedReceiver<PtyInput>,
    target: Target,
) {
    let (data_tx, mut data_rx) = mpsc::unbounded_channel::<Vec<u8>>();
    let writer = master.clone();
    let mut reaped = target.reaped.clone();
    tokio::spawn(async move {
        while let Some(bytes) = data_rx.recv().await {
            tokio::select! {
                // A failed write means the terminal is gone: later data
                // has nowhere to go either.
                _ = write_all(&writer, &bytes) => {}
                // Nobody reads input once the program has exited.
                _ = reaped.wait_for(|r| *r) => return,
            }
        }
    });
    while let Some(msg) = input.recv().await {
        match msg {
            PtyInput::Data(bytes) => {
                let _ = data_tx.send(bytes);
            }
            PtyInput::Resize { cols, rows } => {
                let ws = winsize(cols.max(1), rows.max(1));
                // SAFETY: TIOCSWINSZ reads one `winsize` from a valid pointer.
                unsafe {
                    libc::ioctl(master.get_ref().as_raw_fd(), libc::TIOCSWINSZ, &ws);
                }
            }
            PtyInput::Kill => target.kill(),
        }
    }
    target.kill();
}

/// Write all of `bytes`. A PTY master can report itself writable while a
/// program that does not read its terminal keeps the line discipline full
/// (the write then fails with EAGAIN again): back off briefly instead of
/// spinning on the readiness.
async fn write_all(master: &AsyncFd<File>, mut bytes: &[u8]) -> io::Result<()> {
    while !bytes.is_empty() {
        let mut guard = master.writable().await?;
        match guard.try_io(|fd| fd.get_ref().write(bytes)) {
            Err(_would_block) => tokio::time::sleep(WRITE_BACKOFF).await,
            Ok(Ok(n)) => bytes = &bytes[n..],
            Ok(Err(e)) if e.kind() == io::ErrorKind::Interrupted => {}
            Ok(Err(e)) => return Err(e),
        }
    }
    Ok(())
}

/// The processes a kill must reach: the child's session.
struct Target {
    /// The child's pid = its session id = its process group id.
    sid: i32,
    /// Becomes true once the child has been reaped.
    reaped: watch::Receiver<bool>,
    /// Set when rfs killed the session (reported as `cancelled`).
    killed: Arc<std::sync::atomic::AtomicBool>,
}

impl Target {
    /// SIGKILL the child's process group and every process left in its
    /// session (job-control shells put background jobs in groups of their
    /// own).
    ///
    /// Pid reuse: while the child is unreaped its pid is reserved. After
    /// reaping, the number stays reserved as long as any process still has
    /// it as session or group id; if it was recycled, its new owner shows up
    /// in the scan with `pid == sid` (our own members never do, the leader
    /// is gone), and then nothing is signalled.
    fn kill(&self) {
        let reaped = *self.reaped.borrow();
        if !reaped {
            self.killed.store(true, std::sync::atomic::Ordering::SeqCst);
        }
        if !reaped {
            let _ = killpg(Pid::from_raw(self.sid), Signal::SIGKILL);
        }
        // Two passes catch processes forked while the first pass ran.
        for _ in 0..2 {
            let members = session_members(self.sid);
            if reaped && members.contains(&self.sid) {
                return;
            }
            for pid in members {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Pids whose session or process group is `sid` (Linux `/proc`; empty
/// elsewhere).
fn session_members(sid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| {
        let name = entry.ok()?.file_name();
        let pid: i32 = name.to_str()?.parse().ok()?;
        let st = crate::procfs::stat(u32::try_from(pid).ok()?).ok()?;
        (st.session == sid || st.pgrp == sid).then_some(pid)
    })
    .collect()
}
