//! Running a command in a sandbox and streaming it to the end: the start
//! (in the sandbox's namespaces or on the host), the wait, the group's end.

use super::*;
use crate::provider::wrapper::{self, Wrapped};

/// A command whose working directory `cwd` is not in sandbox `id`.
pub(super) fn missing_cwd(id: &str, cwd: &str) -> ProviderError {
    ProviderError::NotStarted(format!(
        "working directory `{cwd}` does not exist in sandbox {id}"
    ))
}

/// A command `prog` that could not be started in sandbox `id`.
pub(super) fn cannot_start(prog: &str, id: &str, e: &dyn std::fmt::Display) -> ProviderError {
    ProviderError::NotStarted(format!("cannot start {prog} in sandbox {id}: {e}"))
}

/// A command's environment, in order (of duplicate names the last wins).
type Env = Vec<(String, String)>;

impl LocalProvider {
    /// Start `req` (or, with `own`, rfs's own executable with `req.argv`
    /// as its argv and `own.stdin` as its standard input) and wait for it.
    pub(super) async fn run(
        &self,
        id: &str,
        req: &ExecRequest,
        own: Option<OwnProgram>,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        if let Some(g) = self.gvisor_of(id)? {
            return self.gvisor_run(id, &g, req, own, sink).await;
        }
        self.run_in_namespaces(id, req, own, sink).await
    }

    /// [`Self::run`] in the sandbox's namespaces (or on the host, not
    /// isolated), beside gVisor where the sandbox has it: rfs's own
    /// source verifier (see [`super::stream_input`]).
    pub(super) async fn run_in_namespaces(
        &self,
        id: &str,
        req: &ExecRequest,
        own: Option<OwnProgram>,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let (child, out, err) = self.start(id, req, own)?;
        wait_streaming(child, out, err, req, sink).await
    }

