//! How the agent starts a command: a `clone(CLONE_VM | CLONE_VFORK)`
//! child (it shares the agent's memory, as `posix_spawn` does: gVisor
//! copies no address space) that becomes uid and gid 0 without groups
//! (the agent is another user, see [`super::agent`]; the bundle leaves it
//! `CAP_SETUID`, `CAP_SETGID` and `CAP_KILL` and an empty bounding set,
//! so the command's `exec` as root gains no capability), leads its own process
//! group, does a step wrapper's checks itself
//! ([`crate::provider::wrapper`]: as uid 0 in the sandbox, as the shell
//! did) and execs the command. Between the `clone` and the `exec` the
//! child makes only raw system calls on data prepared before.

use std::ffi::CString;
use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt as _;
use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};

use super::super::confine::Confine;
use crate::provider::wrapper::Wrapped;

/// A command started: its pid and the read ends of its stdout and stderr.
pub struct Spawned {
    pub pid: i32,
    pub out: OwnedFd,
    pub err: OwnedFd,
}

/// Why a command did not start.
#[derive(Debug)]
pub struct NotSpawned {
    /// Its working directory could not be entered.
    pub cwd: bool,
    pub message: String,
}

/// The stack the spawn child runs on (one start at a time): the
/// namespaces start's own, with a guard page below it, so an overflow
/// faults instead of writing over the agent's memory.
pub struct Stack(super::super::spawn_stacks::Stacks);

impl Stack {
    pub fn new() -> std::io::Result<Stack> {
        super::super::spawn_stacks::Stacks::new()
            .map(Stack)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
}

const STAGE_STDIO: u32 = 1;
const STAGE_IDS: u32 = 2;
const STAGE_CWD: u32 = 3;
const STAGE_EXEC: u32 = 4;

/// Everything the child needs, and what it reports.
struct Plan {
    prog: CString,
    argv: Vec<CString>,
    argv_ptrs: Vec<*const libc::c_char>,
    env: Vec<CString>,
    envp: Vec<*const libc::c_char>,
    cwd: CString,
    /// A wrapped step's checks (the namespaces start's, shared), which
    /// also enter its working directory and complete its `PWD=` entry.
    confine: Option<Confine>,
    stdio: [RawFd; 3],
    stage: AtomicU32,
    errno: AtomicI32,
}

fn cstring(s: &str) -> Result<CString, NotSpawned> {
    CString::new(s).map_err(|_| NotSpawned {
        cwd: false,
        message: format!("`{s}` holds a NUL byte"),
    })
}

/// `prog` as `execve` takes it: a path, or found on `path` (the command's `PATH`).
fn resolve(prog: &str, path: Option<&str>) -> Result<CString, NotSpawned> {
    if prog.contains('/') {
        return cstring(prog);
    }
    let found = path.unwrap_or("").split(':').find_map(|d| {
        let p = std::path::Path::new(if d.is_empty() { "." } else { d }).join(prog);
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::metadata(&p)
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .then_some(p)
    });
    match found {
        Some(p) => CString::new(p.as_os_str().as_bytes()).map_err(|_| NotSpawned {
            cwd: false,
            message: "a NUL byte in PATH".into(),
        }),
        None => Err(NotSpawned {
            cwd: false,
            message: format!("{prog}: not found on PATH"),
        }),
    }
}

impl Plan {
    fn new(
        argv: &[String],
        env: &[(String, String)],
        cwd: &str,
        stdio: [RawFd; 3],
    ) -> Result<Plan, NotSpawned> {
        let last = |k: &str| {
            env.iter()
                .rev()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
        };
        let wrapped = Wrapped::parse(argv);
        let (argv, cwd, env, confine): (Vec<String>, &str, Vec<(String, String)>, _) =
            match &wrapped {
                Some(w) => {
                    let confine = Confine::prepare(w, env).map_err(|e| NotSpawned {
                        cwd: false,
                        message: e.to_string(),
                    })?;
                    // What `cd -P` leaves exported: OLDPWD (it started in `/`), PWD.
                    let mut env: Vec<_> = env
                        .iter()
                        .filter(|(k, _)| k != "PWD" && k != "OLDPWD")
                        .cloned()
                        .collect();
                    env.push(("OLDPWD".into(), "/".into()));
                    let argv = ["/bin/sh", "-c", "--", w.command, "sh"].map(String::from);
                    (argv.to_vec(), w.dir, env, Some(confine))
                }
                None => (argv.to_vec(), cwd, env.to_vec(), None),
            };
        let prog = resolve(
            argv.first().ok_or(NotSpawned {
                cwd: false,
                message: "an empty argv".into(),
            })?,
            last("PATH"),
        )?;
        let argv: Vec<CString> = argv.iter().map(|a| cstring(a)).collect::<Result<_, _>>()?;
        let env: Vec<CString> = env
            .iter()
            .map(|(k, v)| cstring(&format!("{k}={v}")))
            .collect::<Result<_, _>>()?;
        let mut plan = Plan {
            prog,
            argv_ptrs: vec![],
            argv,
            envp: vec![],
            env,
            cwd: cstring(cwd)?,
            confine,
            stdio,
            stage: AtomicU32::new(0),
            errno: AtomicI32::new(0),
        };
        plan.argv_ptrs = plan.argv.iter().map(|a| a.as_ptr()).collect();
        plan.argv_ptrs.push(std::ptr::null());
        plan.envp = plan.env.iter().map(|e| e.as_ptr()).collect();
        if let Some(c) = &plan.confine {
            plan.envp.push(c.pwd_entry());
        }
        plan.envp.push(std::ptr::null());
        Ok(plan)
    }
}

/// Start `argv` with exactly `env` in `cwd` (a wrapped step: as its
/// wrapper would), its stdin `null`, on `stack`.
pub fn spawn(
    argv: &[String],
    env: &[(String, String)],
    cwd: &str,
    null: RawFd,
    stack: &mut Stack,
) -> Result<Spawned, NotSpawned> {
    let os = |what: &str| NotSpawned {
        cwd: false,
        message: format!("{what}: {}", std::io::Error::last_os_error()),
    };
    let pipe = || -> Result<(OwnedFd, OwnedFd), NotSpawned> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 into a two-element array.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(os("pipe"));
        }
        // SAFETY: fresh descriptors owned here.
        Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
    };
    let ((out_r, out_w), (err_r, err_w)) = (pipe()?, pipe()?);
    let plan = Plan::new(argv, env, cwd, [null, out_w.as_raw_fd(), err_w.as_raw_fd()])?;
    let top = stack.0.top(0);
    // SAFETY: the child runs `child` on its own stack with `plan`, which
    // outlives it: with CLONE_VFORK this thread resumes only once the
    // child has exec'd or exited.
    let pid = unsafe {
        libc::clone(
            child,
            top,
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            (&plan as *const Plan).cast_mut().cast(),
        )
    };
    if pid < 0 {
        return Err(os("clone"));
    }
    drop((out_w, err_w));
    let stage = plan.stage.load(Ordering::SeqCst);
    if stage != 0 {
        let mut status = 0;
        // SAFETY: reap the child that failed to start.
        unsafe { libc::waitpid(pid, &mut status, 0) };
        let errno = std::io::Error::from_raw_os_error(plan.errno.load(Ordering::SeqCst));
        let what = match stage {
            STAGE_STDIO => "setting up its standard streams",
            STAGE_IDS => "becoming uid 0 in its own process group",
            STAGE_CWD => "entering its working directory",
            _ => "executing it",
        };
        return Err(NotSpawned {
            cwd: stage == STAGE_CWD,
            message: format!("{what}: {errno}"),
        });
    }
    Ok(Spawned {
        pid,
        out: out_r,
        err: err_r,
    })
}

