//! Walking a commit's tree (and its pinned submodules) into a
//! deterministic tar, each blob streamed and hashed on the way.

use std::io::{self, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use git2::{ObjectType, Oid, Repository};
use sha2::{Digest, Sha256};

use super::hashing::{ArchiveHash, HashingReader, MaybeHashing};
use crate::source::manifest::{Entry, Manifest};
use crate::source::pack_stream::Packs;
use crate::source::SourceError;

pub(super) type SubmoduleLookup<'a> = dyn Fn(&[u8]) -> Option<(std::path::PathBuf, Oid)> + 'a;

pub(super) struct Walker<'a, W: Write> {
    tar: &'a mut tar::Builder<MaybeHashing<W>>,
    manifest: &'a mut Manifest,
    mtime: u64,
    buf: Vec<u8>,
    /// Each repository's packs (the commit's, its submodules'), opened
    /// once.
    packs: std::collections::HashMap<std::path::PathBuf, std::rc::Rc<Packs>>,
}

/// A tar builder over `out` that writes the same bytes for the same
/// entries (no host times, owners or symlink following), hashing the
/// archive with `hash`.
pub(super) fn deterministic_tar<W: Write>(
    out: W,
    hash: Option<ArchiveHash>,
) -> tar::Builder<MaybeHashing<W>> {
    let mut tar = tar::Builder::new(MaybeHashing {
        inner: out,
        hash,
        n: 0,
    });
    tar.mode(tar::HeaderMode::Deterministic);
    tar.follow_symlinks(false);
    tar
}

impl<'a, W: Write> Walker<'a, W> {
    pub(super) fn new(
        tar: &'a mut tar::Builder<MaybeHashing<W>>,
        manifest: &'a mut Manifest,
        mtime: u64,
    ) -> Self {
        Walker {
            tar,
            manifest,
            mtime,
            buf: vec![0u8; 256 * 1024],
            packs: Default::default(),
        }
    }
}

