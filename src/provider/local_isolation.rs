//! Namespaces for `local` sandboxes (Linux, unprivileged user namespaces;
//! no root, no setuid helper).
//!
//! Each isolated sandbox has one init process that owns its namespaces:
//! rfs forks a child that unshares user, mount, PID, IPC, UTS (and, with
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
//! Commands enter without a `fork` of rfs: the calling thread starts a
//! child with `clone(CLONE_VM | CLONE_VFORK)` (it shares rfs's memory, so
//! nothing is copied, like `posix_spawn`), which joins the sandbox with
//! `setns` (user, mount, PID, IPC, network) and starts the command the
//! same way with `CLONE_PARENT` (joining a PID namespace only applies to
//! children): the command is rfs's own child, in the sandbox's PID
//! namespace, leader of its own process group (or session, for a
//! terminal), with no capabilities and `no_new_privs`. rfs waits for it
//! through a pidfd; the group kills of the runtime reach it directly.
//!
//! Code between `fork`/`clone` and `exec`/`_exit` only makes raw system
//! calls on data prepared before (no allocation, no locks): the spawn
//! children share rfs's memory while rfs's other threads keep running.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
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

/// Why a sandbox's namespaces could not be set up, or a command could
/// not be started inside them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("path {0} contains a NUL byte")]
    NulByte(String),
    #[error("the sandbox home {home} lies under {dir}, which isolated sandboxes see read-only; set RFS_STATE_DIR elsewhere")]
    HomeUnderSystemDir { home: String, dir: &'static str },
    /// A system call of rfs's own failed (`what`: the call and its object).
    #[error("{what}: {}", os(*.errno))]
    Os { what: String, errno: i32 },
    /// A step of the sandbox's setup failed in the children.
    #[error("{what} failed: {}", os(*.errno))]
    Step { what: String, errno: i32 },
    #[error("the sandbox init ended before it was ready ({0})")]
    InitEnded(String),
    /// Namespaces are not usable here, with the kernel settings that
    /// usually explain it.
    #[error("{cause}{}", hints.iter().map(|h| format!("; {h}")).collect::<String>())]
    Unavailable {
        cause: Box<SetupError>,
        hints: Vec<String>,
    },
}

/// Why a command could not be started in a sandbox (the sandbox works).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    #[error("{what} contains a NUL byte")]
    NulByte { what: &'static str },
    #[error("empty argv")]
    EmptyArgv,
    #[error("environment variable name {0:?} is empty or contains `=`")]
    EnvName(String),
    #[error("the file to execute must be a descriptor above the standard streams")]
    ExecFd,
    /// `what`: which step of the start (the program itself for `exec`).
    #[error("{what}: {}", os(*.errno))]
    Os { what: String, errno: i32 },
}

