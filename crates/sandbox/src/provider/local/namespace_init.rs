//! The init of one sandbox: the forked children that unshare the
//! namespaces, map the ids, run the mount plan and then reap orphans
//! until rfs goes away ([`Init`]).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;

use super::spawn_stacks::Stacks;
use super::{errors::*, mount_plan::*, sys::*};

/// Messages on the report pipe: (kind, a, b), 12 bytes, written atomically.
pub(super) const MSG_PID: u32 = 1;
pub(super) const MSG_FAIL: u32 = 2;
pub(super) const MSG_READY: u32 = 3;
/// `a` of a failure before the plan ran.
pub(super) const STEP_UNSHARE: u32 = u32::MAX;
pub(super) const STEP_MAPS: u32 = u32::MAX - 1;
pub(super) const STEP_FORK: u32 = u32::MAX - 2;
pub(super) const STEP_EGRESS: u32 = u32::MAX - 3;

/// The running init of one sandbox. Dropping it kills the sandbox's whole
/// PID namespace and waits until it is gone.
pub struct Init {
    /// The intermediate child (rfs's direct child; waits for the init).
    outer: libc::pid_t,
    /// The init's pid as the host sees it.
    pid: libc::pid_t,
    /// Closing it tells the init to exit (also when rfs dies).
    lifeline: std::sync::Mutex<Option<OwnedFd>>,
    /// Namespaces to enter, in order (user first).
    pub(super) ns: Vec<OwnedFd>,
    killed: std::sync::atomic::AtomicBool,
    /// Spawn stacks no start uses any more, kept for the next ones: a
    /// fresh mapping per command costs its page faults and, unmapped, a
    /// TLB shootdown across rfs's threads.
    pub(super) spare_stacks: std::sync::Mutex<Vec<Stacks>>,
    /// The sandbox's cgroups (its limits), which every command joins.
    pub(super) cgroup: std::sync::OnceLock<std::sync::Arc<super::cgroup::Cgroup>>,
    /// The listener on 127.0.0.1:3128 inside the sandbox's network
    /// namespace, until rfs's egress proxy takes it (filtered network).
    pub(super) egress_listener: std::sync::Mutex<Option<std::net::TcpListener>>,
    /// rfs's egress proxy serving it (stops with the sandbox).
    pub(super) egress: std::sync::OnceLock<crate::network::proxy::EgressProxy>,
    /// The gVisor sandbox running in these namespaces (isolation
    /// `gvisor`), which every command enters instead; ends first.
    pub(super) gvisor: std::sync::OnceLock<std::sync::Arc<super::gvisor::GvisorSandbox>>,
}

impl std::fmt::Debug for Init {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Init").field("pid", &self.pid).finish()
    }
}

impl Init {
    /// Start the init of an isolated sandbox living in `dir`.
    pub fn for_sandbox(
        dir: &Path,
        network: &crate::network::NetworkPolicy,
    ) -> Result<Init, SetupError> {
        Init::for_sandbox_with_caches(dir, network, &[], &[])
    }

    /// [`Init::for_sandbox`], with `caches` bound into its home
    /// ([`super::cache_mounts`]).
    pub fn for_sandbox_with_caches(
        dir: &Path,
        network: &crate::network::NetworkPolicy,
        caches: &[crate::provider::CacheMount],
        host_mounts: &[crate::provider::host_mount::HostMount],
    ) -> Result<Init, SetupError> {
        let mut plan = Plan::sandbox(dir, *network == crate::network::NetworkPolicy::Host)?;
        super::cache_mounts::add(&mut plan, dir, caches)?;
        super::host_mounts::add(&mut plan, dir, host_mounts)?;
        // The init and its parent stay for the sandbox's whole life: as
        // forks of rfs they would each hold a copy of rfs's page tables
        // (megabytes for a suite's rfs), so, where rfs's own executable
        // is known, they become small programs of their own (`exec`).
        let exe = crate::provider::own_executable::executable()
            .and_then(|p| std::fs::File::open(p).ok())
            .map(OwnedFd::from);
        let egress = network
            .filtered()
            .then(super::egress::channel)
            .transpose()
            .map_err(|e| io_setup("socketpair", e))?;
        let init = Init::start_with(&plan, exe.as_ref(), egress.as_ref().map(|(_, i)| i))?;
        if let Some((ours, theirs)) = egress {
            drop(theirs);
            let l = super::egress::receive(&ours)
                .map_err(|e| io_setup("receiving the sandbox's egress listener", e))?;
            *init.egress_listener.lock().expect("egress lock") = Some(l);
        }
        Ok(init)
    }

