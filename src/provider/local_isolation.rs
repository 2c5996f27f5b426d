//! Namespaces for `local` sandboxes (Linux, unprivileged user namespaces;
//! no root, no setuid helper).
//!
//! Each isolated sandbox has one init process that owns its namespaces:
//! rfs forks a child that unshares user, mount, PID, IPC (and, with
//! `network: false`, network) namespaces and maps only its own uid/gid;
//! that child forks the init (PID 1 of the new PID namespace), which builds
//! the sandbox's root and then only reaps orphans and waits for rfs to go
//! away (a lifeline pipe: when rfs exits, even by SIGKILL, the init exits
//! and the kernel kills every process of its PID namespace).
//!
//! The root (a read-only tmpfs, `pivot_root`ed into): the system
//! directories (`/usr`, `/bin`, `/lib*`, `/sbin`, `/etc`, `/opt`, ...)
//! read-only, the sandbox home read-write at the same absolute path as on
//! the host (so paths agree with the provider's), the sandbox's own `tmp`
//! as `/tmp`, a minimal `/dev` with a private devpts, and a `/proc` of its
//! own PID namespace. Nothing else of the host exists inside.
//!
//! Commands enter through `setns` (user, mount, PID, IPC, network) in the
//! forked child of a spawn, which then forks once more (joining a PID
//! namespace only applies to children): the grandchild drops every
//! capability and execs the command; the middle process closes all its
//! descriptors, waits, and exits the way the command did. Both stay in the
//! spawn's process group, so the runtime's group kills keep working.
//!
//! Code between `fork` and `exec`/`_exit` only makes raw system calls on
//! data prepared before the fork (no allocation, no locks).

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use libc::c_ulong;

/// System directories bound read-only into every isolated sandbox (those
/// that exist; symlinks such as a merged-/usr `/bin` are recreated).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix",
];
/// Device nodes bound from the host into the sandbox's `/dev`.
const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// Why namespaces can or cannot be used here; probed once per process.
pub fn availability() -> Result<(), String> {
    static PROBE: OnceLock<Result<(), String>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

/// For `rfs doctor`: what `local` would isolate with in `mode`
/// (`RFS_LOCAL_ISOLATION` when `None`), or why it would refuse to run.
pub fn doctor_line(mode: Option<super::isolation::IsolationMode>) -> Result<String, String> {
    use super::isolation::{IsolationRequest, ISOLATION_ENV};
    let req = match mode {
        Some(m) => IsolationRequest {
            mode: m,
            source: "argument".into(),
            network: true,
        },
        None => IsolationRequest::from_settings(None, std::env::var(ISOLATION_ENV).ok().as_deref())
            .map_err(|e| e.to_string())?,
    };
    decide(&req)
        .map(|f| format!("isolation {}", f.describe()))
        .map_err(|e| format!("isolation refused: {e}"))
}

/// What `local` has in force for `req`, or why it refuses.
pub fn decide(
    req: &super::isolation::IsolationRequest,
) -> Result<super::isolation::IsolationInForce, super::isolation::IsolationError> {
    use super::isolation::{IsolationError, IsolationInForce, IsolationMode};
    let by = &req.source;
    let ns = |reason: String| IsolationInForce {
        mode: "namespaces".into(),
        reason,
        network: req.network,
    };
    match req.mode {
        IsolationMode::None if !req.network => {
            Err(IsolationError::NetworkNeedsNamespaces { by: by.clone() })
        }
        IsolationMode::None => Ok(IsolationInForce {
            mode: "none".into(),
            reason: format!("requested by {by}: commands run on the host"),
            network: true,
        }),
        IsolationMode::Namespaces => match availability() {
            Ok(()) => Ok(ns(format!("requested by {by}"))),
            Err(why) => Err(IsolationError::NamespacesUnavailable {
                by: by.clone(),
                why,
            }),
        },
        IsolationMode::Auto => match availability() {
            Ok(()) => Ok(ns(format!(
                "auto ({by}): the kernel permits unprivileged user namespaces"
            ))),
            Err(why) if !req.network => Err(IsolationError::NetworkWithoutNamespaces { why }),
            Err(why) => Ok(IsolationInForce {
                mode: "none".into(),
                reason: format!(
                    "auto ({by}): namespaces not available ({why}); commands run on the host"
                ),
                network: true,
            }),
        },
    }
}

/// Try what an isolated sandbox needs (user, mount, PID and IPC
/// namespaces, a `/proc` of its own) in a throwaway init.
fn probe() -> Result<(), String> {
    let plan = Plan {
        ops: vec![
            Op::private_root(),
            Op::Mount {
                src: Some(cs("proc")),
                target: cs("/proc"),
                fstype: Some(cs("proc")),
                flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                data: None,
            },
        ],
        network: true,
    };
    match Init::start(&plan) {
        Ok(init) => {
            drop(init);
            Ok(())
        }
        Err(e) => Err(explain(e)),
    }
}

/// A failure, with the kernel settings that usually explain it.
fn explain(e: String) -> String {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let mut why = vec![e];
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        why.push("sysctl user.max_user_namespaces is 0".into());
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        why.push("sysctl kernel.unprivileged_userns_clone is 0".into());
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        why.push("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)".into());
    }
    why.join("; ")
}

