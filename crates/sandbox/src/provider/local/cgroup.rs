//! The resource limits of a `local` sandbox: a cgroup of its own in each
//! cgroup v1 hierarchy a limit needs (`pids`, `memory`, `cpu`), created
//! under rfs's own cgroup where rfs may write there (root), and removed
//! with the sandbox (verified gone). Every command of the sandbox joins
//! it before it runs anything (the start writes `0` into the cgroups'
//! `tasks`, see [`super::launch`]), so what it forks is counted from its
//! first instruction.
//!
//! `tasks`, not `cgroup.procs`: the process that joins is a child between
//! `fork`/`clone` and `exec`, one thread, so moving that thread moves all
//! of it, and a thread's move skips the lock a whole thread group's move
//! takes. That lock waits for an RCU grace period whenever no other move
//! happened in the last few milliseconds: 5 to 15 ms for every command of
//! a run whose commands are not back to back.
//!
//! cgroup v2 (a delegated subtree) is not supported yet: a limit someone
//! asked for is refused there, naming why.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::provider::limits::{LimitHit, LimitKind, Limits};

/// The hierarchy a limit lives in.
fn controller(kind: LimitKind) -> &'static str {
    match kind {
        LimitKind::Pids => "pids",
        LimitKind::Memory => "memory",
        LimitKind::Cpus => "cpu",
        // Not a cgroup: a tmpfs (see `super::disk`).
        LimitKind::Disk => "",
    }
}

/// Where rfs's own cgroup of `ctrl` is (`/sys/fs/cgroup/memory/<path>`),
/// or why limits of it cannot be set here.
fn own_cgroup(ctrl: &str) -> Result<PathBuf, String> {
    let text = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let line = text.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        ctrls
            .split(',')
            .any(|c| c == ctrl)
            .then(|| (ctrls.to_owned(), path.to_owned()))
    });
    let Some((ctrls, path)) = line else {
        return Err(if text.lines().all(|l| l.starts_with("0::")) {
            "this machine has cgroup v2 only, and rfs sets limits through cgroup v1 hierarchies (v2 delegation is not supported yet)".into()
        } else {
            format!("no cgroup v1 `{ctrl}` hierarchy is mounted")
        });
    };
    let mount = Path::new("/sys/fs/cgroup").join(&ctrls);
    let dir = mount.join(path.trim_start_matches('/'));
    // SAFETY: access(2) on a NUL-terminated path.
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes())
        .map_err(|_| "a cgroup path with a NUL byte".to_owned())?;
    if unsafe { libc::access(c.as_ptr(), libc::W_OK) } != 0 {
        return Err(format!(
            "rfs cannot create cgroups in {} ({}; limits on `local` need root, or a writable cgroup)",
            dir.display(),
            std::io::Error::last_os_error()
        ));
    }
    if !dir.join("cgroup.procs").is_file() {
        return Err(format!("{} is not a cgroup", dir.display()));
    }
    Ok(dir)
}

/// Whether `limits` can be set here; `Err` names why not.
pub(super) fn available(limits: &Limits) -> Result<(), String> {
    for kind in LimitKind::ALL {
        if kind != LimitKind::Disk && limits.get(kind).is_some() {
            own_cgroup(controller(kind))?;
        }
    }
    Ok(())
}

/// One cgroup of a sandbox, as its `meta.json` records it (a kept
/// sandbox is re-entered and removed through it by another rfs).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(super) struct Part {
    pub kind: LimitKind,
    pub value: u64,
    pub dir: PathBuf,
}

/// A sandbox's cgroups, one per hierarchy a limit needs.
#[derive(Debug)]
pub(super) struct Cgroup {
    /// (limit, its cgroup directory, its `tasks` open for writing).
    parts: Vec<(LimitKind, u64, PathBuf, OwnedFd)>,
    /// The counters as last read (pids.events `max`, oom kills).
    seen: Mutex<(u64, u64)>,
    /// The files of [`COUNTERS`] there are, open: each read after every
    /// command is one `pread` (no path lookup, no open and close).
    counters: Vec<(&'static str, std::fs::File)>,
}

/// The files read after every command.
const COUNTERS: [(LimitKind, &str); 4] = [
    (LimitKind::Pids, "pids.events"),
    (LimitKind::Pids, "pids.peak"),
    (LimitKind::Memory, "memory.oom_control"),
    (LimitKind::Memory, "memory.max_usage_in_bytes"),
];

impl Cgroup {
    /// The cgroups [`Cgroup::create`] makes for sandbox `id` and
    /// `limits`, named before they exist (where rfs cannot create them
    /// here, none: the create refuses).
    pub(super) fn planned(id: &str, limits: &Limits) -> Vec<Part> {
        LimitKind::ALL
            .into_iter()
            .filter(|&kind| kind != LimitKind::Disk)
            .filter_map(|kind| {
                let value = limits.get(kind)?;
                let dir = own_cgroup(controller(kind)).ok()?.join(format!("rfs-{id}"));
                Some(Part { kind, value, dir })
            })
            .collect()
    }