    pub(super) fn start(plan: &Plan) -> Result<Init, SetupError> {
        Init::start_with(plan, None, None)
    }

    fn start_with(
        plan: &Plan,
        exe: Option<&OwnedFd>,
        egress: Option<&OwnedFd>,
    ) -> Result<Init, SetupError> {
        let (report_r, report_w) =
            crate::provider::input::pipe_cloexec().map_err(|e| io_setup("pipe", e))?;
        let (life_r, life_w) =
            crate::provider::input::pipe_cloexec().map_err(|e| io_setup("pipe", e))?;
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let uid_map = format!("{uid} {uid} 1\n");
        let gid_map = format!("{gid} {gid} 1\n");
        let mut flags = libc::CLONE_NEWUSER
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC
            | libc::CLONE_NEWUTS;
        if !plan.network {
            flags |= libc::CLONE_NEWNET;
        }
        let lifeline_arg =
            std::ffi::CString::new(life_r.as_raw_fd().to_string()).expect("digits have no NUL");
        let init_argv = [INIT_ARGV0.as_ptr(), lifeline_arg.as_ptr(), std::ptr::null()];
        let outer_argv = [OUTER_ARGV0.as_ptr(), std::ptr::null()];
        let no_env = [std::ptr::null::<libc::c_char>()];
        let mut keep = [-1; KEEP_MAX];
        let mut wanted = vec![report_w.as_raw_fd(), life_r.as_raw_fd()];
        wanted.extend(exe.map(|e| e.as_raw_fd()));
        wanted.extend(egress.map(|e| e.as_raw_fd()));
        wanted.extend(plan.fds());
        if wanted.len() > KEEP_MAX {
            return Err(SetupError::View(format!(
                "the sandbox's root needs {} descriptors, more than {KEEP_MAX}",
                wanted.len()
            )));
        }
        keep[..wanted.len()].copy_from_slice(&wanted);
        let child = Child {
            keep,
            keep_len: wanted.len(),
            flags,
            uid_map: uid_map.as_bytes(),
            gid_map: gid_map.as_bytes(),
            plan,
            report: report_w.as_raw_fd(),
            lifeline: life_r.as_raw_fd(),
            args: own_args(),
            exe: exe.map_or(-1, |e| e.as_raw_fd()),
            egress: egress.map_or(-1, |e| e.as_raw_fd()),
            init_argv: &init_argv,
            outer_argv: &outer_argv,
            no_env: &no_env,
        };
        // SAFETY: the child only makes raw system calls on prepared data
        // and ends in `_exit` (see `Child::outer`).
        let outer = unsafe { libc::fork() };
        if outer < 0 {
            return Err(last_os("fork"));
        }
        if outer == 0 {
            unsafe { child.outer() }
        }
        drop(report_w);
        drop(life_r);
        let mut init = Init {
            outer,
            pid: 0,
            lifeline: Some(life_w).into(),
            ns: vec![],
            killed: false.into(),
            spare_stacks: Vec::new().into(),
            cgroup: std::sync::OnceLock::new(),
            egress_listener: None.into(),
            egress: std::sync::OnceLock::new(),
            gvisor: std::sync::OnceLock::new(),
        };
        let mut file = std::fs::File::from(report_r);
        let mut ready = false;
        while !ready || init.pid == 0 {
            let mut msg = [0u8; 12];
            use std::io::Read;
            if let Err(e) = file.read_exact(&mut msg) {
                return Err(SetupError::InitEnded(e.to_string()));
            }
            let word = |i: usize| u32::from_ne_bytes(msg[i..i + 4].try_into().expect("4 bytes"));
            match word(0) {
                MSG_PID => init.pid = word(4) as libc::pid_t,
                MSG_READY => ready = true,
                _ => {
                    let step = word(4);
                    let what = match step {
                        STEP_UNSHARE => {
                            "creating user/mount/PID/UTS namespaces (unshare)".to_owned()
                        }
                        STEP_MAPS => "mapping the uid/gid into the user namespace".to_owned(),
                        STEP_FORK => "starting the namespace init (fork)".to_owned(),
                        STEP_EGRESS => {
                            "listening on 127.0.0.1:3128 in the sandbox's network namespace (egress proxy)"
                                .to_owned()
                        }
                        i => plan
                            .ops
                            .get(i as usize)
                            .map_or_else(|| format!("setup step {i}"), Op::describe),
                    };
                    return Err(SetupError::Step {
                        what,
                        errno: word(8) as i32,
                    });
                }
            }
        }
        let mut kinds = vec!["user", "mnt", "pid", "ipc", "uts"];
        if !plan.network {
            kinds.push("net");
        }
        for k in kinds {
            let path = format!("/proc/{}/ns/{k}", init.pid);
            let f =
                std::fs::File::open(&path).map_err(|e| io_setup(format!("opening {path}"), e))?;
            init.ns.push(OwnedFd::from(f));
        }
        Ok(init)
    }