fn cs(s: &str) -> CString {
    CString::new(s).expect("no NUL in constant")
}

fn cpath(p: &Path) -> Result<CString, String> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| format!("path {} contains a NUL byte", p.display()))
}

/// One setup step of the init, prepared before the fork.
#[derive(Debug)]
enum Op {
    Mkdir(CString),
    Symlink {
        target: CString,
        link: CString,
    },
    Touch(CString),
    Mount {
        src: Option<CString>,
        target: CString,
        fstype: Option<CString>,
        flags: c_ulong,
        data: Option<CString>,
    },
    /// Make a mount (and, recursively, those under it) read-only;
    /// `fallback` are the flags a plain remount must keep.
    ReadOnly {
        target: CString,
        recursive: bool,
        fallback: c_ulong,
    },
    LoopbackUp,
    PivotRoot(CString),
}

impl Op {
    fn private_root() -> Op {
        Op::Mount {
            src: None,
            target: cs("/"),
            fstype: None,
            flags: libc::MS_REC | libc::MS_PRIVATE,
            data: None,
        }
    }

    fn describe(&self) -> String {
        let s = |c: &CString| c.to_string_lossy().into_owned();
        match self {
            Op::Mkdir(p) => format!("creating directory {}", s(p)),
            Op::Symlink { link, .. } => format!("creating symlink {}", s(link)),
            Op::Touch(p) => format!("creating {}", s(p)),
            Op::Mount {
                target,
                fstype,
                src,
                ..
            } => match (fstype, src) {
                (Some(f), _) => format!("mounting {} on {}", s(f), s(target)),
                (None, Some(src)) => format!("binding {} to {}", s(src), s(target)),
                (None, None) => format!("making the mounts of {} private", s(target)),
            },
            Op::ReadOnly { target, .. } => format!("making {} read-only", s(target)),
            Op::LoopbackUp => "bringing up the loopback interface".into(),
            Op::PivotRoot(p) => format!("pivoting into {}", s(p)),
        }
    }

