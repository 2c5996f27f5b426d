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
//! Its inodes are bounded too ([`inodes`]): a tmpfs has no inode cap of
//! its own beyond half of the host's memory pages, and each inode costs
//! kernel memory the `size=` does not count (two million empty files took
//! 1.7 GB). The sandbox's `/dev/shm` is a folder of this disk
//! ([`shm_dir`]), and caches' upper layers live on it, so both count
//! against the same two bounds.
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

/// Bytes of disk per inode: one file (or folder, link) for each 4 KiB of
/// the cap, the size of a page, which is the least room a tmpfs file with
/// any content takes; a tree of small files fits, millions of empty ones
/// do not.
pub const BYTES_PER_INODE: u64 = 4096;
/// The fewest inodes a disk gets (a small cap still holds a checkout).
pub const MIN_INODES: u64 = 4096;

/// How many files, folders and links a disk of `bytes` holds: one per
/// [`BYTES_PER_INODE`], at least [`MIN_INODES`]. Each costs the host
/// about a kilobyte of kernel memory outside the disk's `size=`, so a
/// 64 MiB disk's 16384 inodes cost at most some 16 MiB more.
pub fn inodes(bytes: u64) -> u64 {
    (bytes / BYTES_PER_INODE).max(MIN_INODES)
}

/// The folder of the sandbox directory `dir` that is its `/dev/shm` (on
/// the same disk, counted against the same cap); made, mode `1777`, if
/// missing.
pub(super) fn shm_dir(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let shm = dir.join("shm");
    match std::fs::create_dir(&shm) {
        Ok(()) => std::fs::set_permissions(&shm, std::fs::Permissions::from_mode(0o1777))?,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    Ok(shm)
}

/// Mount a tmpfs of `bytes` (and [`inodes`] of them) over the (empty)
/// sandbox directory `dir`.
pub(super) fn mount(dir: &Path, bytes: u64) -> Result<(), String> {
    nix::mount::mount(
        Some("rfs-disk"),
        dir,
        Some("tmpfs"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
        Some(format!("size={bytes},nr_inodes={},mode=0700", inodes(bytes)).as_str()),
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue #43): a sandbox's disk had no inode bound.
    #[test]
    fn a_disks_inodes_are_bounded_one_per_4_kib_at_least_4096() {
        assert_eq!(inodes(16 << 20), 4096);
        assert_eq!(inodes(8 << 20), 4096);
        assert_eq!(inodes(64 << 20), 16384);
        assert_eq!(inodes(10 << 30), 2_621_440);
    }
}
