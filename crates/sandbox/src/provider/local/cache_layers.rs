//! Caches bounded by the sandbox's disk limit (issues #35, #36).
//!
//! A cache is a folder of this machine, kept between runs. Bound as it is
//! into the sandbox, what a step writes there would land on the host's
//! disk, past the size-capped filesystem that holds everything else the
//! sandbox writes ([`super::disk`]): a script could fill this machine
//! through its cache. So where the sandbox has a disk cap, a cache is
//! mounted as an overlayfs on the host: the cache folder the read-only
//! lower layer, an upper folder on the sandbox's own disk. What a step
//! writes, deletes or renames there is held by the sandbox's disk (counted
//! against its limit, `ENOSPC` when it is full) and the cache itself is
//! untouched while the sandbox lives. When the sandbox is destroyed by the
//! process that made it (which holds the cache's lock), the upper layer is
//! written into the cache: files and folders copied, overlayfs' whiteouts
//! and opaque folders applied as deletions. A sandbox removed otherwise
//! (`rfs gc` of a killed run's) leaves its cache as it was.
//!
//! Without a disk cap (rfs not root) the folder is bound as it is: there
//! is no limit to get around.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::errors::SetupError;
use crate::provider::CacheMount;

/// Where the layers of a sandbox's caches live, in its directory.
const DIR: &str = ".caches";

/// One cache mounted through an overlay: what to write back where.
#[derive(Debug)]
pub(super) struct Layer {
    name: String,
    /// The cache folder (the lower layer).
    cache: PathBuf,
    /// `DIR/<name>` under the sandbox directory.
    root: PathBuf,
}

/// The caches as the sandbox mounts them: over an overlay of each where
/// the sandbox `dir` has a disk cap (returned as [`Layer`]s), else as
/// they are.
pub(super) fn mount(
    dir: &Path,
    caches: &[CacheMount],
) -> Result<(Vec<CacheMount>, Vec<Layer>), SetupError> {
    if caches.is_empty() || !super::disk::is_mounted(dir) {
        return Ok((caches.to_vec(), vec![]));
    }
    let (mut mounts, mut layers) = (vec![], vec![]);
    for c in caches {
        let root = dir.join(DIR).join(&c.name);
        let view = overlay(&c.host_dir, &root).map_err(|message| SetupError::Cache {
            name: c.name.clone(),
            message: format!(
                "its writes cannot be held by the sandbox's disk (its limit would not bound them): {message}"
            ),
        })?;
        layers.push(Layer {
            name: c.name.clone(),
            cache: c.host_dir.clone(),
            root,
        });
        mounts.push(CacheMount {
            host_dir: view,
            ..c.clone()
        });
    }
    Ok((mounts, layers))
}

/// Mount `cache` as the lower layer of an overlay under `root`; the
/// mounted view.
fn overlay(cache: &Path, root: &Path) -> Result<PathBuf, String> {
    if [cache, root]
        .iter()
        .any(|p| p.to_string_lossy().contains([',', ':', '\\']))
    {
        return Err("a path holds `,`, `:` or `\\`, which overlayfs options cannot carry".into());
    }
    let (upper, work, view) = (root.join("upper"), root.join("work"), root.join("view"));
    for d in [&upper, &work, &view] {
        std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
    }
    // The view's root takes the cache folder's owner and mode.
    let meta = std::fs::metadata(cache).map_err(|e| format!("{}: {e}", cache.display()))?;
    std::os::unix::fs::chown(&upper, Some(meta.uid()), Some(meta.gid()))
        .and_then(|()| std::fs::set_permissions(&upper, meta.permissions()))
        .map_err(|e| format!("{}: {e}", upper.display()))?;
    // Renames and metadata changes copied up whole, no index: the upper
    // layer is then plain files, folders, whiteouts and opaque folders.
    super::overlay::mount(
        "rfs-cache",
        &view,
        cache,
        &upper,
        &work,
        "redirect_dir=off,index=off,metacopy=off",
    )?;
    Ok(view)
}