    /// Run in the init (after fork: raw system calls only).
    unsafe fn run(&self) -> Result<(), i32> {
        let ok = |r: libc::c_int| if r == 0 { Ok(()) } else { Err(errno()) };
        let opt = |c: &Option<CString>| c.as_ref().map_or(std::ptr::null(), |c| c.as_ptr());
        match self {
            Op::Mkdir(p) => {
                if libc::mkdir(p.as_ptr(), 0o755) == 0 || errno() == libc::EEXIST {
                    Ok(())
                } else {
                    Err(errno())
                }
            }
            Op::Symlink { target, link } => ok(libc::symlink(target.as_ptr(), link.as_ptr())),
            Op::Touch(p) => {
                let fd = libc::open(
                    p.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                );
                if fd < 0 {
                    return Err(errno());
                }
                libc::close(fd);
                Ok(())
            }
            Op::Mount {
                src,
                target,
                fstype,
                flags,
                data,
            } => ok(libc::mount(
                opt(src),
                target.as_ptr(),
                opt(fstype),
                *flags,
                opt(data).cast(),
            )),
            Op::ReadOnly {
                target,
                recursive,
                fallback,
            } => {
                #[repr(C)]
                struct MountAttr {
                    attr_set: u64,
                    attr_clr: u64,
                    propagation: u64,
                    userns_fd: u64,
                }
                const MOUNT_ATTR_RDONLY: u64 = 0x1;
                const AT_RECURSIVE: libc::c_uint = 0x8000;
                let attr = MountAttr {
                    attr_set: MOUNT_ATTR_RDONLY,
                    attr_clr: 0,
                    propagation: 0,
                    userns_fd: 0,
                };
                let r = libc::syscall(
                    libc::SYS_mount_setattr,
                    libc::AT_FDCWD,
                    target.as_ptr(),
                    if *recursive { AT_RECURSIVE } else { 0 },
                    &attr as *const MountAttr,
                    std::mem::size_of::<MountAttr>(),
                );
                if r == 0 {
                    return Ok(());
                }
                if errno() != libc::ENOSYS {
                    return Err(errno());
                }
                // Kernels before 5.12: remount the top mount only.
                ok(libc::mount(
                    std::ptr::null(),
                    target.as_ptr(),
                    std::ptr::null(),
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | fallback,
                    std::ptr::null(),
                ))
            }
            Op::LoopbackUp => {
                let sock = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
                if sock < 0 {
                    return Err(errno());
                }
                let mut req: libc::ifreq = std::mem::zeroed();
                req.ifr_name[0] = b'l' as libc::c_char;
                req.ifr_name[1] = b'o' as libc::c_char;
                let r = if libc::ioctl(sock, libc::SIOCGIFFLAGS, &mut req) < 0 {
                    Err(errno())
                } else {
                    req.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
                    if libc::ioctl(sock, libc::SIOCSIFFLAGS, &req) < 0 {
                        Err(errno())
                    } else {
                        Ok(())
                    }
                };
                libc::close(sock);
                r
            }
            Op::PivotRoot(root) => {
                let dot = c".".as_ptr();
                ok(libc::chdir(root.as_ptr()))?;
                ok(libc::syscall(libc::SYS_pivot_root, dot, dot) as libc::c_int)?;
                ok(libc::umount2(dot, libc::MNT_DETACH))?;
                ok(libc::chdir(c"/".as_ptr()))
            }
        }
    }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// The setup of one sandbox, planned on the host before the fork.
struct Plan {
    ops: Vec<Op>,
    network: bool,
}

impl Plan {
    /// The root of a sandbox whose directory is `dir` (holding `home/`,
    /// `tmp/` and the mount point `root/`).
    fn sandbox(dir: &Path, network: bool) -> Result<Plan, String> {
        let root = dir.join("root");
        let home = dir.join("home");
        let inside = |p: &Path| -> Result<CString, String> {
            cpath(&root.join(p.strip_prefix("/").unwrap_or(p)))
        };
        let mut ops = vec![
            Op::private_root(),
            Op::Mount {
                src: Some(cs("rfs-root")),
                target: cpath(&root)?,
                fstype: Some(cs("tmpfs")),
                flags: libc::MS_NOSUID | libc::MS_NODEV,
                data: Some(cs("mode=0755")),
            },
        ];
        for d in SYSTEM_DIRS {
            let p = Path::new(d);
            if home.starts_with(p) {
                return Err(format!(
                    "the sandbox home {} lies under {d}, which isolated sandboxes see read-only; set RFS_STATE_DIR elsewhere",
                    home.display()
                ));
            }
            let Ok(meta) = std::fs::symlink_metadata(p) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(p).map_err(|e| format!("reading {d}: {e}"))?;
                ops.push(Op::Symlink {
                    target: cpath(&target)?,
                    link: inside(p)?,
                });
            } else if meta.is_dir() {
                ops.push(Op::Mkdir(inside(p)?));
                ops.push(Op::Mount {
                    src: Some(cpath(p)?),
                    target: inside(p)?,
                    fstype: None,
                    flags: libc::MS_BIND | libc::MS_REC,
                    data: None,
                });
                ops.push(Op::ReadOnly {
                    target: inside(p)?,
                    recursive: true,
                    fallback: kept_flags(p),
                });
            }
        }
        // The private /tmp first: a home under the host's /tmp (a state
        // directory in a temporary directory) is then reached through it.
        ops.push(Op::Mkdir(inside(Path::new("/tmp"))?));
        ops.push(Op::Mount {
            src: Some(cpath(&dir.join("tmp"))?),
            target: inside(Path::new("/tmp"))?,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
        });
        let mut chain: Vec<&Path> = home.ancestors().filter(|a| a.parent().is_some()).collect();
        chain.reverse();
        for a in chain {
            ops.push(Op::Mkdir(inside(a)?));
        }
        ops.push(Op::Mount {
            src: Some(cpath(&home)?),
            target: inside(&home)?,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
        });
        let dev = Path::new("/dev");
        ops.push(Op::Mkdir(inside(dev)?));
        ops.push(Op::Mount {
            src: Some(cs("rfs-dev")),
            target: inside(dev)?,
            fstype: Some(cs("tmpfs")),
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
            data: Some(cs("mode=0755")),
        });
        for d in DEVICES {
            let host = dev.join(d);
            if !host.exists() {
                continue;
            }
            ops.push(Op::Touch(inside(&host)?));
            ops.push(Op::Mount {
                src: Some(cpath(&host)?),
                target: inside(&host)?,
                fstype: None,
                flags: libc::MS_BIND,
                data: None,
            });
        }
        ops.push(Op::Mkdir(inside(&dev.join("pts"))?));
        ops.push(Op::Mount {
            src: Some(cs("devpts")),
            target: inside(&dev.join("pts"))?,
            fstype: Some(cs("devpts")),
            flags: libc::MS_NOSUID | libc::MS_NOEXEC,
            data: Some(cs("newinstance,ptmxmode=0666,mode=0620")),
        });
        ops.push(Op::Mkdir(inside(&dev.join("shm"))?));
        ops.push(Op::Mount {
            src: Some(cs("rfs-shm")),
            target: inside(&dev.join("shm"))?,
            fstype: Some(cs("tmpfs")),
            flags: libc::MS_NOSUID | libc::MS_NODEV,
            data: Some(cs("mode=1777")),
        });
        for (target, link) in [
            ("pts/ptmx", "ptmx"),
            ("/proc/self/fd", "fd"),
            ("/proc/self/fd/0", "stdin"),
            ("/proc/self/fd/1", "stdout"),
            ("/proc/self/fd/2", "stderr"),
        ] {
            ops.push(Op::Symlink {
                target: cs(target),
                link: inside(&dev.join(link))?,
            });
        }
        ops.push(Op::ReadOnly {
            target: inside(dev)?,
            recursive: false,
            fallback: libc::MS_NOSUID | libc::MS_NOEXEC,
        });
        ops.push(Op::Mkdir(inside(Path::new("/proc"))?));
        ops.push(Op::Mount {
            src: Some(cs("proc")),
            target: inside(Path::new("/proc"))?,
            fstype: Some(cs("proc")),
            flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            data: None,
        });
        if !network {
            ops.push(Op::LoopbackUp);
        }
        ops.push(Op::ReadOnly {
            target: cpath(&root)?,
            recursive: false,
            fallback: libc::MS_NOSUID | libc::MS_NODEV,
        });
        ops.push(Op::PivotRoot(cpath(&root)?));
        Ok(Plan { ops, network })
    }
}

