//! The person's host folders (`--mount-ro HOST_DIR:SANDBOX_PATH`, see
//! [`crate::provider::host_mount`]) in a docker sandbox: read-only bind
//! mounts of the container. The daemon must run on this machine (a bind
//! names a folder of the daemon's host, and rfs digests this machine's).
//! Docker's mounts take no `nosuid`: a setuid program there gains nothing
//! where the container runs with `no-new-privileges` (its user is root).

use bollard::models::{Mount, MountType};

use crate::provider::host_mount::{check_target, HostMount};
use crate::provider::isolation::{IsolationError, IsolationRequest};

/// Refuse host folders a daemon at `host` cannot show as this machine's,
/// or a path that would shadow the sandbox's home `home`.
pub(super) fn check(host: &str, home: &str, req: &IsolationRequest) -> Result<(), IsolationError> {
    if req.host_mounts.is_empty() {
        return Ok(());
    }
    if !super::stdin_fifo::offered_for(host) {
        return Err(req.refuse_host_mounts(
            "docker",
            &format!("the daemon at {host} is not on a local socket, so its binds would name folders of another machine"),
        ).unwrap_err());
    }
    for m in &req.host_mounts {
        if let Err(why) = check_target(&m.target, Some(home)) {
            return Err(req.refuse_host_mounts("docker", &why).unwrap_err());
        }
    }
    Ok(())
}

/// The container's read-only bind of each host folder.
pub(super) fn mounts(mounts: &[HostMount]) -> impl Iterator<Item = Mount> + '_ {
    mounts.iter().map(|m| Mount {
        target: Some(m.target.clone()),
        source: Some(m.host_dir.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(true),
        ..Default::default()
    })
}
