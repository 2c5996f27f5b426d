//! A container's resource limits: set in its `HostConfig` when it is
//! created (memory without extra swap, a process cap, a cpu quota), and
//! read back after a command that did not succeed (the cgroup's
//! `pids.events` and the memory cgroup's oom kills, v1 or v2 layout, as
//! the container sees them).

use std::collections::HashMap;
use std::sync::Mutex;

use super::client::Client;
use super::exec::{self, ExecSpec};
use crate::provider::limits::{
    LimitHit, LimitKind, Limits, LimitsError, LimitsFact, LimitsRequest,
};

/// Why a container's disk is not capped: Docker's `--storage-opt size`
/// holds only on some storage drivers, and silently does nothing or fails
/// the create on the others (this project's test engine runs
/// fuse-overlayfs, which cannot enforce it).
pub(super) const NO_DISK_CAP: &str = "rfs does not cap a container's disk: Docker's `--storage-opt size` is enforced only by some storage drivers (overlay2 on xfs with project quotas, btrfs, zfs, devicemapper), not by overlay2 on ext4 or fuse-overlayfs";

/// Every limit but `disk` is the container's own; a disk limit someone
/// asked for is refused (see [`NO_DISK_CAP`]), the default one is said to
/// be not enforced.
pub(super) fn decide(req: &LimitsRequest) -> Result<LimitsFact, LimitsError> {
    let mut fact = LimitsFact {
        enforced: vec![],
        by: "the container's limits".into(),
        not_enforced: vec![],
        ceilings: vec![],
    };
    for l in &req.limits {
        match l.kind {
            LimitKind::Disk if l.is_default() => fact
                .not_enforced
                .push(format!("{} ({NO_DISK_CAP})", l.describe())),
            LimitKind::Disk => {
                return Err(LimitsError::Unenforceable {
                    provider: "docker".into(),
                    kind: l.kind,
                    value: l.kind.show(l.value),
                    by: l.by.clone(),
                    why: NO_DISK_CAP.into(),
                })
            }
            _ => fact.enforced.push(l.clone()),
        }
    }
    Ok(fact)
}

/// A container's `/dev/shm` (Docker's usual default, set here so a
/// daemon's `default-shm-size` cannot widen it): a tmpfs whose pages the
/// container's memory limit counts.
pub(super) const SHM_BYTES: u64 = 64 << 20;

/// `HostConfig`'s `memory`, `memory_swap`, `pids_limit`, `nano_cpus`, and
/// `shm_size`: [`SHM_BYTES`], no more than the disk limit.
pub(super) fn host_config(l: &Limits) -> bollard::models::HostConfig {
    let i = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    bollard::models::HostConfig {
        memory: l.memory.map(i),
        // The same as `memory`: no swap beyond the limit.
        memory_swap: l.memory.map(i),
        pids_limit: l.pids.map(i),
        nano_cpus: l.cpus.map(|m| i(m.saturating_mul(1_000_000))),
        shm_size: Some(i(l.disk.map_or(SHM_BYTES, |d| d.min(SHM_BYTES)))),
        ..Default::default()
    }
}

/// The limits of each container this process created and the counters
/// last read of it (forks refused, oom kills).
#[derive(Debug, Default)]
pub(super) struct Seen(Mutex<HashMap<String, (Limits, u64, u64)>>);

impl Seen {
    pub(super) fn created(&self, id: &str, l: Limits) {
        self.0
            .lock()
            .expect("limits lock")
            .insert(id.to_owned(), (l, 0, 0));
    }

    pub(super) fn forget(&self, id: &str) {
        self.0.lock().expect("limits lock").remove(id);
    }

    /// The limits container `id` reached since last asked.
    pub(super) async fn reached(&self, client: &Client, id: &str) -> Vec<LimitHit> {
        let Some((limits, ..)) = self.0.lock().expect("limits lock").get(id).cloned() else {
            return vec![];
        };
        let Some((forks, ooms)) = counters(client, id).await else {
            return vec![];
        };
        let mut map = self.0.lock().expect("limits lock");
        let Some(entry) = map.get_mut(id) else {
            return vec![];
        };
        let mut hits = vec![];
        if let (Some(v), true) = (limits.memory, ooms > entry.2) {
            hits.push(LimitHit {
                kind: LimitKind::Memory,
                value: v,
            });
        }
        if let (Some(v), true) = (limits.pids, forks > entry.1) {
            hits.push(LimitHit {
                kind: LimitKind::Pids,
                value: v,
            });
        }
        entry.1 = forks;
        entry.2 = ooms;
        hits
    }
}

/// (forks refused at the process limit, oom kills) as the container's
/// cgroup files say: read on this host where the daemon keeps them there,
/// else by an exec in the container (which a container still full at its
/// process limit may refuse: the hit then goes unnamed).
async fn counters(client: &Client, id: &str) -> Option<(u64, u64)> {
    if let Some(c) = super::usage::limit_counters(id) {
        return Some(c);
    }
    let spec = ExecSpec {
        argv: [
            "cat",
            "/sys/fs/cgroup/pids/pids.events",
            "/sys/fs/cgroup/memory/memory.oom_control",
            "/sys/fs/cgroup/pids.events",
            "/sys/fs/cgroup/memory.events",
        ]
        .map(String::from)
        .to_vec(),
        cwd: "/",
        env: &[],
        user: None,
        tty: false,
        stdin: false,
    };
    let (_, out) = exec::run_collect(
        client,
        id,
        spec,
        exec::Helper::small("cat of the cgroup events"),
    )
    .await
    .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut forks = None;
    let mut ooms = None;
    for l in text.lines() {
        match l.split_once(' ') {
            Some(("max", v)) => forks = v.trim().parse().ok().or(forks),
            Some(("oom_kill", v)) => ooms = v.trim().parse().ok().or(ooms),
            _ => {}
        }
    }
    Some((forks.unwrap_or(0), ooms.unwrap_or(0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue #43): a container's `/dev/shm` was the daemon's
    /// default size, whatever the disk limit; it is now 64 MiB, never more
    /// than the disk limit.
    #[test]
    fn a_containers_dev_shm_is_never_larger_than_its_disk_limit() {
        let shm = |disk| {
            host_config(&Limits {
                disk,
                ..Limits::default()
            })
            .shm_size
        };
        assert_eq!(shm(None), Some(64 << 20));
        assert_eq!(shm(Some(16 << 20)), Some(16 << 20));
        assert_eq!(shm(Some(10 << 30)), Some(64 << 20));
    }
}
