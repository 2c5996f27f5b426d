//! The root of an isolated sandbox, planned on the host before the fork
//! ([`Plan`]: a list of [`Op`]s the init runs): system directories
//! read-only, the home read-write, a private `/dev`, `/tmp` and `/proc`
//! (its host-reaching parts read-only or masked).

use libc::c_ulong;
use std::ffi::CString;
use std::path::{Path, PathBuf};

use super::private_etc::HOSTNAME;
use super::{errors::*, sys::*};

/// System directories bound read-only into every isolated sandbox (those
/// that exist; symlinks such as a merged-/usr `/bin` are recreated).
pub(super) const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/nix",
];
/// Device nodes bound from the host into the sandbox's `/dev`.
pub(super) const DEVICES: &[&str] = &["null", "zero", "full", "random", "urandom", "tty"];

/// One setup step of the init, prepared before the fork.
#[derive(Debug)]
pub(super) enum Op {
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
    /// Move a detached (id-mapped, read-only) tree rfs prepared onto
    /// `target` (see [`super::idmap`]).
    MoveTree {
        fd: std::os::fd::OwnedFd,
        target: CString,
    },
    LoopbackUp,
    /// Name the sandbox's own UTS namespace.
    Hostname(CString),
    PivotRoot(CString),
}

impl Op {
    pub(super) fn private_root() -> Op {
        Op::Mount {
            src: None,
            target: cs("/"),
            fstype: None,
            flags: libc::MS_REC | libc::MS_PRIVATE,
            data: None,
        }
    }

