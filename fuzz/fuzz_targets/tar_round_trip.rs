//! The tar builder round trip: a committed tree built from the input →
//! tar → extracted with the `tar` crate → the extracted tree's manifest
//! equals the builder's manifest.
#![no_main]

use std::collections::BTreeMap;
use std::path::Path;

use libfuzzer_sys::fuzz_target;
use rfs::fuzzing::{
    build_archive_into, resolve_source, DigestKind, Entry, Manifest, SourceOptions,
};
use sha2::{Digest, Sha256};

fuzz_target!(|data: &[u8]| {
    // Records separated by 0x00: NAME 0x01 KIND CONTENT, KIND one of
    // f (file), x (executable), l (symlink to CONTENT).
    let mut files: BTreeMap<String, (u8, Vec<u8>)> = BTreeMap::new();
    for rec in data.split(|b| *b == 0).take(16) {
        let Some(i) = rec.iter().position(|b| *b == 1) else { continue };
        let name: String = String::from_utf8_lossy(&rec[..i])
            .chars()
            .filter(|c| !c.is_control() && *c != '\\')
            .collect();
        let comps: Vec<&str> = name.split('/').filter(|c| !c.is_empty() && *c != "." && *c != ".." && *c != ".git").collect();
        if comps.is_empty() || comps.len() > 4 {
            continue;
        }
        let name = comps.join("/");
        if files.keys().any(|k| k.starts_with(&format!("{name}/")) || name.starts_with(&format!("{k}/"))) {
            continue;
        }
        let kind = rec.get(i + 1).copied().unwrap_or(b'f');
        let content = rec.get(i + 2..).unwrap_or_default().to_vec();
        files.insert(name, (kind, content));
    }
    if files.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let repo = git2::Repository::init(dir.path()).unwrap();
    let mut index = repo.index().unwrap();
    for (name, (kind, content)) in &files {
        let (mode, blob) = match kind {
            b'l' if !content.is_empty() && !content.contains(&0) => (0o120000, content.clone()),
            b'x' => (0o100755, content.clone()),
            _ => (0o100644, content.clone()),
        };
        let oid = repo.blob(&blob).unwrap();
        let mut e = git2::IndexEntry {
            ctime: git2::IndexTime::new(0, 0),
            mtime: git2::IndexTime::new(0, 0),
            dev: 0, ino: 0, mode, uid: 0, gid: 0,
            file_size: blob.len() as u32,
            id: oid, flags: 0, flags_extended: 0,
            path: name.as_bytes().to_vec(),
        };
        e.flags = (name.len().min(0xfff)) as u16;
        // Names git itself refuses to index (`.git.`, `.GIT`, ...) cannot
        // be committed, so they are no input for the builder.
        if index.add(&e).is_err() {
            return;
        }
    }
    let tree = repo.find_tree(index.write_tree().unwrap()).unwrap();
    let sig = git2::Signature::now("fuzz", "fuzz@rfs.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "fuzz", &tree, &[]).unwrap();

    let mut opts = SourceOptions::new(dir.path().to_path_buf());
    opts.allow_dirty = true;
    let resolved = resolve_source(&opts).unwrap();
    let (tar_bytes, built) =
        build_archive_into(dir.path(), &resolved, Vec::new(), Some(DigestKind::Sha256)).unwrap();

    let out = tempfile::tempdir().unwrap();
    tar::Archive::new(&tar_bytes[..]).unpack(out.path()).unwrap();
    let extracted = manifest_of(out.path());
    assert_eq!(extracted, built.manifest, "tree -> tar -> extract changed the manifest");
});

fn manifest_of(root: &Path) -> Manifest {
    let mut m = Manifest::default();
    walk(root, root, &mut m);
    m
}

fn walk(root: &Path, dir: &Path, m: &mut Manifest) {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::PermissionsExt;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        let rel = p.strip_prefix(root).unwrap().as_os_str().as_bytes().to_vec();
        let meta = std::fs::symlink_metadata(&p).unwrap();
        let entry = if meta.file_type().is_symlink() {
            Entry::Symlink { target: std::fs::read_link(&p).unwrap().as_os_str().as_bytes().to_vec() }
        } else if meta.is_dir() {
            walk(root, &p, m);
            Entry::Dir
        } else {
            let content = std::fs::read(&p).unwrap();
            Entry::File {
                exec: meta.permissions().mode() & 0o111 != 0,
                sha256: format!("{:x}", Sha256::digest(&content)),
                size: content.len() as u64,
            }
        };
        m.entries.insert(rel, entry);
    }
}