fn os(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

fn io_setup(what: impl Into<String>, e: io::Error) -> SetupError {
    SetupError::Os {
        what: what.into(),
        errno: e.raw_os_error().unwrap_or(libc::EIO),
    }
}

fn last_os(what: impl Into<String>) -> SetupError {
    SetupError::Os {
        what: what.into(),
        errno: errno(),
    }
}

/// Why namespaces can or cannot be used here; probed once per process.
pub fn availability() -> Result<(), SetupError> {
    static PROBE: OnceLock<Result<(), SetupError>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

/// For `rfs doctor`: what `local` would isolate with in `mode`
/// (`RFS_LOCAL_ISOLATION` when `None`), or why it would refuse to run.
pub fn doctor_line(mode: Option<super::isolation::IsolationMode>) -> Result<String, DoctorRefusal> {
    use super::isolation::{IsolationRequest, ISOLATION_ENV};
    let req = match mode {
        Some(m) => IsolationRequest {
            mode: m,
            source: "argument".into(),
            network: true,
        },
        None => IsolationRequest::from_settings(None, std::env::var(ISOLATION_ENV).ok().as_deref())
            .map_err(DoctorRefusal::Setting)?,
    };
    decide(&req)
        .map(|f| format!("isolation {}", f.describe()))
        .map_err(DoctorRefusal::Refused)
}

/// Why `rfs doctor`'s local line fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DoctorRefusal {
    /// `RFS_LOCAL_ISOLATION` is malformed.
    #[error(transparent)]
    Setting(super::isolation::IsolationError),
    /// The mode asked for would refuse to run.
    #[error("isolation refused: {0}")]
    Refused(super::isolation::IsolationError),
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
                why: why.to_string(),
            }),
        },
        IsolationMode::Auto => match availability() {
            Ok(()) => Ok(ns(format!(
                "auto ({by}): the kernel permits unprivileged user namespaces"
            ))),
            Err(why) if !req.network => Err(IsolationError::NetworkWithoutNamespaces {
                why: why.to_string(),
            }),
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
fn probe() -> Result<(), SetupError> {
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
fn explain(e: SetupError) -> SetupError {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let mut why = vec![];
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        why.push("sysctl user.max_user_namespaces is 0".into());
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        why.push("sysctl kernel.unprivileged_userns_clone is 0".into());
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        why.push("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)".into());
    }
    SetupError::Unavailable {
        cause: Box::new(e),
        hints: why,
    }
}

fn cs(s: &str) -> CString {
    CString::new(s).expect("no NUL in constant")
}

fn cpath(p: &Path) -> Result<CString, SetupError> {
    CString::new(p.as_os_str().as_bytes()).map_err(|_| SetupError::NulByte(p.display().to_string()))
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
    /// Name the sandbox's own UTS namespace.
    Hostname(CString),
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
            Op::Hostname(h) => format!("setting the hostname {}", s(h)),
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
            Op::Hostname(h) => ok(libc::sethostname(h.as_ptr(), h.as_bytes().len())),
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
    fn sandbox(dir: &Path, network: bool) -> Result<Plan, SetupError> {
        let root = dir.join("root");
        let home = dir.join("home");
        let inside = |p: &Path| -> Result<CString, SetupError> {
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
                return Err(SetupError::HomeUnderSystemDir {
                    home: home.display().to_string(),
                    dir: d,
                });
            }
            let Ok(meta) = std::fs::symlink_metadata(p) else {
                continue;
            };
            if meta.file_type().is_symlink() {
                let target =
                    std::fs::read_link(p).map_err(|e| io_setup(format!("reading {d}"), e))?;
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
        // The home after the private /tmp, /dev and /dev/shm, so that a
        // home below one of them (a state directory on the host's
        // /dev/shm) is bound over them, not hidden by them; before /dev is
        // made read-only, so its parents can still be created there.
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
        proc_guards(&mut ops, &inside)?;
        if !network {
            ops.push(Op::LoopbackUp);
        }
        ops.push(Op::Hostname(cs(HOSTNAME)));
        ops.push(Op::ReadOnly {
            target: cpath(&root)?,
            recursive: false,
            fallback: libc::MS_NOSUID | libc::MS_NODEV,
        });
        ops.push(Op::PivotRoot(cpath(&root)?));
        Ok(Plan { ops, network })
    }
}

/// The hostname of every isolated sandbox (its own UTS namespace: the
/// host's name is neither seen nor changed).
pub const HOSTNAME: &str = "rfs-sandbox";
/// Parts of the sandbox's `/proc` that reach the host kernel (its
/// settings, interrupt and bus tables, the SysRq trigger): bound
/// read-only over themselves, as container runtimes do. Even a step that
/// runs as the host's uid 0 (rfs run as root) cannot change them.
const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];
/// Files of `/proc` that expose the host kernel's memory, keys and
/// timers: hidden behind `/dev/null`.
const PROC_MASKED: &[&str] = &[
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
];

/// The ops that make the host-reaching parts of the sandbox's fresh
/// `/proc` read-only or hidden (after the `proc` mount).
fn proc_guards(
    ops: &mut Vec<Op>,
    inside: &dyn Fn(&Path) -> Result<CString, SetupError>,
) -> Result<(), SetupError> {
    let proc = Path::new("/proc");
    for p in PROC_READ_ONLY {
        let host = proc.join(p);
        if std::fs::symlink_metadata(&host).is_err() {
            continue;
        }
        ops.push(Op::Mount {
            src: Some(inside(&host)?),
            target: inside(&host)?,
            fstype: None,
            flags: libc::MS_BIND | libc::MS_REC,
            data: None,
        });
        ops.push(Op::ReadOnly {
            target: inside(&host)?,
            recursive: true,
            fallback: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        });
    }
    for p in PROC_MASKED {
        let host = proc.join(p);
        if !std::fs::symlink_metadata(&host).is_ok_and(|m| m.is_file()) {
            continue;
        }
        ops.push(Op::Mount {
            src: Some(cs("/dev/null")),
            target: inside(&host)?,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
        });
    }
    Ok(())
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
    /// Spawn stacks no start uses any more, kept for the next ones: a
    /// fresh mapping per command costs its page faults and, unmapped, a
    /// TLB shootdown across rfs's threads.
    spare_stacks: std::sync::Mutex<Vec<Stacks>>,
}

impl std::fmt::Debug for Init {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Init").field("pid", &self.pid).finish()
    }
}