/// The child. Raw system calls only.
extern "C" fn child(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the parent's `Plan`, alive until this child execs
    // or exits; everything below is a raw call on prepared data.
    unsafe {
        let p = &*(arg as *const Plan);
        let fail = |stage| fail(p, stage);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        for (i, fd) in p.stdio.iter().enumerate() {
            if libc::dup2(*fd, i as RawFd) < 0 {
                fail(STAGE_STDIO);
            }
        }
        if libc::setpgid(0, 0) != 0
            || libc::syscall(libc::SYS_setgroups, 0, std::ptr::null::<libc::gid_t>()) != 0
            || libc::syscall(libc::SYS_setresgid, 0, 0, 0) != 0
            || libc::syscall(libc::SYS_setresuid, 0, 0, 0) != 0
        {
            fail(STAGE_IDS);
        }
        match &p.confine {
            None => {
                if libc::chdir(p.cwd.as_ptr()) != 0 {
                    fail(STAGE_CWD);
                }
            }
            Some(c) => c.check(),
        }
        libc::execve(p.prog.as_ptr(), p.argv_ptrs.as_ptr(), p.envp.as_ptr());
        fail(STAGE_EXEC)
    }
}

/// In the child: say at which stage it failed, and end.
unsafe fn fail(p: &Plan, stage: u32) -> ! {
    p.errno.store(*libc::__errno_location(), Ordering::SeqCst);
    p.stage.store(stage, Ordering::SeqCst);
    libc::_exit(127)
}

#[cfg(test)]
#[path = "agent_spawn_tests.rs"]
mod tests;
