//! Starting a command inside a sandbox without a `fork` of rfs:
//! `clone(CLONE_VM | CLONE_VFORK)` children that `setns` into the
//! sandbox and exec the command ([`SpawnSpec`], [`Init::spawn`]).

use std::ffi::CString;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};

use super::confine::Confine;
use super::spawn_stacks::{Stacks, SPARE_STACKS};
use super::{child::*, errors::*, namespace_init::*, sys::*};
use crate::provider::wrapper::Wrapped;

impl Init {
    /// Start a command inside the sandbox (see the module documentation).
    /// Returns once the command runs (its `exec` succeeded), or why it
    /// could not start; the command is then rfs's own child.
    pub fn spawn(&self, spec: &SpawnSpec<'_>) -> Result<SandboxChild, SpawnError> {
        let spare = self.spare_stacks.lock().map(|mut s| s.pop());
        let stacks = match spare {
            Ok(Some(s)) => s,
            _ => Stacks::new()?,
        };
        let launch = Launch::prepare(self, spec, stacks)?;
        let (started, stacks) = launch.run();
        if let Ok(mut spare) = self.spare_stacks.lock() {
            if spare.len() < SPARE_STACKS {
                spare.push(stacks);
            }
        }
        started
    }
}

/// A command to start inside a sandbox.
#[derive(Debug)]
pub struct SpawnSpec<'a> {
    pub argv: &'a [String],
    /// The whole environment (nothing is inherited); of duplicate names
    /// the last wins. Its `PATH` finds a program named without a `/`.
    pub env: &'a [(String, String)],
    /// The working directory, a path inside the sandbox.
    pub cwd: &'a str,
    /// stdin, stdout, stderr.
    pub stdio: [BorrowedFd<'a>; 3],
    /// A session of its own with stdin as its controlling terminal (a
    /// PTY's slave), instead of a process group of its own.
    pub terminal: bool,
    /// Execute this file (a descriptor of at least 3, close-on-exec, e.g.
    /// rfs's own executable) instead of looking `argv[0]` up.
    pub exec_fd: Option<BorrowedFd<'a>>,
    /// The in-sandbox wrapper's checks, done before `argv` (the wrapped
    /// command's own, [`Wrapped::command_argv`]) runs: see [`super::confine`].
    pub confine: Option<Wrapped<'a>>,
}

/// Where a start failed (`Launch::stage`); 0: it did not.
pub(super) const STAGE_SETNS: u32 = 1;
pub(super) const STAGE_CLONE: u32 = 2;
pub(super) const STAGE_STDIO: u32 = 3;
pub(super) const STAGE_GROUP: u32 = 4;
pub(super) const STAGE_SESSION: u32 = 5;
pub(super) const STAGE_TERMINAL: u32 = 6;
pub(super) const STAGE_CWD: u32 = 7;
pub(super) const STAGE_EXEC: u32 = 8;
pub(super) const STAGE_CGROUP: u32 = 9;
pub(super) const STAGE_AFFINITY: u32 = 10;

/// Everything the spawn children need, prepared before the `clone`, and
/// what they report back (they share rfs's memory).
pub(super) struct Launch {
    /// Namespaces to join, in order (user first); -1: none.
    ns: [RawFd; 6],
    cwd: CString,
    /// Paths to try executing, in order (one unless looked up in PATH).
    programs: Vec<CString>,
    /// Kept alive for the pointer arrays.
    _strings: Vec<CString>,
    argv: Vec<*const libc::c_char>,
    envp: Vec<*const libc::c_char>,
    stdio: [RawFd; 3],
    terminal: bool,
    /// [`SpawnSpec::exec_fd`]; -1: none.
    exec_fd: RawFd,
    /// The sandbox's cgroups (their `tasks`) to join first; -1: none.
    cgroup: [RawFd; 3],
    /// The wrapper's checks, done by the command's process before its exec.
    confine: Option<Confine>,
    /// The CPUs the starting thread may run on (`None`: unknown), which
    /// the command gets back (see [`Launch::start`]).
    cpus: Option<libc::cpu_set_t>,
    stacks: Stacks,
    /// Written by the children.
    pid: std::sync::atomic::AtomicI32,
    stage: std::sync::atomic::AtomicU32,
    errno: std::sync::atomic::AtomicI32,
}

