use std::os::unix::fs::{MetadataExt, PermissionsExt};

use super::*;

fn mode(p: &Path) -> u32 {
    std::fs::symlink_metadata(p).unwrap().mode() & 0o7777
}

/// A tree a sandbox left: a setuid program, a world-writable folder, a
/// hard link, a link out of the tree, a fifo.
fn hostile_tree(at: &Path) {
    std::fs::create_dir_all(at.join("d/sub")).unwrap();
    std::fs::write(at.join("d/sub/f"), "f").unwrap();
    std::fs::write(at.join("suid"), "#!/bin/sh\n").unwrap();
    std::fs::set_permissions(at.join("suid"), std::fs::Permissions::from_mode(0o6755)).unwrap();
    std::fs::set_permissions(at.join("d"), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::hard_link(at.join("d/sub/f"), at.join("hard")).unwrap();
    std::os::unix::fs::symlink("/etc", at.join("out")).unwrap();
    nix::unistd::mkfifo(
        &at.join("fifo"),
        nix::sys::stat::Mode::from_bits_truncate(0o666),
    )
    .unwrap();
}

#[test]
fn a_copy_keeps_files_links_and_hard_links_but_no_special_file_setuid_bit_or_world_write() {
    let t = tempfile::tempdir().unwrap();
    let (from, to) = (t.path().join("from"), t.path().join("to"));
    std::fs::create_dir(&from).unwrap();
    hostile_tree(&from);
    let done = copy(&from, &to).unwrap();
    assert_eq!(std::fs::read_to_string(to.join("d/sub/f")).unwrap(), "f");
    assert_eq!(
        std::fs::read_link(to.join("out")).unwrap(),
        Path::new("/etc")
    );
    assert_eq!(mode(&to.join("suid")), 0o755);
    assert_eq!(mode(&to.join("d")), 0o775);
    assert!(!to.join("fifo").exists() && std::fs::symlink_metadata(to.join("fifo")).is_err());
    let (a, b) = (
        std::fs::metadata(to.join("hard")).unwrap(),
        std::fs::metadata(to.join("d/sub/f")).unwrap(),
    );
    assert_eq!(a.ino(), b.ino(), "a hard link stays one file");
    assert_eq!(done.special_skipped, 1);
    assert_eq!(done.modes_narrowed, 2);
}

#[test]
fn cleaning_in_place_removes_special_files_and_drops_setuid_and_world_write() {
    let t = tempfile::tempdir().unwrap();
    hostile_tree(t.path());
    let done = clean(t.path()).unwrap();
    assert_eq!(mode(&t.path().join("suid")), 0o755);
    assert_eq!(mode(&t.path().join("d")), 0o775);
    assert!(std::fs::symlink_metadata(t.path().join("fifo")).is_err());
    assert!(
        std::fs::symlink_metadata(t.path().join("out")).is_ok(),
        "a link is data"
    );
    assert_eq!(done.special_removed, 1);
    assert!(done.changed());
}

#[test]
fn creating_a_folder_beneath_a_planted_link_is_refused_and_creates_nothing_outside() {
    let t = tempfile::tempdir().unwrap();
    let (home, outside) = (t.path().join("home"), t.path().join("outside"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, home.join(".cache")).unwrap();
    let root = open_root(&home).unwrap();
    let e = create_dir_all(&root, Path::new(".cache/pip")).unwrap_err();
    assert!(e.to_string().contains(".cache is a symbolic link"), "{e}");
    assert!(!outside.join("pip").exists());
    create_dir_all(&root, Path::new("a/b/c")).unwrap();
    assert!(home.join("a/b/c").is_dir());
}

#[test]
fn removing_a_read_only_tree_never_touches_what_a_link_in_it_names() {
    let t = tempfile::tempdir().unwrap();
    let (tree, kept) = (t.path().join("tree"), t.path().join("kept"));
    std::fs::create_dir_all(tree.join("ro/deep")).unwrap();
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(kept.join("f"), "x").unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o555)).unwrap();
    std::os::unix::fs::symlink(&kept, tree.join("ro/link")).unwrap();
    std::fs::set_permissions(tree.join("ro"), std::fs::Permissions::from_mode(0o555)).unwrap();
    remove(&tree).unwrap();
    assert!(!tree.exists());
    assert_eq!(
        mode(&kept),
        0o555,
        "the link's target was not made writable"
    );
    assert!(kept.join("f").exists());
}