    /// What every start of `req` in sandbox `id` needs: its program,
    /// the environment its commands get (the sandbox's, then the
    /// request's) and the sandbox's init; an empty argv or a relative
    /// working directory is refused.
    pub(super) fn prepare_command<'r>(
        &self,
        id: &str,
        req: &'r ExecRequest,
    ) -> ProviderResult<(&'r str, Env, Option<Arc<Init>>)> {
        let info = self.info(id)?;
        let init = self.init_of(id)?;
        let prog = req
            .argv
            .first()
            .ok_or_else(|| ProviderError::Invalid("empty argv".into()))?;
        if !req.cwd.starts_with('/') {
            return Err(ProviderError::Invalid(format!(
                "working directory `{}` is not an absolute path",
                req.cwd
            )));
        }
        let mut env = base_env(&info.home, init.as_deref());
        env.extend(req.env.iter().cloned());
        Ok((prog.as_str(), env, init))
    }

    /// Start the command: in the sandbox's namespaces, or on the host.
    pub(super) fn start(
        &self,
        id: &str,
        req: &ExecRequest,
        own: Option<OwnProgram>,
    ) -> ProviderResult<(LocalChild, Output, Output)> {
        let (prog, env, init) = self.prepare_command(id, req)?;
        let missing_cwd = || missing_cwd(id, &req.cwd);
        let cannot = |e: &dyn std::fmt::Display| cannot_start(prog, id, e);
        Ok(match &init {
            Some(init) => {
                let pipe = || crate::provider::input::pipe_cloexec().map_err(|e| cannot(&e));
                let ((out_r, out_w), (err_r, err_w)) = (pipe()?, pipe()?);
                let null = self.dev_null().map_err(|e| cannot(&e))?;
                // A wrapped command starts as its own shell, the wrapper's
                // checks done by its start (see `confine`).
                let wrapped = Wrapped::parse(&req.argv)
                    .filter(|_| own.is_none() && req.cwd == wrapper::START_DIR);
                let command_argv = wrapped.map(|w| w.command_argv());
                let spec = launch::SpawnSpec {
                    argv: command_argv.as_deref().unwrap_or(&req.argv),
                    env: &env,
                    cwd: &req.cwd,
                    stdio: [
                        own.as_ref().map_or(null.as_fd(), |o| o.stdin.as_fd()),
                        out_w.as_fd(),
                        err_w.as_fd(),
                    ],
                    terminal: false,
                    exec_fd: own.as_ref().map(|o| o.exe.as_fd()),
                    confine: wrapped,
                };
                // A step that reached the process limit leaves processes
                // that are being killed and reaped: a start refused at
                // the limit is tried again for a while.
                let mut spawned = init.spawn(&spec);
                let deadline = std::time::Instant::now() + Duration::from_secs(3);
                while matches!(&spawned, Err(errors::SpawnError::Os { errno, .. }) if *errno == libc::EAGAIN)
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(20));
                    spawned = init.spawn(&spec);
                    // These refusals are rfs's, not the command's.
                    forget_refused_forks(init.cgroup.get());
                }
                let child = spawned.map_err(|e| match e {
                    errors::SpawnError::Cwd { errno, .. } if errno == libc::ENOENT => missing_cwd(),
                    e => cannot(&e),
                })?;
                // The command holds its own copies now.
                drop(own);
                drop(out_w);
                drop(err_w);
                let reader = |fd: OwnedFd| -> ProviderResult<Output> {
                    // A pipe's read end of ours (its flags are ours to set).
                    // SAFETY: fcntl on a descriptor we own.
                    if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0
                    {
                        return Err(cannot(&std::io::Error::last_os_error()));
                    }
                    Ok(Box::pin(
                        tokio::net::unix::pipe::Receiver::from_owned_fd_unchecked(fd)
                            .map_err(|e| cannot(&e))?,
                    ))
                };
                (LocalChild::Sandbox(child), reader(out_r)?, reader(err_r)?)
            }
            None => {
                if !Path::new(&req.cwd).is_dir() {
                    return Err(missing_cwd());
                }
                let mut cmd = match &own {
                    // (In the child, /proc/self/exe is still rfs's.)
                    Some(o) => tokio::process::Command::new(&o.path),
                    None => tokio::process::Command::new(prog),
                };
                cmd.arg0(prog)
                    .args(&req.argv[1..])
                    .env_clear()
                    .envs(env.iter().map(|(k, v)| (k, v)))
                    .current_dir(&req.cwd)
                    .stdin(own.map_or(Stdio::null(), |o| Stdio::from(o.stdin)))
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .process_group(0)
                    .kill_on_drop(true);
                if let Some(cg) = self.cgroup_of(id)? {
                    let fds = cg.procs_fds();
                    // SAFETY: only write(2) runs between fork and exec.
                    unsafe {
                        cmd.pre_exec(move || {
                            if cgroup::join(&fds) {
                                Ok(())
                            } else {
                                Err(std::io::Error::last_os_error())
                            }
                        });
                    }
                }
                let mut spawned = cmd.spawn();
                let deadline = std::time::Instant::now() + Duration::from_secs(3);
                while matches!(&spawned, Err(e) if e.raw_os_error() == Some(libc::EAGAIN))
                    && std::time::Instant::now() < deadline
                {
                    std::thread::sleep(Duration::from_millis(20));
                    spawned = cmd.spawn();
                    forget_refused_forks(self.cgroup_of(id)?.as_ref());
                }
                let mut child = spawned.map_err(|e| cannot(&e))?;
                let out: Output = Box::pin(child.stdout.take().expect("piped"));
                let err: Output = Box::pin(child.stderr.take().expect("piped"));
                (LocalChild::Host(child), out, err)
            }
        })
    }
}

/// A start refused at the process limit (and tried again) is not a
/// limit the next command reached: its counters are read and dropped.
pub(super) fn forget_refused_forks(cg: Option<&Arc<cgroup::Cgroup>>) {
    if let Some(cg) = cg {
        let _ = cg.reached();
    }
}

