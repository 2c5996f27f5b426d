//! The digest of a tree a sandbox could have touched (a cache, journaled
//! at mount and at the end), read by descriptor.
//!
//! The encoding is unambiguous: every entry is its path and, for a link,
//! its target as raw bytes with their length before them (a name holding
//! a line break cannot pass for two entries, nor a link target for a
//! name), its kind as one byte, its permission bits, and what makes it
//! what it is — a file's size and sha256, a device's numbers.

use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, OFlags};
use sha2::{Digest as _, Sha256};

use super::{kind, names, open_entry, open_root};

/// What a tree holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeDigest {
    /// sha256 of the encoding above, hex.
    pub sha256: String,
    /// Regular files, and their bytes.
    pub files: u64,
    pub bytes: u64,
    /// Every entry below the root (files, folders, links, others).
    pub entries: u64,
}

/// The digest of the folder `dir` (links never followed, nothing outside
/// it read, other filesystems mounted inside not descended into).
pub fn digest(dir: &Path) -> std::io::Result<TreeDigest> {
    digest_with(dir, &mut super::digest_memo::Memo::default())
}

/// [`digest`], reusing the sha256 of each file `memo` holds with the same
/// device, inode, size, modification and change times, and leaving in it
/// exactly this tree's files (see [`super::digest_memo`]).
pub fn digest_with(dir: &Path, memo: &mut super::digest_memo::Memo) -> std::io::Result<TreeDigest> {
    let root = open_root(dir)?;
    let dev = rustix::fs::fstat(&root)?.st_dev;
    let mut records: Vec<(Vec<u8>, Vec<u8>)> = vec![];
    let (mut files, mut bytes) = (0, 0);
    memo.begin();
    walk(
        &root,
        dev,
        &mut Vec::new(),
        &mut records,
        &mut files,
        &mut bytes,
        memo,
    )?;
    memo.end();
    records.sort();
    let mut h = Sha256::new();
    h.update(b"rfs-tree-digest-v2\0");
    for (path, rest) in &records {
        field(&mut h, path);
        h.update(rest);
    }
    Ok(TreeDigest {
        sha256: hex::encode(h.finalize()),
        files,
        bytes,
        entries: records.len() as u64,
    })
}

/// `bytes` with its length (u64, little-endian) before it.
fn field(h: &mut Sha256, bytes: &[u8]) {
    h.update((bytes.len() as u64).to_le_bytes());
    h.update(bytes);
}

fn walk(
    dir: &OwnedFd,
    dev: u64,
    path: &mut Vec<u8>,
    out: &mut Vec<(Vec<u8>, Vec<u8>)>,
    files: &mut u64,
    bytes: &mut u64,
    memo: &mut super::digest_memo::Memo,
) -> std::io::Result<()> {
    for name in names(dir)? {
        let st = match rustix::fs::statat(dir, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => continue,
            Err(e) => return Err(e.into()),
        };
        let len = path.len();
        if len > 0 {
            path.push(b'/');
        }
        path.extend_from_slice(name.to_bytes());
        let mut rest = vec![];
        let perm = (st.st_mode & 0o7777).to_le_bytes();
        match kind(st.st_mode) {
            FileType::Directory if st.st_dev == dev => {
                rest.push(b'd');
                rest.extend_from_slice(&perm);
                let sub = open_entry(dir, &name, &st, OFlags::RDONLY | OFlags::DIRECTORY)?;
                walk(&sub, dev, path, out, files, bytes, memo)?;
            }
            FileType::Directory => rest.push(b'm'), // a mount point: not read
            FileType::RegularFile => {
                let key = super::digest_memo::Key::of(&st);
                let (size, sha) = match memo.get(path, &key) {
                    Some(known) => known,
                    None => {
                        let f = open_entry(dir, &name, &st, OFlags::RDONLY)?;
                        let (size, sha) = hash_file(std::fs::File::from(f))?;
                        memo.read(path, key, size, sha);
                        (size, sha)
                    }
                };
                rest.push(b'f');
                rest.extend_from_slice(&perm);
                rest.extend_from_slice(&size.to_le_bytes());
                rest.extend_from_slice(&sha);
                *files += 1;
                *bytes += size;
            }
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(dir, &name, Vec::new())?;
                rest.push(b'l');
                rest.extend_from_slice(&(target.as_bytes().len() as u64).to_le_bytes());
                rest.extend_from_slice(target.as_bytes());
            }
            other => {
                rest.push(match other {
                    FileType::CharacterDevice => b'c',
                    FileType::BlockDevice => b'b',
                    FileType::Fifo => b'p',
                    FileType::Socket => b's',
                    _ => b'?',
                });
                rest.extend_from_slice(&perm);
                let rdev = st.st_rdev;
                rest.extend_from_slice(&(rustix::fs::major(rdev) as u64).to_le_bytes());
                rest.extend_from_slice(&(rustix::fs::minor(rdev) as u64).to_le_bytes());
            }
        }
        out.push((path.clone(), rest));
        path.truncate(len);
    }
    Ok(())
}

/// A file's size and sha256, as read.
fn hash_file(mut f: std::fs::File) -> std::io::Result<(u64, [u8; 32])> {
    let mut fh = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut size = 0u64;
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        size += n as u64;
        fh.update(&buf[..n]);
    }
    Ok((size, fh.finalize().into()))
}