    /// Create the cgroups of sandbox `id` and set `limits` in them.
    pub(super) fn create(id: &str, limits: &Limits) -> Result<Cgroup, String> {
        let mut cg = Cgroup {
            parts: vec![],
            seen: Mutex::new((0, 0)),
            counters: vec![],
        };
        for kind in LimitKind::ALL {
            let Some(v) = limits.get(kind).filter(|_| kind != LimitKind::Disk) else {
                continue;
            };
            let dir = own_cgroup(controller(kind))?.join(format!("rfs-{id}"));
            std::fs::create_dir(&dir)
                .map_err(|e| format!("cannot create cgroup {}: {e}", dir.display()))?;
            let procs = std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("tasks"))
                .map_err(|e| format!("cannot open {}/tasks: {e}", dir.display()));
            let procs = match procs {
                Ok(p) => OwnedFd::from(p),
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    let _ = cg.remove();
                    return Err(e);
                }
            };
            cg.parts.push((kind, v, dir.clone(), procs));
            let set = |file: &str, value: String| {
                std::fs::write(dir.join(file), value)
                    .map_err(|e| format!("cannot set {}/{file}: {e}", dir.display()))
            };
            let r = match kind {
                LimitKind::Pids => set("pids.max", v.to_string()),
                LimitKind::Memory => set("memory.limit_in_bytes", v.to_string()).and_then(|()| {
                    // No swap beyond the limit, where swap is accounted.
                    if dir.join("memory.memsw.limit_in_bytes").exists() {
                        set("memory.memsw.limit_in_bytes", v.to_string())
                    } else {
                        Ok(())
                    }
                }),
                LimitKind::Cpus => set("cpu.cfs_period_us", "100000".into())
                    .and_then(|()| set("cpu.cfs_quota_us", (v * 100).to_string())),
                LimitKind::Disk => Ok(()),
            };
            if let Err(e) = r {
                let _ = cg.remove();
                return Err(e);
            }
        }
        cg.open_counters();
        Ok(cg)
    }

    fn open_counters(&mut self) {
        for (kind, file) in COUNTERS {
            let Some(dir) = self.parts.iter().find(|p| p.0 == kind).map(|p| &p.2) else {
                continue;
            };
            if let Ok(f) = std::fs::File::open(dir.join(file)) {
                self.counters.push((file, f));
            }
        }
    }

    /// The text of counter file `file` now.
    fn counter(&self, file: &str) -> Option<String> {
        use std::os::unix::fs::FileExt;
        let f = &self.counters.iter().find(|c| c.0 == file)?.1;
        let mut buf = [0u8; 512];
        let n = f.read_at(&mut buf, 0).ok()?;
        Some(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// The cgroups recorded in `meta.json`, opened again; `Err` when one
    /// is gone (its limits could not be enforced).
    pub(super) fn open(parts: &[Part]) -> Result<Cgroup, String> {
        let mut cg = Cgroup {
            parts: vec![],
            seen: Mutex::new((0, 0)),
            counters: vec![],
        };
        for p in parts {
            let procs = std::fs::OpenOptions::new()
                .write(true)
                .open(p.dir.join("tasks"))
                .map_err(|e| format!("its cgroup {} is gone ({e})", p.dir.display()))?;
            cg.parts
                .push((p.kind, p.value, p.dir.clone(), procs.into()));
        }
        cg.open_counters();
        let _ = cg.reached();
        Ok(cg)
    }

    /// What `meta.json` records.
    pub(super) fn parts(&self) -> Vec<Part> {
        self.parts
            .iter()
            .map(|(kind, value, dir, _)| Part {
                kind: *kind,
                value: *value,
                dir: dir.clone(),
            })
            .collect()
    }

    /// Remove the cgroups `parts` names (those of a sandbox of another
    /// rfs process); already gone is fine.
    pub(super) fn remove_parts(parts: &[Part]) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        for p in parts {
            remove_dir(&p.dir, deadline)?;
        }
        Ok(())
    }

    /// Remove the cgroups rfs would have made for sandbox `id`, found by
    /// their names (`rfs-<id>` under rfs's own cgroup of each
    /// controller): those of a sandbox whose `meta.json` never named them
    /// (its rfs was killed while creating it). None there is fine.
    pub(super) fn remove_named(id: &str) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        for kind in LimitKind::ALL {
            let ctrl = controller(kind);
            if ctrl.is_empty() {
                continue;
            }
            if let Ok(own) = own_cgroup(ctrl) {
                remove_dir(&own.join(format!("rfs-{id}")), deadline)?;
            }
        }
        Ok(())
    }

    /// The `tasks` descriptors a start writes `0` into.
    pub(super) fn procs_fds(&self) -> [RawFd; 3] {
        let mut fds = [-1; 3];
        for (slot, p) in fds.iter_mut().zip(&self.parts) {
            *slot = p.3.as_raw_fd();
        }
        fds
    }

    fn read(&self, file: &str, key: &str) -> Option<u64> {
        self.counter(file)?.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse().ok()).flatten()
        })
    }

    /// (memory peak, process peak) so far; `reset`: the memory peak starts
    /// again from the current use (cgroup v1's `pids.peak` cannot be
    /// reset: it is the sandbox's peak so far).
    pub(super) fn peaks(&self, reset: bool) -> (Option<u64>, Option<u64>) {
        let num = |file| self.counter(file)?.trim().parse::<u64>().ok();
        let memory = num("memory.max_usage_in_bytes");
        if reset {
            if let Some(p) = self.parts.iter().find(|p| p.0 == LimitKind::Memory) {
                let _ = std::fs::write(p.2.join("memory.max_usage_in_bytes"), "0");
            }
        }
        let pids = num("pids.peak");
        (memory, pids)
    }

    /// The limits reached since this was last asked.
    pub(super) fn reached(&self) -> Vec<LimitHit> {
        let forks = self.read("pids.events", "max");
        let ooms = self.read("memory.oom_control", "oom_kill");
        let mut guard = self.seen.lock().expect("cgroup counters");
        let seen = &mut *guard;
        let mut hits = vec![];
        for (kind, now, was) in [
            (LimitKind::Memory, ooms, &mut seen.1),
            (LimitKind::Pids, forks, &mut seen.0),
        ] {
            if let Some(now) = now {
                if now > *was {
                    let value = self.parts.iter().find(|p| p.0 == kind).map_or(0, |p| p.1);
                    hits.push(LimitHit { kind, value });
                }
                *was = now;
            }
        }
        hits
    }

    /// Kill what is left in the cgroups and remove them; `Err` when one
    /// is still there after 5 s.
    pub(super) fn remove(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        for (_, _, dir, _) in &self.parts {
            remove_dir(dir, deadline)?;
        }
        Ok(())
    }
}