/// Mount flags a read-only remount of `p` must keep (locked in a user
/// namespace).
fn kept_flags(p: &Path) -> c_ulong {
    let Ok(st) = nix::sys::statvfs::statvfs(p) else {
        return 0;
    };
    use nix::sys::statvfs::FsFlags;
    let f = st.flags();
    let mut out = 0;
    for (fs, ms) in [
        (FsFlags::ST_NOSUID, libc::MS_NOSUID),
        (FsFlags::ST_NODEV, libc::MS_NODEV),
        (FsFlags::ST_NOEXEC, libc::MS_NOEXEC),
        (FsFlags::ST_NOATIME, libc::MS_NOATIME),
        (FsFlags::ST_NODIRATIME, libc::MS_NODIRATIME),
        (FsFlags::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if f.contains(fs) {
            out |= ms;
        }
    }
    out
}

/// Messages on the report pipe: (kind, a, b), 12 bytes, written atomically.
const MSG_PID: u32 = 1;
const MSG_FAIL: u32 = 2;
const MSG_READY: u32 = 3;
/// `a` of a failure before the plan ran.
const STEP_UNSHARE: u32 = u32::MAX;
const STEP_MAPS: u32 = u32::MAX - 1;
const STEP_FORK: u32 = u32::MAX - 2;

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
    ns: Vec<OwnedFd>,
    killed: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for Init {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Init").field("pid", &self.pid).finish()
    }
}