    /// Start rfs's egress proxy on this init's listener (a sandbox with a
    /// filtered network policy); nothing to do for other policies.
    pub(super) fn serve_egress(
        &self,
        policy: &crate::network::NetworkPolicy,
        log: std::sync::Arc<crate::network::EgressLog>,
    ) -> Result<(), super::SetupError> {
        let Some(l) = self.egress_listener.lock().expect("egress lock").take() else {
            return Ok(());
        };
        let proxy = crate::network::proxy::EgressProxy::start(l, policy.clone(), log)
            .map_err(|e| super::errors::io_setup("starting rfs's egress proxy", e))?;
        let _ = self.egress.set(proxy);
        Ok(())
    }

    /// The path of the sandbox's network namespace (its own only when
    /// its network is not the host's).
    pub(super) fn netns_path(&self) -> std::path::PathBuf {
        format!("/proc/{}/ns/net", self.pid).into()
    }

    /// The path of the sandbox's user namespace (which owns its others).
    pub(super) fn userns_path(&self) -> std::path::PathBuf {
        format!("/proc/{}/ns/user", self.pid).into()
    }

    /// Start the gVisor sandbox of the sandbox `id` (in `dir`) over this
    /// init's namespaces (its user namespace only when `host_network`),
    /// in the cgroups `cgroup`, and keep it. Blocking.
    pub(super) fn attach_gvisor(
        &self,
        id: &str,
        dir: &std::path::Path,
        state: &std::path::Path,
        host_network: bool,
        cgroup: [std::os::fd::RawFd; 3],
        binds: super::gvisor::Binds,
    ) -> Result<(), super::SetupError> {
        let ns = (!host_network).then(|| super::gvisor::Enter {
            user: self.userns_path(),
            net: self.netns_path(),
        });
        let g = super::gvisor::attach(id, dir, state, ns, cgroup, binds)?;
        let _ = self.gvisor.set(std::sync::Arc::new(g));
        Ok(())
    }

    /// Kill the sandbox's PID namespace (and the gVisor sandbox in it)
    /// and wait until it is gone.
    pub fn kill(&self) {
        if self.killed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Some(g) = self.gvisor.get() {
            let _ = g.destroy();
        }
        // Without its lifeline the init exits by itself.
        drop(self.lifeline.lock().map(|mut l| l.take()));
        // SAFETY: plain signal and wait calls on our own children. The
        // intermediate child is unreaped until here, so the init (its
        // child) cannot have been replaced by another process.
        unsafe {
            if self.pid > 0 {
                libc::kill(self.pid, libc::SIGKILL);
            }
            let mut status = 0;
            while libc::waitpid(self.outer, &mut status, 0) < 0 && errno() == libc::EINTR {}
        }
    }
}

impl Drop for Init {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The forked children that set a sandbox up.
pub(super) struct Child<'a> {
    flags: libc::c_int,
    uid_map: &'a [u8],
    gid_map: &'a [u8],
    plan: &'a Plan,
    report: RawFd,
    lifeline: RawFd,
    /// rfs's command line in memory (start, length), blanked in the init:
    /// its `/proc/1/cmdline` is readable inside.
    args: (usize, usize),
    /// rfs's own executable (close-on-exec), which the init and its parent
    /// become once set up ([`reaper_main`]); -1: they stay forks of rfs.
    exe: RawFd,
    /// The descriptors the children keep (report, lifeline, the
    /// executable, the plan's trees), the first `keep_len` of `keep`.
    keep: [RawFd; KEEP_MAX],
    keep_len: usize,
    /// The init's end of the egress channel (-1: no filtered network).
    egress: RawFd,
    init_argv: &'a [*const libc::c_char; 3],
    outer_argv: &'a [*const libc::c_char; 2],
    no_env: &'a [*const libc::c_char; 1],
}

/// `argv[0]` of a sandbox's init once it is a program of its own.
pub const INIT_ARGV0: &std::ffi::CStr = c"rfs-sandbox-init";
/// `argv[0]` of the init's parent once it is a program of its own.
pub const OUTER_ARGV0: &std::ffi::CStr = c"rfs-sandbox-outer";

