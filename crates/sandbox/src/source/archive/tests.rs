//! Tests of the archive builder.

use super::*;
use crate::source::manifest::Entry;

/// Regression (fuzz: tar_round_trip, symlink target normalised): a
/// committed symlink's target reaches the archive byte for byte, short
/// or long, with `.` components, doubled and trailing slashes.
#[test]
fn symlink_targets_are_archived_byte_for_byte() {
    let long = format!("{}/./x//", "d".repeat(150));
    let targets: Vec<&[u8]> = vec![
        b"\x10\x88/./",
        b"d/./",
        b"a//b",
        b"./x",
        b"../up/",
        long.as_bytes(),
    ];
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let mut tb = repo.treebuilder(None).unwrap();
    for (i, t) in targets.iter().enumerate() {
        let oid = repo.blob(t).unwrap();
        tb.insert(format!("l{i}"), oid, 0o120000).unwrap();
    }
    let tree = repo.find_tree(tb.write().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@rfs.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "links", &tree, &[])
        .unwrap();
    let mut opts = crate::source::SourceOptions::new(dir.path().to_path_buf());
    opts.allow_dirty = true;
    let resolved = crate::source::repo::resolve(&opts).unwrap();
    let (bytes, built) =
        build_into(dir.path(), &resolved, Vec::new(), Some(DigestKind::Sha256)).unwrap();
    let mut seen = 0;
    for e in tar::Archive::new(&bytes[..]).entries().unwrap() {
        let e = e.unwrap();
        if e.header().entry_type() != tar::EntryType::Symlink {
            continue;
        }
        let name = e.path().unwrap().to_string_lossy().into_owned();
        let i: usize = name.trim_start_matches('l').parse().unwrap();
        assert_eq!(
            e.link_name_bytes().unwrap().as_ref(),
            targets[i],
            "{name} in the archive"
        );
        assert_eq!(
            built.manifest.entries[name.as_bytes()],
            Entry::Symlink {
                target: targets[i].to_vec()
            }
        );
        seen += 1;
    }
    assert_eq!(seen, targets.len());
}

/// The host's entries digest, made from the manifest's file hashes
/// without hashing the content again, is the digest the verifier
/// computes from the stream: long names and link targets (GNU `L`/`K`
/// entries), empty and exec files, loose and packed blobs, a symlink.
#[test]
fn the_builders_entries_digest_is_the_streams() {
    let dir = tempfile::tempdir().unwrap();
    let repo = Repository::init(dir.path()).unwrap();
    let mut tb = repo.treebuilder(None).unwrap();
    let long = "n".repeat(180);
    let files: Vec<(String, Vec<u8>, i32)> = vec![
        ("empty".into(), vec![], 0o100644),
        ("x.sh".into(), b"#!/bin/sh\n".to_vec(), 0o100755),
        (long.clone(), vec![3u8; 70_000], 0o100644),
        ("block".into(), vec![1u8; 1024], 0o100644),
        (
            "l".into(),
            format!("{}/t", "d".repeat(120)).into_bytes(),
            0o120000,
        ),
    ];
    for (name, data, mode) in &files {
        let oid = repo.blob(data).unwrap();
        tb.insert(name, oid, *mode).unwrap();
    }
    let tree = repo.find_tree(tb.write().unwrap()).unwrap();
    let sig = git2::Signature::now("t", "t@rfs.invalid").unwrap();
    repo.commit(Some("HEAD"), &sig, &sig, "x", &tree, &[])
        .unwrap();
    let mut opts = crate::source::SourceOptions::new(dir.path().to_path_buf());
    opts.allow_dirty = true;
    let resolved = crate::source::repo::resolve(&opts).unwrap();
    let (bytes, built) =
        build_into(dir.path(), &resolved, Vec::new(), Some(DigestKind::Entries)).unwrap();
    let (digest, size) = built.archive.unwrap();
    assert_eq!(size, bytes.len() as u64);
    assert_eq!(digest, super::super::archive_digest::of(&bytes));
    let (plain, _) = build_into(dir.path(), &resolved, Vec::new(), Some(DigestKind::Sha256))
        .unwrap()
        .1
        .archive
        .unwrap();
    assert_eq!(plain, hex::encode(Sha256::digest(&bytes)));
    assert_ne!(plain, digest);
}