/// Unmount every cache overlay of the sandbox `dir` (none: nothing to do).
pub(super) fn unmount(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir.join(DIR)) else {
        return;
    };
    for e in entries.flatten() {
        let view = e.path().join("view");
        if nix::sys::statfs::statfs(&view)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::OVERLAYFS_SUPER_MAGIC)
        {
            let _ = nix::mount::umount2(&view, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// After every process of the sandbox is gone: unmount each overlay and
/// write what the sandbox changed into its cache. A cache whose changes
/// could not all be written is emptied (never left half-written); the
/// caches so emptied are returned with why.
pub(super) fn write_back(layers: &[Layer]) -> Vec<(String, String)> {
    let mut emptied = vec![];
    for l in layers {
        let view = l.root.join("view");
        // Never written while its overlay could still be used.
        let done = nix::mount::umount2(&view, nix::mount::MntFlags::empty())
            .map_err(|e| format!("cannot unmount {}: {e}", view.display()))
            .and_then(|()| {
                apply(&l.root.join("upper"), &l.cache)
                    .map_err(|e| format!("cannot write its changes: {e}"))
            });
        if let Err(why) = done {
            let _ = nix::mount::umount2(&view, nix::mount::MntFlags::MNT_DETACH);
            let _ = empty(&l.cache);
            emptied.push((l.name.clone(), why));
        }
    }
    emptied
}

/// Apply the overlay upper layer `upper` to the folder `to`, by
/// descriptor on both sides: the upper layer is what the sandbox wrote,
/// and the cache holds links earlier runs left
/// ([`crate::untrusted_tree::apply_overlay_upper`]).
fn apply(upper: &Path, to: &Path) -> std::io::Result<()> {
    crate::untrusted_tree::apply_overlay_upper(upper, to)
}

/// Remove everything inside `dir`.
fn empty(dir: &Path) -> std::io::Result<()> {
    crate::untrusted_tree::empty(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What the sandbox did through the overlay, written back: a new
    /// file, a changed one, a deleted one, a folder replaced whole.
    #[test]
    fn a_caches_writes_deletions_and_replaced_folders_reach_it_after_the_sandbox() {
        if !super::super::sys::host_root() {
            eprintln!("skipped: mounting overlayfs on the host needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir_all(cache.join("old/deep")).unwrap();
        std::fs::write(cache.join("keep"), "kept").unwrap();
        std::fs::write(cache.join("change"), "before").unwrap();
        std::fs::write(cache.join("gone"), "x").unwrap();
        std::fs::write(cache.join("old/deep/f"), "x").unwrap();
        let dir = t.path().join("sandbox");
        std::fs::create_dir(&dir).unwrap();
        super::super::disk::mount(&dir, 8 << 20).unwrap();
        let c = CacheMount {
            name: "pip".into(),
            host_dir: cache.clone(),
            home_relative: ".cache/pip".into(),
        };
        let (mounts, layers) = mount(&dir, &[c]).unwrap();
        let view = &mounts[0].host_dir;
        assert_ne!(view, &cache);
        std::fs::write(view.join("new"), "new").unwrap();
        std::fs::write(view.join("change"), "after").unwrap();
        std::fs::remove_file(view.join("gone")).unwrap();
        std::fs::remove_dir_all(view.join("old")).unwrap();
        std::fs::create_dir(view.join("old")).unwrap();
        std::fs::write(view.join("old/fresh"), "f").unwrap();
        std::fs::write(view.join("suid"), "#!/bin/sh\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(view.join("suid"), std::fs::Permissions::from_mode(0o6755))
            .unwrap();
        std::fs::create_dir(view.join("open")).unwrap();
        std::fs::set_permissions(view.join("open"), std::fs::Permissions::from_mode(0o777))
            .unwrap();
        assert!(
            !cache.join("new").exists(),
            "the cache is untouched while the sandbox lives"
        );
        assert!(write_back(&layers).is_empty());
        let read = |p: &str| std::fs::read_to_string(cache.join(p)).ok();
        assert_eq!(read("keep").as_deref(), Some("kept"));
        assert_eq!(read("new").as_deref(), Some("new"));
        assert_eq!(read("change").as_deref(), Some("after"));
        assert_eq!(read("gone"), None);
        assert!(
            !cache.join("old/deep").exists(),
            "the replaced folder's old content is gone"
        );
        assert_eq!(read("old/fresh").as_deref(), Some("f"));
        let mode = std::fs::metadata(cache.join("suid")).unwrap().mode();
        assert_eq!(
            mode & 0o7777,
            0o755,
            "a setuid/setgid bit reached this machine: {mode:o}"
        );
        let mode = std::fs::metadata(cache.join("open")).unwrap().mode();
        assert_eq!(
            mode & 0o7777,
            0o775,
            "a world-writable folder reached this machine: {mode:o}"
        );
        super::super::disk::unmount(&dir).unwrap();
    }

    /// A step writing more than the sandbox's disk into its cache gets
    /// `ENOSPC`, and the cache (this machine's disk) holds nothing of it.
    #[test]
    fn a_cache_cannot_take_more_of_this_machines_disk_than_the_sandboxs_limit() {
        if !super::super::sys::host_root() {
            eprintln!("skipped: a sandbox disk (a tmpfs mounted on the host) needs root");
            return;
        }
        let t = tempfile::tempdir().unwrap();
        let cache = t.path().join("cache");
        std::fs::create_dir(&cache).unwrap();
        let dir = t.path().join("sandbox");
        std::fs::create_dir(&dir).unwrap();
        super::super::disk::mount(&dir, 4 << 20).unwrap();
        let c = CacheMount {
            name: "big".into(),
            host_dir: cache.clone(),
            home_relative: ".cache/big".into(),
        };
        let (mounts, _layers) = mount(&dir, &[c]).unwrap();
        let full = std::fs::write(mounts[0].host_dir.join("blob"), vec![0u8; 16 << 20]);
        assert_eq!(full.map_err(|e| e.raw_os_error()), Err(Some(libc::ENOSPC)));
        unmount(&dir);
        assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0);
        super::super::disk::unmount(&dir).unwrap();
    }
}
