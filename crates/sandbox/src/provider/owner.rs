//! Owner identity stamped on sandboxes, and deciding whether an owner is
//! still alive (for `rfs gc`). A pid alone is not identity: the process
//! start time (ticks since boot, `/proc/<pid>/stat` field 22) guards
//! against pid reuse. What cannot be read is unknown, and unknown keeps.

use crate::procfs::StatError;
use crate::provider::labels::{self, Labels};

/// This host's name.
pub fn host() -> String {
    hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown-host".into())
}

/// Start time of `pid` in kernel ticks since boot, if it can be read.
pub fn pid_start(pid: u32) -> Option<u64> {
    crate::procfs::stat(pid).ok().map(|s| s.start_ticks)
}

/// This process's user id, as the owner label writes it.
pub fn uid() -> String {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }.to_string()
}

/// The owner labels for the current process.
pub fn owner_labels() -> Labels {
    let pid = std::process::id();
    let mut l = Labels::new();
    l.insert(labels::OWNER_HOST.into(), host());
    l.insert(labels::OWNER_PID.into(), pid.to_string());
    l.insert(labels::OWNER_USER.into(), uid());
    l.insert(
        labels::OWNER_PID_START.into(),
        pid_start(pid).map(|s| s.to_string()).unwrap_or_default(),
    );
    l
}

/// Whether the owner recorded in `labels` is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Liveness {
    Alive,
    Gone(String),
    /// Owned by another host (or unlabelled): rfs cannot tell.
    Unknown(String),
}

pub fn owner_liveness(l: &Labels) -> Liveness {
    judge(l, crate::procfs::stat)
}

/// [`owner_liveness`] with `stat` reading a process's start time.
fn judge(l: &Labels, stat: impl Fn(u32) -> Result<crate::procfs::ProcStat, StatError>) -> Liveness {
    let Some(host_label) = l.get(labels::OWNER_HOST) else {
        return Liveness::Unknown("no owner-host label".into());
    };
    if *host_label != host() {
        return Liveness::Unknown(format!("owned by host {host_label}"));
    }
    let Some(pid) = l.get(labels::OWNER_PID).and_then(|p| p.parse::<u32>().ok()) else {
        return Liveness::Unknown("no owner-pid label".into());
    };
    let start = match stat(pid) {
        Err(StatError::NotRunning) => {
            return Liveness::Gone(format!("owner pid {pid} is not running"))
        }
        // Unknown means keep: a live owner must never be judged gone.
        Err(StatError::Unreadable(why)) => {
            return Liveness::Unknown(format!(
                "owner pid {pid} is running but its start time cannot be read ({why}), so pid reuse cannot be ruled out"
            ))
        }
        Ok(s) => s.start_ticks,
    };
    match l.get(labels::OWNER_PID_START).map(|s| s.trim()) {
        Some(want) if want == start.to_string() => Liveness::Alive,
        Some(want) if want.parse::<u64>().is_ok() => Liveness::Gone(format!(
            "pid {pid} was reused (started at tick {start}, owner started at {want})"
        )),
        _ => Liveness::Unknown(format!(
            "owner pid {pid} is running and its start time was not recorded, so pid reuse cannot be ruled out"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::procfs::ProcStat;

    fn mine(start: &str) -> Labels {
        let mut l = owner_labels();
        l.insert(labels::OWNER_PID_START.into(), start.into());
        l
    }

    fn started_at(ticks: u64) -> impl Fn(u32) -> Result<ProcStat, StatError> {
        move |_| {
            Ok(ProcStat {
                state: 'S',
                ppid: 1,
                pgrp: 1,
                session: 1,
                start_ticks: ticks,
            })
        }
    }

    /// Regression (#8 bug 9): an owner whose start time cannot be read was
    /// judged "pid reused" and its sandbox destroyed.
    #[test]
    fn an_owner_whose_start_time_cannot_be_read_is_kept() {
        let l = mine("12345");
        let unreadable = |_| Err(StatError::Unreadable("permission denied".into()));
        match judge(&l, unreadable) {
            Liveness::Unknown(why) => {
                assert!(why.contains("cannot be read (permission denied)"), "{why}")
            }
            other => panic!("must be kept as unknown, got {other:?}"),
        }
    }

    #[test]
    fn same_start_is_alive_other_start_is_reuse_and_no_process_is_gone() {
        assert_eq!(judge(&mine("77"), started_at(77)), Liveness::Alive);
        assert!(
            matches!(judge(&mine("77"), started_at(78)), Liveness::Gone(w) if w.contains("reused"))
        );
        assert!(matches!(
            judge(&mine("77"), |_| Err(StatError::NotRunning)),
            Liveness::Gone(w) if w.contains("not running")
        ));
        assert!(
            matches!(judge(&mine(""), started_at(77)), Liveness::Unknown(w) if w.contains("not recorded"))
        );
    }
}
