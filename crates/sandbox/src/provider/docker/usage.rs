//! What a container used during a step: its memory cgroup's peak (reset
//! when the step starts) and its pids cgroup's peak, read from this
//! host's cgroup files where the daemon keeps them (cgroup v1 with the
//! `cgroupfs` driver, `/sys/fs/cgroup/<controller>/docker/<id>`, or the
//! `systemd` driver, `…/system.slice/docker-<id>.scope`). A few file
//! reads, no API call. Where the files are not there (a daemon on another
//! machine, cgroup v2) the provider does not say: usage is shown where it
//! is known, never guessed.

use std::path::{Path, PathBuf};

use crate::provider::limits::Usage;

const ROOT: &str = "/sys/fs/cgroup";

/// Container `id`'s cgroup directory of `controller`, if this host has it.
fn dir(root: &Path, controller: &str, id: &str) -> Option<PathBuf> {
    [
        root.join(controller).join("docker").join(id),
        root.join(controller)
            .join("system.slice")
            .join(format!("docker-{id}.scope")),
    ]
    .into_iter()
    .find(|d| d.is_dir())
}

fn num(p: PathBuf) -> Option<u64> {
    std::fs::read_to_string(p).ok()?.trim().parse().ok()
}

/// Container `id`'s memory peak and process peak so far; `reset`: the
/// memory peak starts again from the current use (cgroup v1's
/// `pids.peak` cannot be reset: it is the container's peak so far).
/// `None` when this host has neither cgroup of it.
pub(super) fn read(id: &str, reset: bool) -> Option<Usage> {
    read_under(Path::new(ROOT), id, reset)
}

fn read_under(root: &Path, id: &str, reset: bool) -> Option<Usage> {
    let mem = dir(root, "memory", id);
    let pids = dir(root, "pids", id);
    if mem.is_none() && pids.is_none() {
        return None;
    }
    let mem_file = mem.map(|d| d.join("memory.max_usage_in_bytes"));
    let memory_peak = mem_file.clone().and_then(num);
    if let (true, Some(f)) = (reset, mem_file) {
        // Root (or the cgroup's owner) only; elsewhere the peak stays the
        // container's so far, which is still an upper bound.
        let _ = std::fs::write(f, "0");
    }
    let pids_peak =
        pids.and_then(|d| num(d.join("pids.peak")).or_else(|| num(d.join("pids.current"))));
    Some(Usage {
        memory_peak,
        pids_peak,
        disk_used: None,
    })
}

/// Container `id`'s (forks refused at its process limit, oom kills) as
/// this host's cgroup files say (`pids.events` `max`, `memory.oom_control`
/// `oom_kill`): no exec in the container, which at its process limit has
/// no pid left for one. `None` when this host has neither cgroup of it.
pub(super) fn limit_counters(id: &str) -> Option<(u64, u64)> {
    limit_counters_under(Path::new(ROOT), id)
}

fn limit_counters_under(root: &Path, id: &str) -> Option<(u64, u64)> {
    let field = |file: Option<PathBuf>, key: &str| -> u64 {
        let text = file.and_then(|f| std::fs::read_to_string(f).ok());
        text.as_deref()
            .unwrap_or("")
            .lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
            .unwrap_or(0)
    };
    let pids = dir(root, "pids", id);
    let mem = dir(root, "memory", id);
    if pids.is_none() && mem.is_none() {
        return None;
    }
    Some((
        field(pids.map(|d| d.join("pids.events")), "max "),
        field(mem.map(|d| d.join("memory.oom_control")), "oom_kill "),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cgroup_v1_container_is_read_and_its_memory_peak_reset() {
        let root = tempfile::tempdir().unwrap();
        let id = "ab".repeat(32);
        let mem = root.path().join("memory/docker").join(&id);
        let pids = root
            .path()
            .join("pids/system.slice")
            .join(format!("docker-{id}.scope"));
        std::fs::create_dir_all(&mem).unwrap();
        std::fs::create_dir_all(&pids).unwrap();
        std::fs::write(mem.join("memory.max_usage_in_bytes"), "1048576\n").unwrap();
        std::fs::write(pids.join("pids.current"), "3\n").unwrap();
        let u = read_under(root.path(), &id, true).unwrap();
        assert_eq!(u.memory_peak, Some(1 << 20));
        assert_eq!(u.pids_peak, Some(3));
        let again = std::fs::read_to_string(mem.join("memory.max_usage_in_bytes")).unwrap();
        assert_eq!(again, "0");
        assert_eq!(read_under(root.path(), &"cd".repeat(32), false), None);
        std::fs::write(pids.join("pids.events"), "max 7\n").unwrap();
        std::fs::write(
            mem.join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n",
        )
        .unwrap();
        assert_eq!(limit_counters_under(root.path(), &id), Some((7, 2)));
        assert_eq!(limit_counters_under(root.path(), &"cd".repeat(32)), None);
    }
}
