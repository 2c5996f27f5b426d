//! Ending processes: a sandbox's leftovers, a command's group.

use super::*;

/// SIGKILL every process whose cwd is inside `dir`.
pub(super) fn kill_processes_under(dir: &Path) {
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return;
    };
    let me = std::process::id();
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        if pid == me {
            continue;
        }
        if std::fs::read_link(p.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(dir)) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// Kill a whole process group; it being gone already is fine.
pub fn kill_group(pgid: i32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}
