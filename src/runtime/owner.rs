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

/// The owner labels for the current process.
pub fn owner_labels() -> Labels {
    let pid = std::process::id();
    let mut l = Labels::new();
    l.insert(labels::OWNER_HOST.into(), host());
    l.insert(labels::OWNER_PID.into(), pid.to_string());
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
    let Some(host_label) = l.get(labels::OWNER_HOST) else {
        return Liveness::Unknown("no owner-host label".into());
    };
    if *host_label != host() {
        return Liveness::Unknown(format!("owned by host {host_label}"));
    }
    let Some(pid) = l.get(labels::OWNER_PID).and_then(|p| p.parse::<u32>().ok()) else {
        return Liveness::Unknown("no owner-pid label".into());
    };
    let start = match crate::procfs::stat(pid) {
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