fn pipe_cloexec() -> Result<(OwnedFd, OwnedFd), String> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(format!("pipe: {}", io::Error::last_os_error()));
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Init {
    /// Start the init of an isolated sandbox living in `dir`.
    pub fn for_sandbox(dir: &Path, network: bool) -> Result<Init, String> {
        let plan = Plan::sandbox(dir, network)?;
        Init::start(&plan)
    }

    fn start(plan: &Plan) -> Result<Init, String> {
        let (report_r, report_w) = pipe_cloexec()?;
        let (life_r, life_w) = pipe_cloexec()?;
        // SAFETY: geteuid/getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let uid_map = format!("{uid} {uid} 1\n");
        let gid_map = format!("{gid} {gid} 1\n");
        let mut flags =
            libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC;
        if !plan.network {
            flags |= libc::CLONE_NEWNET;
        }
        let child = Child {
            flags,
            uid_map: uid_map.as_bytes(),
            gid_map: gid_map.as_bytes(),
            plan,
            report: report_w.as_raw_fd(),
            lifeline: life_r.as_raw_fd(),
        };
        // SAFETY: the child only makes raw system calls on prepared data
        // and ends in `_exit` (see `Child::outer`).
        let outer = unsafe { libc::fork() };
        if outer < 0 {
            return Err(format!("fork: {}", io::Error::last_os_error()));
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
        };
        let mut file = std::fs::File::from(report_r);
        let mut ready = false;
        while !ready || init.pid == 0 {
            let mut msg = [0u8; 12];
            use std::io::Read;
            if let Err(e) = file.read_exact(&mut msg) {
                return Err(format!("the sandbox init ended before it was ready ({e})"));
            }
            let word = |i: usize| u32::from_ne_bytes(msg[i..i + 4].try_into().expect("4 bytes"));
            match word(0) {
                MSG_PID => init.pid = word(4) as libc::pid_t,
                MSG_READY => ready = true,
                _ => {
                    let step = word(4);
                    let err = io::Error::from_raw_os_error(word(8) as i32);
                    let what = match step {
                        STEP_UNSHARE => "creating user/mount/PID namespaces (unshare)".to_owned(),
                        STEP_MAPS => "mapping the uid/gid into the user namespace".to_owned(),
                        STEP_FORK => "starting the namespace init (fork)".to_owned(),
                        i => plan
                            .ops
                            .get(i as usize)
                            .map_or_else(|| format!("setup step {i}"), Op::describe),
                    };
                    return Err(format!("{what} failed: {err}"));
                }
            }
        }
        let mut kinds = vec!["user", "mnt", "pid", "ipc"];
        if !plan.network {
            kinds.push("net");
        }
        for k in kinds {
            let path = format!("/proc/{}/ns/{k}", init.pid);
            let f = std::fs::File::open(&path).map_err(|e| format!("opening {path}: {e}"))?;
            init.ns.push(OwnedFd::from(f));
        }
        Ok(init)
    }

    /// Make `cmd` run inside the sandbox, in `cwd` (a path inside). The
    /// caller must not set a host working directory on `cmd`.
    pub fn enter(
        self: &std::sync::Arc<Self>,
        cmd: &mut std::process::Command,
        cwd: &str,
    ) -> Result<(), String> {
        use std::os::unix::process::CommandExt;
        let cwd = CString::new(cwd).map_err(|_| format!("cwd {cwd:?} contains a NUL byte"))?;
        let me = self.clone();
        // SAFETY: the closure runs between fork and exec and only makes raw
        // system calls on data prepared here.
        unsafe {
            cmd.pre_exec(move || {
                let fds: [RawFd; 5] =
                    std::array::from_fn(|i| me.ns.get(i).map_or(-1, |f| f.as_raw_fd()));
                enter_child(&fds, &cwd)
            });
        }
        Ok(())
    }

    /// Kill the sandbox's PID namespace and wait until it is gone.
    pub fn kill(&self) {
        if self.killed.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
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
struct Child<'a> {
    flags: libc::c_int,
    uid_map: &'a [u8],
    gid_map: &'a [u8],
    plan: &'a Plan,
    report: RawFd,
    lifeline: RawFd,
}

impl Child<'_> {
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
        keep_only(&[self.report, self.lifeline]);
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
        let mut status = 0;
        while libc::waitpid(init, &mut status, 0) < 0 && errno() == libc::EINTR {}
        libc::_exit(0)
    }

    /// PID 1 of the sandbox: build the root, then reap until rfs is gone.
    unsafe fn init(&self) -> ! {
        for (i, op) in self.plan.ops.iter().enumerate() {
            if let Err(e) = op.run() {
                self.say(MSG_FAIL, i as u32, e as u32);
                libc::_exit(1);
            }
        }
        self.say(MSG_READY, 0, 0);
        libc::close(self.report);
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

/// Default dispositions for every signal (handlers inherited from rfs
/// must not run in the children), nothing blocked.
unsafe fn reset_signals() {
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
unsafe fn quiet_stdio() {
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

/// Close every descriptor above stderr except `keep`.
unsafe fn keep_only(keep: &[RawFd]) {
    let (a, b) = if keep[0] < keep[1] {
        (keep[0], keep[1])
    } else {
        (keep[1], keep[0])
    };
    close_range(3, a - 1);
    close_range(a + 1, b - 1);
    close_range(b + 1, i32::MAX);
}

unsafe fn close_range(from: RawFd, to: RawFd) {
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

unsafe fn write_file(path: &std::ffi::CStr, data: &[u8]) -> bool {
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

/// In the forked child of a spawn: join the sandbox and fork the command;
/// the middle process waits and mirrors the command's end.
fn enter_child(fds: &[RawFd], cwd: &CString) -> io::Result<()> {
    // SAFETY: raw system calls only; see the module documentation.
    unsafe {
        for &fd in fds.iter().filter(|f| **f >= 0) {
            if libc::setns(fd, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err(io::Error::last_os_error());
        }
        if pid == 0 {
            if libc::chdir(cwd.as_ptr()) != 0 {
                return Err(io::Error::last_os_error());
            }
            drop_capabilities();
            return Ok(());
        }
        // The middle: hold nothing (the spawner's exec-error pipe and the
        // command's stdio belong to the command), wait, mirror its end.
        close_range(0, i32::MAX);
        let mut status = 0;
        while libc::waitpid(pid, &mut status, 0) < 0 {
            if errno() != libc::EINTR {
                libc::_exit(127);
            }
        }
        if libc::WIFSIGNALED(status) {
            let sig = libc::WTERMSIG(status);
            libc::signal(sig, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, sig);
            libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
            libc::kill(libc::getpid(), sig);
            libc::_exit(128 + sig);
        }
        libc::_exit(libc::WEXITSTATUS(status))
    }
}

/// No capabilities, in the sandbox's user namespace or anywhere, and no
/// way to gain any (a uid 0 inside would otherwise hold them all).
unsafe fn drop_capabilities() {
    libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    for cap in 0..64 {
        // EINVAL: past the kernel's last capability.
        if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno() == libc::EINVAL {
            break;
        }
    }
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
    let data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    libc::syscall(libc::SYS_capset, &header as *const Header, data.as_ptr());
}

/// The mount point of a sandbox's root inside its directory.
pub fn root_dir(dir: &Path) -> PathBuf {
    dir.join("root")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_refuses_a_home_under_a_system_directory() {
        let e = Plan::sandbox(Path::new("/usr/share/rfs/local/sandboxes/x"), true)
            .err()
            .unwrap();
        assert!(e.contains("lies under /usr"), "{e}");
    }

    #[test]
    fn decide_refuses_network_off_without_namespaces() {
        use crate::provider::isolation::*;
        let req = IsolationRequest {
            mode: IsolationMode::None,
            source: "test".into(),
            network: false,
        };
        assert_eq!(
            decide(&req).unwrap_err(),
            IsolationError::NetworkNeedsNamespaces { by: "test".into() }
        );
    }
}