impl<W: Write> Walker<'_, W> {
    fn header(&self, kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_mtime(self.mtime);
        h.set_uid(0);
        h.set_gid(0);
        h
    }

    pub(super) fn tree(
        &mut self,
        repo: &Repository,
        tree: Oid,
        prefix: &[u8],
        submodule: &SubmoduleLookup<'_>,
    ) -> Result<(), SourceError> {
        let tree = repo.find_tree(tree)?;
        for entry in tree.iter() {
            let mut path = prefix.to_vec();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(entry.name_bytes());
            let ospath = Path::new(std::ffi::OsStr::from_bytes(&path));
            match entry.kind() {
                Some(ObjectType::Tree) => {
                    let depth = path.iter().filter(|b| **b == b'/').count() + 1;
                    if depth > crate::source::MAX_TREE_DEPTH {
                        return Err(crate::source::too_deep(&path, depth));
                    }
                    let mut h = self.header(tar::EntryType::Directory, 0o755, 0);
                    self.tar.append_data(&mut h, ospath, io::empty())?;
                    self.manifest.entries.insert(path.clone(), Entry::Dir);
                    self.tree(repo, entry.id(), &path, submodule)?;
                }
                Some(ObjectType::Blob) if entry.filemode() == 0o120000 => {
                    let blob = repo.find_blob(entry.id())?;
                    let target = blob.content().to_vec();
                    let mut h = self.header(tar::EntryType::Symlink, 0o777, 0);
                    set_link_verbatim(self.tar, &mut h, &target)?;
                    self.tar.append_data(&mut h, ospath, io::empty())?;
                    self.manifest
                        .entries
                        .insert(path, Entry::Symlink { target });
                }
                Some(ObjectType::Blob) => {
                    let exec = entry.filemode() & 0o111 != 0;
                    let (sha256, size) = self.blob(repo, entry.id(), ospath, exec)?;
                    self.manifest
                        .entries
                        .insert(path, Entry::File { exec, sha256, size });
                }
                Some(ObjectType::Commit) => {
                    let (sub_path, commit) =
                        submodule(&path).ok_or_else(|| SourceError::Submodules {
                            paths: vec![String::from_utf8_lossy(&path).into_owned()],
                        })?;
                    let sub = Repository::open(sub_path)?;
                    let sub_tree = sub.find_commit(commit)?.tree_id();
                    let mut h = self.header(tar::EntryType::Directory, 0o755, 0);
                    self.tar.append_data(&mut h, ospath, io::empty())?;
                    self.manifest.entries.insert(path.clone(), Entry::Dir);
                    // Nested submodules were refused when resolving.
                    self.tree(&sub, sub_tree, &path, &|_| None)?;
                }
                _ => {
                    return Err(SourceError::Git(format!(
                        "unsupported tree entry {}",
                        String::from_utf8_lossy(&path)
                    )))
                }
            }
        }
        Ok(())
    }

    /// One entry without recursing: a directory header, a symlink or a file.
    pub(super) fn entry(
        &mut self,
        repo: &Repository,
        path: &[u8],
        kind: ObjectType,
        id: Oid,
        filemode: i32,
    ) -> Result<(), SourceError> {
        let ospath = Path::new(std::ffi::OsStr::from_bytes(path));
        match kind {
            ObjectType::Tree => {
                let mut h = self.header(tar::EntryType::Directory, 0o755, 0);
                self.tar.append_data(&mut h, ospath, io::empty())?;
                self.manifest.entries.insert(path.to_vec(), Entry::Dir);
            }
            ObjectType::Blob if filemode == 0o120000 => {
                let target = repo.find_blob(id)?.content().to_vec();
                let mut h = self.header(tar::EntryType::Symlink, 0o777, 0);
                self.tar.append_link(
                    &mut h,
                    ospath,
                    Path::new(std::ffi::OsStr::from_bytes(&target)),
                )?;
                self.manifest
                    .entries
                    .insert(path.to_vec(), Entry::Symlink { target });
            }
            ObjectType::Blob => {
                let exec = filemode & 0o111 != 0;
                let (sha256, size) = self.blob(repo, id, ospath, exec)?;
                self.manifest
                    .entries
                    .insert(path.to_vec(), Entry::File { exec, sha256, size });
            }
            _ => {
                return Err(SourceError::Git(format!(
                    "unsupported tree entry {}",
                    String::from_utf8_lossy(path)
                )))
            }
        }
        Ok(())
    }

    /// Stream one blob into the archive, hashing its content on the way
    /// (the hash also goes into the archive's entries digest).
    fn blob(
        &mut self,
        repo: &Repository,
        id: Oid,
        path: &Path,
        exec: bool,
    ) -> Result<(String, u64), SourceError> {
        self.tar.get_mut().expect_content_digest();
        let (sha, n) = self.blob_content(repo, id, path, exec)?;
        self.tar.get_mut().content_digest(&sha)?;
        Ok((sha, n))
    }

    fn blob_content(
        &mut self,
        repo: &Repository,
        id: Oid,
        path: &Path,
        exec: bool,
    ) -> Result<(String, u64), SourceError> {
        let mode = if exec { 0o755 } else { 0o644 };
        // Whole blobs in a pack are read from it here (libgit2 cannot
        // stream from packs; an in-memory lookup, so asked first), loose
        // objects stream through libgit2's reader. Neither is verified by
        // libgit2, so the content is hashed as a git object on the way
        // (what ships is provably `id`).
        let packs = self.packs_of(repo);
        if let Some((reader, size)) = packs.blob(id)? {
            let from = ("read from its pack", "the pack is corrupt");
            return self.append_verified(reader, size, id, path, mode, from);
        }
        if let Ok((reader, size, _)) = repo.odb()?.reader(id) {
            let from = ("read from the object database", "the repository is corrupt");
            return self.append_verified(reader, size as u64, id, path, mode, from);
        }
        // Deltified (or elsewhere): libgit2 reads it whole and checks it.
        let blob = repo.find_blob(id)?;
        let content = blob.content();
        let mut h = self.header(tar::EntryType::Regular, mode, content.len() as u64);
        self.tar.append_data(&mut h, path, content)?;
        Ok((hex::encode(Sha256::digest(content)), content.len() as u64))
    }

    /// The packs of `repo`, opened on first use.
    fn packs_of(&mut self, repo: &Repository) -> std::rc::Rc<Packs> {
        self.packs
            .entry(repo.path().to_path_buf())
            .or_insert_with(|| std::rc::Rc::new(Packs::open(repo.path())))
            .clone()
    }

    /// Append the `size` bytes of blob `id` streamed from `reader`, hashing
    /// them (SHA-256 for the manifest, SHA-1 as a git object) on the way;
    /// content that is not `id` is an error saying where it was `from`
    /// (how it was read, what is then corrupt).
    fn append_verified(
        &mut self,
        reader: impl Read,
        size: u64,
        id: Oid,
        path: &Path,
        mode: u32,
        (read, corrupt): (&str, &str),
    ) -> Result<(String, u64), SourceError> {
        let mut hr = HashingReader::new(reader, std::mem::take(&mut self.buf), size);
        let mut h = self.header(tar::EntryType::Regular, mode, size);
        let res = self.tar.append_data(&mut h, path, &mut hr);
        let (buf, sha, n, object) = hr.finish();
        self.buf = buf;
        res?;
        if n != size || object != id.to_string() {
            return Err(SourceError::Git(format!(
                "object {id} {read} does not hash back to its id (read {n} of {size} bytes): {corrupt}"
            )));
        }
        Ok((sha, n))
    }
}

/// Put a symlink's `target` in `h` byte for byte. (The tar crate's
/// `set_link_name` normalises it as a path, so a committed `d/./` would
/// arrive as `d/` and the sandbox would hold another symlink than the
/// commit.) A target that does not fit the header's 100-byte field goes
/// first in a GNU long-link (`K`) entry, as GNU tar writes it.
fn set_link_verbatim<W: Write>(
    tar: &mut tar::Builder<W>,
    h: &mut tar::Header,
    target: &[u8],
) -> io::Result<()> {
    const FIELD: usize = 100;
    if target.len() < FIELD {
        return h.set_link_name_literal(target);
    }
    let mut long = tar::Header::new_gnu();
    let name = b"././@LongLink";
    long.as_gnu_mut().expect("a GNU header").name[..name.len()].copy_from_slice(name);
    long.set_mode(0o644);
    long.set_uid(0);
    long.set_gid(0);
    long.set_mtime(0);
    long.set_size(target.len() as u64 + 1);
    long.set_entry_type(tar::EntryType::GNULongLink);
    long.set_cksum();
    tar.append(&long, target.chain(&[0u8][..]))?;
    h.set_link_name_literal(&target[..FIELD - 1])
}