/// A pipe (read end, write end), both close-on-exec.
pub fn pipe_cloexec() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

impl Init {
    /// Start the init of an isolated sandbox living in `dir`.
    pub fn for_sandbox(dir: &Path, network: bool) -> Result<Init, SetupError> {
        let plan = Plan::sandbox(dir, network)?;
        Init::start(&plan)
    }

    fn start(plan: &Plan) -> Result<Init, SetupError> {
        let (report_r, report_w) = pipe_cloexec().map_err(|e| io_setup("pipe", e))?;
        let (life_r, life_w) = pipe_cloexec().map_err(|e| io_setup("pipe", e))?;
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
        let child = Child {
            flags,
            uid_map: uid_map.as_bytes(),
            gid_map: gid_map.as_bytes(),
            plan,
            report: report_w.as_raw_fd(),
            lifeline: life_r.as_raw_fd(),
            args: own_args(),
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
    /// rfs's command line in memory (start, length), blanked in the init:
    /// its `/proc/1/cmdline` is readable inside.
    args: (usize, usize),
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

/// Where this process's command line lies in its memory (start, length;
/// length 0 if unknown): fields 48 and 49 of /proc/self/stat.
fn own_args() -> (usize, usize) {
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
}

/// Where a start failed (`Launch::stage`); 0: it did not.
const STAGE_SETNS: u32 = 1;
const STAGE_CLONE: u32 = 2;
const STAGE_STDIO: u32 = 3;
const STAGE_GROUP: u32 = 4;
const STAGE_SESSION: u32 = 5;
const STAGE_TERMINAL: u32 = 6;
const STAGE_CWD: u32 = 7;
const STAGE_EXEC: u32 = 8;

/// Stack of each spawn child (they run only the functions below; Rust's
/// stack probes touch pages of it, so it is generous for debug builds).
const SPAWN_STACK: usize = 256 * 1024;

/// How many unused pairs of spawn stacks an init keeps (one per command
/// started at the same time).
const SPARE_STACKS: usize = 4;

/// Two stacks with a guard page below each, unmapped when dropped.
struct Stacks {
    base: *mut libc::c_void,
    len: usize,
}

// SAFETY: `Stacks` owns its private mapping outright (nothing else holds
// the pointer once a start has returned), so it may move between threads.
unsafe impl Send for Stacks {}

impl Stacks {
    fn new() -> Result<Stacks, SpawnError> {
        let page = 4096;
        let len = 2 * (page + SPAWN_STACK);
        // SAFETY: a fresh private anonymous mapping; nothing else uses it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(SpawnError::Os {
                what: "allocating the start's stacks".into(),
                errno: errno(),
            });
        }
        let stacks = Stacks { base, len };
        for i in 0..2 {
            // SAFETY: a page inside the mapping above.
            if unsafe { libc::mprotect(stacks.at(i).cast(), page, libc::PROT_NONE) } != 0 {
                return Err(SpawnError::Os {
                    what: "guarding the start's stacks".into(),
                    errno: errno(),
                });
            }
        }
        Ok(stacks)
    }

    /// The bottom (guard page) of stack `i`.
    fn at(&self, i: usize) -> *mut u8 {
        // SAFETY: within the mapping.
        unsafe { self.base.cast::<u8>().add(i * (4096 + SPAWN_STACK)) }
    }

    /// The top of stack `i` (stacks grow down; 16-byte aligned).
    fn top(&self, i: usize) -> *mut libc::c_void {
        // SAFETY: one past the end of stack `i`, still within the mapping
        // or its end.
        unsafe { self.at(i).add(4096 + SPAWN_STACK).cast() }
    }
}