impl Launch {
    pub(super) fn prepare(
        init: &Init,
        spec: &SpawnSpec<'_>,
        stacks: Stacks,
    ) -> Result<Launch, SpawnError> {
        let c =
            |what: &'static str, s: &str| CString::new(s).map_err(|_| SpawnError::NulByte { what });
        let program = spec.argv.first().ok_or(SpawnError::EmptyArgv)?;
        let mut strings = vec![];
        let mut argv = vec![];
        for a in spec.argv {
            let a = c("an argument", a)?;
            argv.push(a.as_ptr());
            strings.push(a);
        }
        argv.push(std::ptr::null());
        let mut env = std::collections::BTreeMap::new();
        for (k, v) in spec.env {
            env.insert(k.as_str(), v.as_str());
        }
        let confine = spec
            .confine
            .map(|w| Confine::prepare(&w, spec.env))
            .transpose()?;
        if confine.is_some() {
            // What the wrapper's `cd` exports: the physical cwd (written
            // by the check) and where it started.
            env.remove("PWD");
            env.insert("OLDPWD", spec.cwd);
        }
        let mut envp = vec![];
        for (k, v) in &env {
            if k.is_empty() || k.contains('=') {
                return Err(SpawnError::EnvName((*k).to_owned()));
            }
            let kv = c("an environment variable", &format!("{k}={v}"))?;
            envp.push(kv.as_ptr());
            strings.push(kv);
        }
        envp.extend(confine.as_ref().map(Confine::pwd_entry));
        envp.push(std::ptr::null());
        // As execvp does, with the command's own PATH.
        let programs = if program.contains('/') || spec.exec_fd.is_some() {
            vec![c("the program", program)?]
        } else {
            let path = env.get("PATH").copied().unwrap_or("/bin:/usr/bin");
            path.split(':')
                .map(|dir| {
                    let dir = if dir.is_empty() { "." } else { dir };
                    c("the program", &format!("{dir}/{program}"))
                })
                .collect::<Result<_, _>>()?
        };
        let exec_fd = match spec.exec_fd {
            Some(fd) if fd.as_raw_fd() < 3 => return Err(SpawnError::ExecFd),
            Some(fd) => fd.as_raw_fd(),
            None => -1,
        };
        let mut ns = [-1; 6];
        for (slot, fd) in ns.iter_mut().zip(&init.ns) {
            *slot = fd.as_raw_fd();
        }
        Ok(Launch {
            ns,
            cwd: c("the working directory", spec.cwd)?,
            programs,
            _strings: strings,
            argv,
            envp,
            stdio: spec.stdio.map(|f| f.as_raw_fd()),
            terminal: spec.terminal,
            exec_fd,
            cgroup: init.cgroup.get().map_or([-1; 3], |c| c.procs_fds()),
            confine,
            cpus: allowed_cpus(),
            stacks,
            pid: 0.into(),
            stage: 0.into(),
            errno: 0.into(),
        })
    }

    /// Start the children, wait until the command runs or failed. Gives
    /// the stacks back: no child uses them any more.
    pub(super) fn run(self) -> (Result<SandboxChild, SpawnError>, Stacks) {
        let started = self.start();
        (started, self.stacks)
    }

    pub(super) fn start(&self) -> Result<SandboxChild, SpawnError> {
        use std::sync::atomic::Ordering::SeqCst;
        let arg = self as *const Launch as *mut libc::c_void;
        // SAFETY: the children only read `self` and write its atomics, and
        // `self` outlives them: with CLONE_VFORK this thread resumes only
        // when the first child has exited, after the second one exec'd or
        // exited. Every signal stays blocked in between (the children
        // reset the handlers they share with rfs before unblocking).
        let (c1, clone_errno) = unsafe {
            let mut all: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigfillset(&mut all);
            libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
            // The children run on this CPU, which this thread leaves for
            // them (CLONE_VFORK): placed on another one, busy, a new
            // child waited there for its turn (a millisecond and more
            // per child on a loaded machine). The command gets every CPU
            // back before its exec, this thread right after.
            let pinned = self.cpus.is_some() && pin_to_this_cpu();
            let c1 = libc::clone(
                launch_outer,
                self.stacks.top(0),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
                arg,
            );
            let e = errno();
            if let (true, Some(cpus)) = (pinned, &self.cpus) {
                libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), cpus);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            (c1, e)
        };
        if c1 < 0 {
            return Err(SpawnError::Os {
                what: "starting a process (clone)".into(),
                errno: clone_errno,
            });
        }
        reap(c1);
        let pid = self.pid.load(SeqCst);
        let stage = self.stage.load(SeqCst);
        if stage != 0 {
            if pid > 0 {
                reap(pid);
            }
            let errno = self.errno.load(SeqCst);
            if stage == STAGE_CWD {
                return Err(SpawnError::Cwd {
                    cwd: self.cwd.to_string_lossy().into_owned(),
                    errno,
                });
            }
            let what = match stage {
                STAGE_SETNS => "joining the sandbox's namespaces (setns)".into(),
                STAGE_CLONE => "starting a process in the sandbox (clone)".into(),
                STAGE_STDIO => "setting up its standard streams".into(),
                STAGE_GROUP => "making it a process group of its own".into(),
                STAGE_SESSION => "making it a session of its own".into(),
                STAGE_TERMINAL => "giving it its terminal".into(),
                STAGE_CGROUP => "putting it in the sandbox's cgroups (its limits)".into(),
                STAGE_AFFINITY => "giving it back the CPUs rfs may use".into(),
                _ => format!("executing {}", self.programs[0].to_string_lossy()),
            };
            return Err(SpawnError::Os { what, errno });
        }
        if pid <= 0 {
            return Err(SpawnError::Os {
                what: "starting a process in the sandbox (it vanished)".into(),
                errno: libc::ECHILD,
            });
        }
        Ok(SandboxChild::new(pid))
    }

    /// In a child: record the failed stage and its errno.
    fn fail(&self, stage: u32) {
        use std::sync::atomic::Ordering::SeqCst;
        self.errno.store(errno(), SeqCst);
        self.stage.store(stage, SeqCst);
    }
}

