//! Caches in an isolated local sandbox: each cache folder (kept by rfs
//! between runs, locked by the run) is bound read-write over a folder of
//! the sandbox's home, in the sandbox's own mount namespace (the host
//! never sees the mount). Kept apart from the root's plan
//! ([`super::mount_plan`]): these ops are added to a plan already made.

use std::path::Path;

use super::mount_plan::{Op, Plan};
use super::{errors::SetupError, sys::cpath};
use crate::provider::CacheMount;

/// Create each cache's mount point in the sandbox's home (`dir/home`, as
/// the host sees it) and add the binds to `plan`, after the home is bound
/// and before the root is made read-only. A mount point that exists as
/// something other than a folder is refused, and so is one below a
/// symbolic link: the home may be a checkpoint's, whose setup planted
/// `~/.cache -> /a/host/path`; the folders are created by descriptor
/// beneath the home ([`crate::untrusted_tree::create_dir_all`]), never
/// following it onto the host.
pub(super) fn add(plan: &mut Plan, dir: &Path, caches: &[CacheMount]) -> Result<(), SetupError> {
    if caches.is_empty() {
        return Ok(());
    }
    let home = dir.join("home");
    let root = super::mount_plan::root_dir(dir);
    let mut ops = vec![];
    let home_fd = crate::untrusted_tree::open_root(&home).map_err(|e| SetupError::Cache {
        name: caches[0].name.clone(),
        message: format!("cannot open the sandbox's home {}: {e}", home.display()),
    })?;
    for c in caches {
        crate::untrusted_tree::create_dir_all(&home_fd, Path::new(&c.home_relative)).map_err(
            |e| SetupError::Cache {
                name: c.name.clone(),
                message: format!(
                    "cannot create ~/{} in the sandbox's home: {e}",
                    c.home_relative
                ),
            },
        )?;
        // The home is bound at its one path inside the root.
        let inside = root
            .join(super::HOME_INSIDE.trim_start_matches('/'))
            .join(&c.home_relative);
        ops.push(Op::Mount {
            src: Some(cpath(&c.host_dir)?),
            target: cpath(&inside)?,
            fstype: None,
            flags: libc::MS_BIND,
            data: None,
        });
    }
    plan.add_before_hostname(ops);
    Ok(())
}