/// Stream a started command's output into `sink` until it ends (or its
/// supervisor stops it), then end its process group.
pub(super) async fn wait_streaming(
    mut child: LocalChild,
    mut out: Output,
    mut err: Output,
    req: &ExecRequest,
    sink: &mut dyn OutputSink,
) -> ProviderResult<ExecOutcome> {
    let group = child.group();
    let mut sup = Supervisor::new(req, KILL_AFTER_PIPES_CLOSED);
    // Read into spare capacity: nothing to zero for a command that
    // prints little or nothing.
    let (mut obuf, mut ebuf) = (Vec::with_capacity(64 * 1024), Vec::with_capacity(64 * 1024));
    let (mut odone, mut edone) = (false, false);
    let mut outcome = ExecOutcome::default();
    // The command's exit is watched with its output: a background
    // process that keeps a copy of the pipes open (`(setsid sleep 777
    // &)`) must not hold the step open. Its output is read for
    // OUTPUT_DRAIN_AFTER_EXIT more, as on docker and daytona.
    let mut exited = None;
    let mut drain: Option<tokio::time::Instant> = None;
    {
        let mut wait = std::pin::pin!(child.wait());
        while !(odone && edone) {
            tokio::select! {
                n = out.read_buf(&mut obuf), if !odone => match n {
                    Ok(0) | Err(_) => odone = true,
                    Ok(_) => {
                        sink.stdout(&obuf);
                        obuf.clear();
                    }
                },
                n = err.read_buf(&mut ebuf), if !edone => match n {
                    Ok(0) | Err(_) => edone = true,
                    Ok(_) => {
                        sink.stderr(&ebuf);
                        ebuf.clear();
                    }
                },
                s = &mut wait, if exited.is_none() => {
                    exited = Some(s);
                    drain = Some(tokio::time::Instant::now() + crate::provider::OUTPUT_DRAIN_AFTER_EXIT);
                }
                _ = crate::provider::sleep_until(drain), if drain.is_some() => break,
                // Stopped: the group is killed below.
                _ = sup.next() => break,
            }
        }
    }
    // Nothing more is read: let go of the readers now, so a command
    // (or gVisor's agent) held back by a full one is not waited on.
    drop(out);
    drop(err);
    outcome.timed_out = sup.timed_out();
    outcome.cancelled = sup.cancelled();
    if sup.stop().is_some() {
        group.kill();
    }
    // Bound the wait: a command that closed its pipes but ignores
    // the end of its group is killed as well.
    let status = match exited {
        Some(s) => s,
        None => match tokio::time::timeout(KILL_AFTER_PIPES_CLOSED, child.wait()).await {
            Ok(s) => s,
            Err(_) => {
                group.kill();
                child.wait().await
            }
        },
    }
    .map_err(|e| io_err("waiting for command", e))?;
    // Orphans of the command's group must not outlive the step.
    group.kill();
    use std::os::unix::process::ExitStatusExt;
    outcome.exit = status.code();
    outcome.signal = status.signal();
    Ok(outcome)
}

/// How long a command whose pipes closed (or that was stopped) may take
/// to end before its group is killed (again).
pub(super) const KILL_AFTER_PIPES_CLOSED: Duration = Duration::from_secs(5);

/// A command's stdout or stderr, read as it comes.
pub(super) type Output = std::pin::Pin<Box<dyn tokio::io::AsyncRead + Send>>;

/// rfs's own executable as [`LocalProvider::run`] starts it.
pub(super) struct OwnProgram {
    /// Its path in rfs's mount namespace (`/proc/self/exe` for the CLI).
    pub(super) path: PathBuf,
    /// The same, opened close-on-exec (above the standard streams).
    pub(super) exe: OwnedFd,
    pub(super) stdin: OwnedFd,
}

/// Open rfs's own executable for executing it through the descriptor (a
/// path to it may not exist in a sandbox's mount namespace). The
/// descriptor is at least 3, so a spawn can keep it past the standard
/// streams it sets up.
pub(super) fn own_executable(path: &Path) -> std::io::Result<OwnedFd> {
    let exe = std::fs::File::open(path)?;
    if exe.as_raw_fd() >= 3 {
        return Ok(exe.into());
    }
    // SAFETY: fcntl duplicating a descriptor we own into a fresh one.
    let fd = unsafe { libc::fcntl(exe.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 3) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
