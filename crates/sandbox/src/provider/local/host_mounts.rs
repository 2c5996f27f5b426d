//! Host folders the person mounted (`--mount-ro HOST_DIR:SANDBOX_PATH`,
//! [`crate::provider::host_mount`]) in an isolated local sandbox: each is
//! shown read-only, `nosuid` and `nodev` at its path, through the same
//! bind the system directories use (id-mapped where rfs runs as root, so
//! a step reads only what the host's unprivileged users may), in the
//! sandbox's own mount namespace. Kept apart from the root's plan
//! ([`super::mount_plan`]): these ops are added to a plan already made.

use std::path::Path;

use super::mount_plan::{self, Op, Plan};
use super::{errors::SetupError, sys::cpath};
use crate::provider::host_mount::{self, HostMount};

/// Whether the local provider can show `mounts` in a sandbox whose
/// isolation in force is `mode`: only in its own mount namespace (with
/// `none`, steps run on the host); never over the sandbox's home
/// ([`super::HOME_INSIDE`]); under a system directory
/// rfs binds from the host (`/opt`) only at a folder that exists there,
/// as the bind is read-only and no mount point can be made in it.
pub(super) fn check(mounts: &[HostMount], mode: &str) -> Result<(), String> {
    if mounts.is_empty() {
        return Ok(());
    }
    if mode != "namespaces" && mode != super::gvisor::MODE {
        return Err(format!(
            "with isolation `{mode}` steps run on the host, where the mount would be the host's; it needs a sandbox isolated in namespaces"
        ));
    }
    for m in mounts {
        host_mount::check_target(&m.target, Some(super::HOME_INSIDE))?;
        let t = Path::new(&m.target);
        let bound = mount_plan::SYSTEM_DIRS
            .iter()
            .find(|d| t.starts_with(d) && Path::new(d).is_dir());
        if let Some(d) = bound {
            if !std::fs::symlink_metadata(t).is_ok_and(|m| m.is_dir()) {
                return Err(format!(
                    "`{}`: {d} is the host's, bound read-only into the sandbox, and has no folder {} to mount on; name a new folder such as /toolchains/rust",
                    m.target, m.target
                ));
            }
        }
    }
    Ok(())
}

/// Create each mount point in the sandbox's root (a tmpfs still
/// writable here) and add the read-only binds to `plan`, after the
/// sandbox's own mounts and before the root is made read-only.
pub(super) fn add(plan: &mut Plan, dir: &Path, mounts: &[HostMount]) -> Result<(), SetupError> {
    if mounts.is_empty() {
        return Ok(());
    }
    let root = mount_plan::root_dir(dir);
    let inside = |p: &Path| cpath(&root.join(p.strip_prefix("/").unwrap_or(p)));
    let mut ops = vec![];
    for m in mounts {
        let target = Path::new(&m.target);
        super::mount_points::mkdirs(&mut ops, target, &inside)?;
        let at = inside(target)?;
        mount_plan::bind_host_read_only(&mut ops, &m.host_dir, at.clone())?;
        if !super::idmap::needed() {
            // The id-mapped tree is `nosuid` and `nodev` already; a plain
            // bind gets them with its read-only remount.
            ops.push(Op::Mount {
                src: None,
                target: at,
                fstype: None,
                flags: libc::MS_REMOUNT
                    | libc::MS_BIND
                    | libc::MS_RDONLY
                    | libc::MS_NOSUID
                    | libc::MS_NODEV
                    | mount_plan::kept_flags(&m.host_dir),
                data: None,
            });
        }
    }
    plan.add_before_hostname(ops);
    Ok(())
}
