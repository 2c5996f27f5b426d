//! Mounting an overlayfs on the host (a fork's home and `/tmp` over its
//! checkpoint, a cache's view over the cache folder) without writing a
//! host path into it: the layers are named by rfs's open descriptors
//! (`/proc/self/fd/N`), and overlayfs shows those names, not the folders',
//! in the `/proc/self/mountinfo` a step can read. A step then sees no path
//! of rfs's state directory there either.

use std::os::fd::AsRawFd as _;
use std::path::Path;

/// Mount an overlay named `source` at `target`: `lower` read-only under
/// `upper`, with `work` its work folder and `extra` more options.
pub(super) fn mount(
    source: &str,
    target: &Path,
    lower: &Path,
    upper: &Path,
    work: &Path,
    extra: &str,
) -> Result<(), String> {
    let open = |p: &Path| {
        rustix::fs::open(
            p,
            rustix::fs::OFlags::PATH
                | rustix::fs::OFlags::DIRECTORY
                | rustix::fs::OFlags::NOFOLLOW
                | rustix::fs::OFlags::CLOEXEC,
            rustix::fs::Mode::empty(),
        )
        .map_err(|e| format!("{}: {e}", p.display()))
    };
    let (l, u, w) = (open(lower)?, open(upper)?, open(work)?);
    let fd = |f: &std::os::fd::OwnedFd| format!("/proc/self/fd/{}", f.as_raw_fd());
    let mut opts = format!("lowerdir={},upperdir={},workdir={}", fd(&l), fd(&u), fd(&w));
    if !extra.is_empty() {
        opts.push(',');
        opts.push_str(extra);
    }
    nix::mount::mount(
        Some(source),
        target,
        Some("overlay"),
        nix::mount::MsFlags::MS_NOSUID | nix::mount::MsFlags::MS_NODEV,
        Some(opts.as_str()),
    )
    .map_err(|e| format!("mount -t overlay on {}: {e}", target.display()))
}
