//! Creating folders and files beneath a tree a sandbox could have
//! touched (a cache's mount point in a fork's home, planted there by its
//! setup; a file rfs uploads into a sandbox's home).

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Component, Path};

use rustix::fs::{Mode, OFlags};

/// Create the folder `rel` beneath `root` and every missing one above it,
/// and open it. No component may be a symbolic link (refused, naming
/// it), `..`, or on another filesystem: a link planted by a sandbox is
/// never followed into a folder of the host.
pub fn create_dir_all(root: impl AsFd, rel: &Path) -> std::io::Result<OwnedFd> {
    walk(root, rel, true)
}

/// Open the existing folder `rel` beneath `root`, under the same rules
/// as [`create_dir_all`] (no link followed, no `..`, no other
/// filesystem), creating nothing.
pub fn open_dir(root: impl AsFd, rel: &Path) -> std::io::Result<OwnedFd> {
    walk(root, rel, false)
}

/// Put the host file `from` at `rel` beneath `root` (its folder must
/// exist, reached as by [`open_dir`]): a hard link where the two share a
/// filesystem, else a copy into a file rfs creates. Whatever the
/// sandbox left at that name (a planted link to a host file, say) is
/// removed first, never written through.
pub fn place_file(root: impl AsFd, rel: &Path, from: &Path) -> std::io::Result<()> {
    let Some(name) = rel.file_name() else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("{} names no file", rel.display()),
        ));
    };
    let parent = open_dir(root, rel.parent().unwrap_or(Path::new("")))?;
    match rustix::fs::unlinkat(&parent, name, rustix::fs::AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(e.into()),
    }
    let linked = rustix::fs::linkat(
        rustix::fs::CWD,
        from,
        &parent,
        name,
        rustix::fs::AtFlags::empty(),
    );
    if linked.is_ok() {
        return Ok(());
    }
    let to = rustix::fs::openat(
        &parent,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o644),
    )?;
    let mut to = std::fs::File::from(to);
    std::io::copy(&mut std::fs::File::open(from)?, &mut to)?;
    Ok(())
}

fn walk(root: impl AsFd, rel: &Path, create: bool) -> std::io::Result<OwnedFd> {
    let dev = rustix::fs::fstat(&root)?.st_dev;
    let mut cur = rustix::io::dup(&root)?;
    let mut so_far = std::path::PathBuf::new();
    for c in rel.components() {
        let Component::Normal(name) = c else {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("{} has a component that is not a plain name", rel.display()),
            ));
        };
        so_far.push(name);
        if create {
            match rustix::fs::mkdirat(&cur, name, Mode::from_raw_mode(0o755)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let next = rustix::fs::openat(
            &cur,
            name,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR => std::io::Error::other(format!(
                "{} is a symbolic link or not a folder (made inside the sandbox): refused, never followed",
                so_far.display()
            )),
            e => e.into(),
        })?;
        if rustix::fs::fstat(&next)?.st_dev != dev {
            return Err(std::io::Error::other(format!(
                "{} is another filesystem mounted in the tree: refused",
                so_far.display()
            )));
        }
        cur = next;
    }
    Ok(cur)
}