/// Kill what is left in cgroup `dir` and remove it (verified: it no
/// longer exists), retrying until `deadline`.
fn remove_dir(dir: &Path, deadline: Instant) -> Result<(), String> {
    loop {
        if let Ok(procs) = std::fs::read_to_string(dir.join("cgroup.procs")) {
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                // SAFETY: a signal to a process of the sandbox.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        match std::fs::remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if Instant::now() >= deadline => {
                return Err(format!("cannot remove cgroup {}: {e}", dir.display()))
            }
            Err(_) => {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
        }
        if dir.exists() {
            return Err(format!(
                "cgroup {} is still there after its removal",
                dir.display()
            ));
        }
        return Ok(());
    }
}

/// In a child between `fork`/`clone` and `exec`: join the cgroups whose
/// `tasks` descriptors are `fds` (-1: none); the calling process must
/// have one thread (it alone moves). Raw system calls only.
/// `false`: a write failed (errno says why).
pub(super) fn join(fds: &[RawFd; 3]) -> bool {
    for &fd in fds.iter().filter(|f| **f >= 0) {
        // SAFETY: a write of a static byte to a descriptor we hold.
        if unsafe { libc::write(fd, b"0".as_ptr().cast(), 1) } != 1 {
            return false;
        }
    }
    true
}
