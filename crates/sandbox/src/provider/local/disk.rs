//! The disk cap of a `local` sandbox (issue #35): its whole directory —
//! the synced tree and home, its `/tmp`, its composed `/etc` — lives on a
//! tmpfs of its own mounted there with `size=` the cap, so a step that
//! fills it gets `ENOSPC` inside the sandbox and the host's disks are
//! untouched. A tmpfs rather than a loop-mounted image: it needs no
//! `mkfs`, no loop device and no image file (mounting it costs
//! microseconds), and it is freed at once when unmounted; its pages are
//! memory, which is why the default cap is at most half of the host's
//! memory (see [`crate::provider::limits::default_disk`]) and why, under a
//! memory limit, what a step writes counts against that limit too (the
//! memory cgroup charges tmpfs pages to their writer, as Docker's tmpfs
//! mounts do).
//!
//! Mounting on the host needs root (as the cgroups of the other limits
//! do); elsewhere a disk limit someone asked for is refused, and the
//! default one is said to be not enforced.

use std::path::Path;

/// Whether a disk cap can be set here; `Err` names why not.
pub(super) fn available() -> Result<(), String> {
    if !super::sys::host_root() {
        return Err("a size-capped filesystem for the sandbox's writable space is mounted by rfs on the host, which needs root".into());
    }
    Ok(())
}

/// Mount a tmpfs of `bytes` over the (empty) sandbox directory `dir`.
pub(super) fn mount(dir: &Path, bytes: u64) -> Result<(), String> {
    nix::mount::mount(
        Some("rfs-disk"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
        Some(format!("size={bytes},mode=0700").as_str()),
    )
    .map_err(|e| {
        format!(
            "cannot mount a {bytes}-byte tmpfs on {}: {e}",
            dir.display()
        )
    })
}

/// Whether `dir` is a sandbox disk rfs mounted (a tmpfs mount point).
pub(super) fn is_mounted(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(here), Some(Ok(up))) = (std::fs::metadata(dir), dir.parent().map(std::fs::metadata))
    else {
        return false;
    };
    here.dev() != up.dev()
        && nix::sys::statfs::statfs(dir)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::TMPFS_MAGIC)
}

/// Unmount the sandbox disk at `dir` (its contents go with it); nothing
/// to do when there is none.
pub(super) fn unmount(dir: &Path) -> Result<(), String> {
    if !is_mounted(dir) {
        return Ok(());
    }
    nix::mount::umount2(dir, nix::mount::MntFlags::MNT_DETACH)
        .map_err(|e| format!("cannot unmount the sandbox disk {}: {e}", dir.display()))
}

/// (bytes used, whether it is full: no block or no inode left).
pub(super) fn usage(dir: &Path) -> Option<(u64, bool)> {
    let s = nix::sys::statvfs::statvfs(dir).ok()?;
    let frag = s.fragment_size() as u64;
    let used = (s.blocks() as u64).saturating_sub(s.blocks_free() as u64) * frag;
    let full = s.blocks_available() == 0 || (s.files() > 0 && s.files_available() == 0);
    Some((used, full))
}