impl Drop for Stacks {
    fn drop(&mut self) {
        // SAFETY: our own mapping, no child uses it any more.
        unsafe { libc::munmap(self.base, self.len) };
    }
}

/// Everything the spawn children need, prepared before the `clone`, and
/// what they report back (they share rfs's memory).
struct Launch {
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
    stacks: Stacks,
    /// Written by the children.
    pid: std::sync::atomic::AtomicI32,
    stage: std::sync::atomic::AtomicU32,
    errno: std::sync::atomic::AtomicI32,
}

impl Launch {
    fn prepare(init: &Init, spec: &SpawnSpec<'_>, stacks: Stacks) -> Result<Launch, SpawnError> {
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
        let mut envp = vec![];
        for (k, v) in &env {
            if k.is_empty() || k.contains('=') {
                return Err(SpawnError::EnvName((*k).to_owned()));
            }
            let kv = c("an environment variable", &format!("{k}={v}"))?;
            envp.push(kv.as_ptr());
            strings.push(kv);
        }
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
            stacks,
            pid: 0.into(),
            stage: 0.into(),
            errno: 0.into(),
        })
    }

    /// Start the children, wait until the command runs or failed. Gives
    /// the stacks back: no child uses them any more.
    fn run(self) -> (Result<SandboxChild, SpawnError>, Stacks) {
        let started = self.start();
        (started, self.stacks)
    }

    fn start(&self) -> Result<SandboxChild, SpawnError> {
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
            let c1 = libc::clone(
                launch_outer,
                self.stacks.top(0),
                libc::CLONE_VM | libc::CLONE_VFORK | libc::CLONE_FILES | libc::SIGCHLD,
                arg,
            );
            let e = errno();
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
            let what = match stage {
                STAGE_SETNS => "joining the sandbox's namespaces (setns)".into(),
                STAGE_CLONE => "starting a process in the sandbox (clone)".into(),
                STAGE_STDIO => "setting up its standard streams".into(),
                STAGE_GROUP => "making it a process group of its own".into(),
                STAGE_SESSION => "making it a session of its own".into(),
                STAGE_TERMINAL => "giving it its terminal".into(),
                STAGE_CWD => format!("entering {}", self.cwd.to_string_lossy()),
                _ => format!("executing {}", self.programs[0].to_string_lossy()),
            };
            return Err(SpawnError::Os {
                what,
                errno: self.errno.load(SeqCst),
            });
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

/// Wait for one of our children that has ended or is ending.
fn reap(pid: libc::pid_t) -> Option<libc::c_int> {
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

/// The first spawn child (rfs's memory, fd table; own fs): join the
/// sandbox, start the command as rfs's child, exit.
extern "C" fn launch_outer(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `Launch` that `Launch::run` keeps alive; raw
    // system calls only.
    unsafe {
        let l = &*(arg as *const Launch);
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
    fn new(pid: libc::pid_t) -> SandboxChild {
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
    use std::os::fd::AsFd;

    #[test]
    fn plan_refuses_a_home_under_a_system_directory() {
        let e = Plan::sandbox(Path::new("/usr/share/rfs/local/sandboxes/x"), true)
            .err()
            .unwrap();
        assert_eq!(
            e,
            SetupError::HomeUnderSystemDir {
                home: "/usr/share/rfs/local/sandboxes/x/home".into(),
                dir: "/usr"
            }
        );
        assert!(e.to_string().contains("lies under /usr"), "{e}");
    }

    /// Commands started one after another in one sandbox reuse the
    /// start's stacks (at most one spare pair is kept for them), and each
    /// still runs and reports its own exit status.
    #[test]
    fn sequential_starts_reuse_one_pair_of_stacks_and_each_command_runs() {
        if availability().is_err() {
            eprintln!("skipped: namespaces unavailable here");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        for d in ["home", "tmp", "root"] {
            std::fs::create_dir(dir.path().join(d)).unwrap();
        }
        let init = Init::for_sandbox(dir.path(), true).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
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
            };
            let mut child = init.spawn(&spec).unwrap();
            let status = rt.block_on(child.wait()).unwrap();
            assert_eq!(status.code(), Some(code));
            assert_eq!(init.spare_stacks.lock().unwrap().len(), 1);
        }
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