    pub(super) fn describe(&self) -> String {
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
            Op::MoveTree { target, .. } => format!("moving an id-mapped tree onto {}", s(target)),
            Op::LoopbackUp => "bringing up the loopback interface".into(),
            Op::Hostname(h) => format!("setting the hostname {}", s(h)),
            Op::PivotRoot(p) => format!("pivoting into {}", s(p)),
        }
    }

    /// Run in the init (after fork: raw system calls only).
    pub(super) unsafe fn run(&self) -> Result<(), i32> {
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
            Op::MoveTree { fd, target } => {
                use std::os::fd::AsRawFd;
                ok(super::idmap::move_into(fd.as_raw_fd(), target) as libc::c_int)
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

/// The setup of one sandbox, planned on the host before the fork.
pub(super) struct Plan {
    pub(super) ops: Vec<Op>,
    pub(super) network: bool,
}

impl Plan {
    /// The descriptors the init needs (those of [`Op::MoveTree`]).
    pub(super) fn fds(&self) -> Vec<std::os::fd::RawFd> {
        use std::os::fd::AsRawFd;
        self.ops
            .iter()
            .filter_map(|op| match op {
                Op::MoveTree { fd, .. } => Some(fd.as_raw_fd()),
                _ => None,
            })
            .collect()
    }
}

impl Plan {
    /// The root of a sandbox whose directory is `dir` (holding `home/`,
    /// `tmp/` and the mount point `root/`).
    pub(super) fn sandbox(dir: &Path, network: bool) -> Result<Plan, SetupError> {
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
        system_dirs(&mut ops, &home, &inside)?;
        private_etc(&mut ops, dir, network, &inside)?;
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
        let shm =
            super::disk::shm_dir(dir).map_err(|e| io_setup("creating the sandbox's shm", e))?;
        private_dev(&mut ops, &shm, &inside)?;
        // The home at its one path inside (whichever folder of the state
        // directory holds it: see `super::HOME_INSIDE`).
        bind_home(&mut ops, &home, &inside)?;
        ops.push(Op::ReadOnly {
            target: inside(Path::new("/dev"))?,
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

/// The ops that bind the host's [`SYSTEM_DIRS`] read-only into the root
/// (recreating those that are symlinks); refused when `home` is under one.
fn system_dirs(
    ops: &mut Vec<Op>,
    home: &Path,
    inside: &dyn Fn(&Path) -> Result<CString, SetupError>,
) -> Result<(), SetupError> {
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
            let target = std::fs::read_link(p).map_err(|e| io_setup(format!("reading {d}"), e))?;
            ops.push(Op::Symlink {
                target: cpath(&target)?,
                link: inside(p)?,
            });
        } else if meta.is_dir() {
            ops.push(Op::Mkdir(inside(p)?));
            bind_host_read_only(ops, p, inside(p)?)?;
        }
    }
    Ok(())
}

/// The ops that show the host's directory `host` read-only at `target`:
/// id-mapped where rfs runs as root (a step then reads only what the
/// host's unprivileged users may, see [`super::idmap`]), a plain
/// read-only bind otherwise.
pub(super) fn bind_host_read_only(
    ops: &mut Vec<Op>,
    host: &Path,
    target: CString,
) -> Result<(), SetupError> {
    if super::idmap::needed() {
        ops.push(Op::MoveTree {
            fd: super::idmap::tree(host)?,
            target,
        });
        return Ok(());
    }
    ops.push(Op::Mount {
        src: Some(cpath(host)?),
        target: target.clone(),
        fstype: None,
        flags: libc::MS_BIND | libc::MS_REC,
        data: None,
    });
    ops.push(Op::ReadOnly {
        target,
        recursive: true,
        fallback: kept_flags(host),
    });
    Ok(())
}

/// The ops of the sandbox's private `/etc`: composed in `dir/etc` (see
/// [`super::private_etc`]), bound read-only over `/etc`, with the host's
/// CA certificates and `alternatives` read-only inside it.
fn private_etc(
    ops: &mut Vec<Op>,
    dir: &Path,
    network: bool,
    inside: &dyn Fn(&Path) -> Result<CString, SetupError>,
) -> Result<(), SetupError> {
    let etc = Path::new("/etc");
    if dir.starts_with(etc) {
        return Err(SetupError::HomeUnderSystemDir {
            home: dir.join("home").display().to_string(),
            dir: "/etc",
        });
    }
    let bound = super::private_etc::compose(dir, network)?;
    ops.push(Op::Mkdir(inside(etc)?));
    ops.push(Op::Mount {
        src: Some(cpath(&super::private_etc::etc_dir(dir))?),
        target: inside(etc)?,
        fstype: None,
        flags: libc::MS_BIND,
        data: None,
    });
    for d in bound {
        let host = etc.join(d);
        bind_host_read_only(ops, &host, inside(&host)?)?;
    }
    ops.push(Op::ReadOnly {
        target: inside(etc)?,
        recursive: true,
        fallback: kept_flags(dir),
    });
    Ok(())
}

/// The ops of the sandbox's private `/dev`: a tmpfs holding the host's
/// [`DEVICES`], its own `pts`, `shm` (the folder `shm` of the sandbox's
/// directory, on its capped disk: a tmpfs of its own would be memory no
/// disk limit counts) and the usual symlinks (still writable: it is made
/// read-only once the home is bound).
fn private_dev(
    ops: &mut Vec<Op>,
    shm: &Path,
    inside: &dyn Fn(&Path) -> Result<CString, SetupError>,
) -> Result<(), SetupError> {
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
        src: Some(cpath(shm)?),
        target: inside(&dev.join("shm"))?,
        fstype: None,
        flags: libc::MS_BIND,
        data: None,
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
    Ok(())
}

/// The ops that create [`super::HOME_INSIDE`] in the root and bind the
/// sandbox's folder `home` read-write there.
fn bind_home(
    ops: &mut Vec<Op>,
    home: &Path,
    inside: &dyn Fn(&Path) -> Result<CString, SetupError>,
) -> Result<(), SetupError> {
    let target = Path::new(super::HOME_INSIDE);
    super::mount_points::mkdirs(ops, target, inside)?;
    ops.push(Op::Mount {
        src: Some(cpath(home)?),
        target: inside(target)?,
        fstype: None,
        flags: libc::MS_BIND,
        data: None,
    });
    Ok(())
}

/// Parts of the sandbox's `/proc` that reach the host kernel (its
/// settings, interrupt and bus tables, the SysRq trigger): bound
/// read-only over themselves, as container runtimes do. Even a step that
/// runs as the host's uid 0 (rfs run as root) cannot change them.
pub(super) const PROC_READ_ONLY: &[&str] = &["sys", "sysrq-trigger", "irq", "bus", "fs"];
/// Files of `/proc` that expose the host kernel's memory, keys and
/// timers: hidden behind `/dev/null`.
pub(super) const PROC_MASKED: &[&str] = &[
    "kcore",
    "keys",
    "key-users",
    "timer_list",
    "sched_debug",
    "latency_stats",
];

/// The ops that make the host-reaching parts of the sandbox's fresh
/// `/proc` read-only or hidden (after the `proc` mount).
pub(super) fn proc_guards(
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
pub(super) fn kept_flags(p: &Path) -> c_ulong {
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

/// The mount point of a sandbox's root inside its directory.
pub(super) fn root_dir(dir: &Path) -> PathBuf {
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
        assert_eq!(
            e,
            SetupError::HomeUnderSystemDir {
                home: "/usr/share/rfs/local/sandboxes/x/home".into(),
                dir: "/usr"
            }
        );
        assert!(e.to_string().contains("lies under /usr"), "{e}");
    }
}