/// Two caches that differ had the same digest: names converted lossily
/// (`\xff` and `\xfe` both became U+FFFD), a link target against a file,
/// docker's device nodes all hashed as "other".
#[test]
fn trees_that_differ_by_a_raw_name_a_link_target_or_a_device_number_have_different_digests() {
    use std::os::unix::ffi::OsStrExt as _;
    let d = |build: &dyn Fn(&Path)| {
        let t = tempfile::tempdir().unwrap();
        build(t.path());
        digest(t.path()).unwrap().sha256
    };
    let name = |b: &'static [u8]| {
        move |p: &Path| std::fs::write(p.join(std::ffi::OsStr::from_bytes(b)), "x").unwrap()
    };
    assert_ne!(d(&name(b"\xff")), d(&name(b"\xfe")));
    let link = |target: &'static str| {
        move |p: &Path| std::os::unix::fs::symlink(target, p.join("a")).unwrap()
    };
    assert_ne!(d(&link("x\nfile b")), d(&link("x")));
    assert_ne!(
        d(&|p: &Path| std::fs::write(p.join("a\nb"), "").unwrap()),
        d(&|p: &Path| {
            std::fs::write(p.join("a"), "").unwrap();
            std::fs::write(p.join("b"), "").unwrap();
        })
    );
    if rustix::process::geteuid().is_root() {
        let dev = |minor: u32| {
            move |p: &Path| {
                nix::sys::stat::mknod(
                    &p.join("n"),
                    nix::sys::stat::SFlag::S_IFCHR,
                    nix::sys::stat::Mode::from_bits_truncate(0o600),
                    nix::sys::stat::makedev(1, minor as u64),
                )
                .unwrap()
            }
        };
        assert_ne!(d(&dev(3)), d(&dev(5)), "device numbers count");
    }
}

#[test]
fn empty_removes_everything_inside_read_only_folders_but_nothing_through_a_link() {
    let t = tempfile::tempdir().unwrap();
    let (dir, outside) = (t.path().join("cache"), t.path().join("outside"));
    std::fs::create_dir(&dir).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::fs::write(outside.join("keep"), "k").unwrap();
    hostile_tree(&dir);
    std::os::unix::fs::symlink(&outside, dir.join("to-outside")).unwrap();
    std::fs::set_permissions(dir.join("d/sub"), std::fs::Permissions::from_mode(0o500)).unwrap();
    empty(&dir).unwrap();
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
    assert!(dir.is_dir());
    assert_eq!(std::fs::read_to_string(outside.join("keep")).unwrap(), "k");
}

/// A checkpoint of a forked sandbox copies its home through overlayfs,
/// whose files (layers on two filesystems) report their layer's device:
/// counted as "another filesystem", every file was left out of the copy.
/// Only a folder's device marks a mount point now.
#[test]
fn a_copy_of_an_overlay_over_two_filesystems_keeps_every_file() {
    assert!(
        rustix::process::geteuid().is_root(),
        "mounting the overlay needs root (the suite runs as root)"
    );
    let t = tempfile::tempdir().unwrap();
    let (lower, disk, merged) = (
        t.path().join("lower"),
        t.path().join("disk"),
        t.path().join("merged"),
    );
    for d in [&lower, &disk, &merged] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::create_dir_all(lower.join("sub")).unwrap();
    std::fs::write(lower.join("sub/from-lower"), "l").unwrap();
    nix::mount::mount(
        Some("tmpfs"),
        &disk,
        Some("tmpfs"),
        nix::mount::MsFlags::empty(),
        None::<&str>,
    )
    .unwrap();
    std::fs::create_dir_all(disk.join("upper")).unwrap();
    std::fs::create_dir_all(disk.join("work")).unwrap();
    let opts = format!(
        "lowerdir={},upperdir={},workdir={}",
        lower.display(),
        disk.join("upper").display(),
        disk.join("work").display()
    );
    nix::mount::mount(
        Some("ov"),
        &merged,
        Some("overlay"),
        nix::mount::MsFlags::empty(),
        Some(opts.as_str()),
    )
    .unwrap();
    std::fs::write(merged.join("from-upper"), "u").unwrap();
    let to = t.path().join("copy");
    let done = copy(&merged, &to);
    let _ = nix::mount::umount(&merged);
    let _ = nix::mount::umount(&disk);
    let done = done.unwrap();
    assert_eq!(done.other_filesystems, 0, "{done:?}");
    assert_eq!(
        std::fs::read_to_string(to.join("sub/from-lower")).unwrap(),
        "l"
    );
    assert_eq!(std::fs::read_to_string(to.join("from-upper")).unwrap(), "u");
}