/// The CPUs the calling thread may run on.
fn allowed_cpus() -> Option<libc::cpu_set_t> {
    // SAFETY: sched_getaffinity fills a set of the size given.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        (libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) == 0)
            .then_some(set)
    }
}

/// Restrict the calling thread to the CPU it runs on; `false`: it was
/// not (nothing to undo).
unsafe fn pin_to_this_cpu() -> bool {
    let cpu = libc::sched_getcpu();
    if cpu < 0 {
        return false;
    }
    let mut one: libc::cpu_set_t = std::mem::zeroed();
    libc::CPU_SET(cpu as usize, &mut one);
    libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &one) == 0
}

/// The first spawn child (rfs's memory, fd table; own fs): join the
/// sandbox, start the command as rfs's child, exit.
extern "C" fn launch_outer(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Launch` that `Launch::run` keeps alive; raw
    // system calls only.
    unsafe {
        let l = &*(arg as *const Launch);
        // Into the sandbox's cgroups first (as rfs, before the user
        // namespace): the command and all it forks are counted.
        if !super::cgroup::join(&l.cgroup) {
            l.fail(STAGE_CGROUP);
            return 1;
        }
        for &fd in l.ns.iter().filter(|f| **f >= 0) {
            if libc::setns(fd, 0) != 0 {
                l.fail(STAGE_SETNS);
                return 1;
            }
        }
        let pid = libc::clone(
            launch_inner,
            l.stacks.top(1),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_PARENT | libc::SIGCHLD,
            arg,
        );
        if pid < 0 {
            l.fail(STAGE_CLONE);
            return 1;
        }
        l.pid.store(pid, std::sync::atomic::Ordering::SeqCst);
        0
    }
}

/// The second spawn child, in the sandbox's PID namespace: the command.
extern "C" fn launch_inner(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: as in `launch_outer`.
    unsafe {
        let l = &*(arg as *const Launch);
        let fail = |stage| -> libc::c_int {
            l.fail(stage);
            libc::_exit(127)
        };
        if let Some(cpus) = &l.cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), cpus) != 0 {
                return fail(STAGE_AFFINITY);
            }
        }
        // rfs's handlers must not run here (the mask is still full).
        for sig in 1..libc::SIGRTMAX() {
            if sig != libc::SIGKILL && sig != libc::SIGSTOP {
                libc::signal(sig, libc::SIG_DFL);
            }
        }
        // stdio: first move sources out of 0..3 where they would be
        // overwritten, then dup2 (which clears close-on-exec).
        let mut src = l.stdio;
        for (i, fd) in src.iter_mut().enumerate() {
            if *fd < 3 && *fd != i as RawFd {
                *fd = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, 3);
                if *fd < 0 {
                    return fail(STAGE_STDIO);
                }
            }
        }
        for (i, &fd) in src.iter().enumerate() {
            let i = i as RawFd;
            let r = if fd == i {
                libc::fcntl(i, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, i)
            };
            if r < 0 {
                return fail(STAGE_STDIO);
            }
        }
        if l.terminal {
            if libc::setsid() < 0 {
                return fail(STAGE_SESSION);
            }
            #[allow(clippy::useless_conversion)]
            if libc::ioctl(0, libc::TIOCSCTTY.into(), 0) < 0 {
                return fail(STAGE_TERMINAL);
            }
        } else if libc::setpgid(0, 0) != 0 {
            return fail(STAGE_GROUP);
        }
        if libc::chdir(l.cwd.as_ptr()) != 0 {
            return fail(STAGE_CWD);
        }
        drop_capabilities();
        if let Some(c) = &l.confine {
            c.check();
        }
        // Nothing of rfs's beyond stdio reaches the command (a file to
        // execute stays open until the exec, which closes it).
        if l.exec_fd >= 3 {
            close_range(3, l.exec_fd - 1);
            close_range(l.exec_fd + 1, i32::MAX);
        } else {
            close_range(3, i32::MAX);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        if l.exec_fd >= 3 {
            libc::syscall(
                libc::SYS_execveat,
                l.exec_fd,
                c"".as_ptr(),
                l.argv.as_ptr(),
                l.envp.as_ptr(),
                libc::AT_EMPTY_PATH,
            );
            return fail(STAGE_EXEC);
        }
        // As execvp: keep looking past missing files; a permission
        // problem is reported if nothing ran.
        let mut err = libc::ENOENT;
        let mut denied = false;
        for p in &l.programs {
            libc::execve(p.as_ptr(), l.argv.as_ptr(), l.envp.as_ptr());
            match errno() {
                libc::EACCES => denied = true,
                libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT => {}
                e => {
                    err = e;
                    break;
                }
            }
        }
        if denied && err == libc::ENOENT {
            err = libc::EACCES;
        }
        *libc::__errno_location() = err;
        fail(STAGE_EXEC)
    }
}

#[cfg(test)]
mod tests {
    use super::super::probe::availability;
    use super::*;
    use std::os::fd::AsFd;

    /// A namespace init over a fresh sandbox directory (kept alive by the
    /// returned tempdir) and a runtime to wait on its children; `None`
    /// (said once) where namespaces are unavailable.
    fn host_network_init() -> Option<(tempfile::TempDir, Init, tokio::runtime::Runtime)> {
        if availability().is_err() {
            eprintln!("skipped: namespaces unavailable here");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "tmp", "root"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let init = Init::for_sandbox(dir.path(), &crate::network::NetworkPolicy::Host).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        Some((dir, init, rt))
    }

    #[test]
    fn sequential_starts_reuse_one_pair_of_stacks_and_each_command_runs() {
        let Some((_dir, init, rt)) = host_network_init() else {
            return;
        };
        let null = std::fs::File::open("/dev/null").unwrap();
        for code in [3, 4, 5] {
            let argv = vec!["/bin/sh".into(), "-c".into(), format!("exit {code}")];
            let spec = SpawnSpec {
                argv: &argv,
                env: &[],
                cwd: "/",
                stdio: [null.as_fd(), null.as_fd(), null.as_fd()],
                terminal: false,
                exec_fd: None,
                confine: None,
            };
            let mut child = init.spawn(&spec).unwrap();
            let status = rt.block_on(child.wait()).unwrap();
            assert_eq!(status.code(), Some(code));
            assert_eq!(init.spare_stacks.lock().unwrap().len(), 1);
        }
    }

    fn allowed(status: &str) -> String {
        status
            .lines()
            .find(|l| l.starts_with("Cpus_allowed_list:"))
            .unwrap_or_default()
            .to_owned()
    }

    /// The start runs its children on the starting thread's CPU: the
    /// command and the thread itself get every CPU they had back (a
    /// command pinned to one CPU would run `make -j` on one).
    #[test]
    fn a_command_and_the_thread_that_started_it_keep_every_cpu() {
        let Some((_dir, init, rt)) = host_network_init() else {
            return;
        };
        let own = || allowed(&std::fs::read_to_string("/proc/thread-self/status").unwrap());
        let before = own();
        let null = std::fs::File::open("/dev/null").unwrap();
        let (out_r, out_w) = crate::provider::input::pipe_cloexec().unwrap();
        let argv = vec![
            "/bin/sh".into(),
            "-c".into(),
            "cat /proc/self/status".into(),
        ];
        let spec = SpawnSpec {
            argv: &argv,
            env: &[],
            cwd: "/",
            stdio: [null.as_fd(), out_w.as_fd(), null.as_fd()],
            terminal: false,
            exec_fd: None,
            confine: None,
        };
        let mut child = init.spawn(&spec).unwrap();
        drop(out_w);
        assert_eq!(own(), before, "the starting thread kept one CPU");
        let mut status = String::new();
        std::io::Read::read_to_string(&mut std::fs::File::from(out_r), &mut status).unwrap();
        assert!(rt.block_on(child.wait()).unwrap().success());
        assert_eq!(allowed(&status), before, "the command runs on fewer CPUs");
    }
}
