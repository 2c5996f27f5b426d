//! Mount points in a sandbox's root that its plan ([`super::mount_plan`])
//! and the binds added to it afterwards (caches, the person's host
//! folders) share: the folders on the way to a target, and where in the
//! plan such binds go.

use std::ffi::CString;
use std::path::Path;

use super::errors::SetupError;
use super::mount_plan::{Op, Plan};

impl Plan {
    /// Add `ops` (binds over folders of the root: caches, the person's
    /// host folders) after the sandbox's own mounts, before the root is
    /// made read-only.
    pub(super) fn add_before_hostname(&mut self, ops: Vec<Op>) {
        let at = self
            .ops
            .iter()
            .position(|o| matches!(o, Op::Hostname(_)))
            .unwrap_or(self.ops.len());
        self.ops.splice(at..at, ops);
    }
}

/// The ops that create `target` in the root, and each folder above it.
pub(super) fn mkdirs(
    ops: &mut Vec<Op>,
    target: &Path,
    inside: &dyn Fn(&Path) -> Result<CString, SetupError>,
) -> Result<(), SetupError> {
    let mut chain: Vec<&Path> = target
        .ancestors()
        .filter(|a| a.parent().is_some())
        .collect();
    chain.reverse();
    for a in chain {
        ops.push(Op::Mkdir(inside(a)?));
    }
    Ok(())
}