/// rfs's executable started as a sandbox's init or its parent: reap,
/// and for the init end when rfs closes the lifeline. `None`: `argv0`
/// names neither (rfs's ordinary command line). Nothing but system calls:
/// no runtime, no allocation beyond the arguments.
pub fn reaper_main(argv0: &std::ffi::OsStr, args: &[std::ffi::OsString]) -> Option<i32> {
    use std::os::unix::ffi::OsStrExt;
    let name = argv0.as_bytes();
    if name == OUTER_ARGV0.to_bytes() {
        super::sys::reap_until_no_child();
        return Some(0);
    }
    if name != INIT_ARGV0.to_bytes() {
        return None;
    }
    let lifeline: RawFd = args.first()?.to_str()?.parse().ok()?;
    let mut pfd = libc::pollfd {
        fd: lifeline,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: plain waits and a poll on a descriptor we were handed.
    unsafe {
        loop {
            let mut status = 0;
            while libc::waitpid(-1, &mut status, libc::WNOHANG) > 0 {}
            pfd.revents = 0;
            if libc::poll(&mut pfd, 1, 1000) > 0 && pfd.revents != 0 {
                return Some(0);
            }
        }
    }
}

impl Child<'_> {
    /// Become rfs's executable started as `argv` (see [`reaper_main`]);
    /// returns only when there is none or the exec failed.
    unsafe fn become_reaper(&self, argv: *const *const libc::c_char) {
        if self.exe < 0 {
            return;
        }
        libc::syscall(
            libc::SYS_execveat,
            self.exe,
            c"".as_ptr(),
            argv,
            self.no_env.as_ptr(),
            libc::AT_EMPTY_PATH,
        );
    }

    unsafe fn say(&self, kind: u32, a: u32, b: u32) {
        let mut msg = [0u8; 12];
        msg[0..4].copy_from_slice(&kind.to_ne_bytes());
        msg[4..8].copy_from_slice(&a.to_ne_bytes());
        msg[8..12].copy_from_slice(&b.to_ne_bytes());
        libc::write(self.report, msg.as_ptr().cast(), msg.len());
    }

    unsafe fn fail(&self, step: u32) -> ! {
        self.say(MSG_FAIL, step, errno() as u32);
        libc::_exit(1)
    }

    /// The intermediate child: new namespaces, then the init.
    unsafe fn outer(&self) -> ! {
        reset_signals();
        quiet_stdio();
        keep_only(&self.keep[..self.keep_len]);
        if libc::unshare(self.flags) != 0 {
            self.fail(STEP_UNSHARE);
        }
        if !write_file(c"/proc/self/setgroups", b"deny") && errno() != libc::ENOENT {
            self.fail(STEP_MAPS);
        }
        if !write_file(c"/proc/self/uid_map", self.uid_map)
            || !write_file(c"/proc/self/gid_map", self.gid_map)
        {
            self.fail(STEP_MAPS);
        }
        let init = libc::fork();
        if init < 0 {
            self.fail(STEP_FORK);
        }
        if init == 0 {
            self.init();
        }
        self.say(MSG_PID, init as u32, 0);
        libc::close(self.report);
        libc::close(self.lifeline);
        // Its only child is the init: wait for it as a small program.
        self.become_reaper(self.outer_argv.as_ptr());
        let mut status = 0;
        while libc::waitpid(init, &mut status, 0) < 0 && errno() == libc::EINTR {}
        libc::_exit(0)
    }

    /// PID 1 of the sandbox: build the root, then reap until rfs is gone.
    unsafe fn init(&self) -> ! {
        // The init is a copy of rfs: what rfs was run with (script and
        // state paths, options) must not be read through /proc/1/cmdline.
        if self.args.1 > 0 {
            libc::memset(self.args.0 as *mut libc::c_void, 0, self.args.1);
        }
        for (i, op) in self.plan.ops.iter().enumerate() {
            if let Err(e) = op.run() {
                self.say(MSG_FAIL, i as u32, e as u32);
                libc::_exit(1);
            }
        }
        if self.egress >= 0 {
            if let Err(e) = super::egress::listen_and_send(self.egress) {
                self.say(MSG_FAIL, STEP_EGRESS, e as u32);
                libc::_exit(1);
            }
        }
        self.say(MSG_READY, 0, 0);
        libc::close(self.report);
        // The lifeline must survive the exec.
        libc::fcntl(self.lifeline, libc::F_SETFD, 0);
        self.become_reaper(self.init_argv.as_ptr());
        let mut pfd = libc::pollfd {
            fd: self.lifeline,
            events: libc::POLLIN,
            revents: 0,
        };
        loop {
            let mut status = 0;
            while libc::waitpid(-1, &mut status, libc::WNOHANG) > 0 {}
            pfd.revents = 0;
            if libc::poll(&mut pfd, 1, 1000) > 0 && pfd.revents != 0 {
                libc::_exit(0);
            }
        }
    }
}
