//! Streaming a committed tree from the object database into a tar file.
//!
//! Nothing is read from the working tree. Blobs are streamed (loose objects
//! through the ODB reader, so a 1 GiB file never sits in memory); the archive
//! and every file are hashed in the same pass, which yields the expected
//! [`Manifest`] for the in-sandbox verification.

use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use git2::{ObjectType, Oid, Repository};
use sha2::{Digest, Sha256};

use super::archive_digest::{DigestKind, EntriesDigest};
use super::manifest::{Entry, Manifest};
use super::pack_stream::Packs;
use super::repo::ResolvedSource;
use super::SourceError;

/// The built archive.
#[derive(Debug)]
pub struct BuiltArchive {
    /// sha256 of the (uncompressed) tar stream.
    pub sha256: String,
    /// Bytes of the (uncompressed) tar stream.
    pub size: u64,
    /// Bytes written to the output (compressed size when compressed).
    pub wire_bytes: u64,
    pub manifest: Manifest,
}

/// What [`build_into`] returns: the manifest, and the archive's digest and
/// size when it was asked to hash the archive itself.
#[derive(Debug)]
pub struct Built {
    pub manifest: Manifest,
    pub archive: Option<(String, u64)>,
}

/// Bound libgit2's memory once per process: pack windows are mapped in
/// 8 MiB pieces with at most 16 MiB mapped at a time (default: 1 GiB
/// windows, up to 8 GiB mapped, all of it counted in RSS once read).
pub fn bound_git_memory() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: libgit2 global options, set once before any repository
        // is opened by this module (the calls are not thread-safe against
        // concurrent pack access, hence the Once before first use).
        unsafe {
            let _ = git2::opts::set_mwindow_size(8 << 20);
            let _ = git2::opts::set_mwindow_mapped_limit(16 << 20);
        }
    });
}

/// Write the resolved tree (plus pinned submodules) as a tar to the file
/// `out`, gzip-compressed when `gzip` (the digest and size are those of
/// the uncompressed tar, which is what the sandbox hashes).
pub fn build(
    repo_dir: &Path,
    src: &ResolvedSource,
    out: &Path,
    gzip: bool,
) -> Result<BuiltArchive, SourceError> {
    let file = BufWriter::with_capacity(1 << 20, File::create(out)?);
    let (file, sha, size, manifest) = if gzip {
        let z = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
        let (hw, built) = build_into(repo_dir, src, HashingWriter::new(z), None)?;
        let (z, sha, size) = hw.finish();
        (z.finish()?, sha, size, built.manifest)
    } else {
        let (hw, built) = build_into(repo_dir, src, HashingWriter::new(file), None)?;
        let (file, sha, size) = hw.finish();
        (file, sha, size, built.manifest)
    };
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_data().ok();
    let wire_bytes = file.metadata()?.len();
    Ok(BuiltArchive {
        sha256: sha,
        size,
        wire_bytes,
        manifest,
    })
}

/// Stream the resolved tree (plus pinned submodules) as a tar into `out`,
/// returning `out` (flushed) and the manifest; `hash_archive` also computes
/// that digest of the tar stream here (leave it `None` when the consumer
/// hashes the stream). The [`DigestKind::Entries`] digest costs no second
/// pass over the content: each file's manifest hash goes into it.
pub fn build_into<W: Write>(
    repo_dir: &Path,
    src: &ResolvedSource,
    out: W,
    hash_archive: Option<DigestKind>,
) -> Result<(W, Built), SourceError> {
    bound_git_memory();
    let repo = Repository::open(repo_dir)?;
    let mtime = repo.find_commit(src.commit)?.time().seconds().max(0) as u64;
    let mut tar = deterministic_tar(
        out,
        hash_archive.map(|kind| match kind {
            DigestKind::Sha256 => ArchiveHash::Sha256(Sha256::new()),
            DigestKind::Entries => ArchiveHash::Entries(EntriesDigest::new()),
        }),
    );
    let mut manifest = Manifest::default();
    let mut w = Walker::new(&mut tar, &mut manifest, mtime);
    w.tree(&repo, src.tree, b"", &|path: &[u8]| {
        src.submodules
            .iter()
            .find(|s| s.path.as_bytes() == path)
            .map(|s| (s.repo_path.clone(), s.commit))
    })?;
    let mut mh = tar.into_inner()?;
    mh.inner.flush()?;
    let n = mh.n;
    let archive = mh.hash.map(|h| {
        let digest = match h {
            ArchiveHash::Sha256(h) => hex::encode(h.finalize()),
            ArchiveHash::Entries(d) => d.finalize(),
        };
        (digest, n)
    });
    Ok((mh.inner, Built { manifest, archive }))
}

/// One path of a commit's tree to ship on its own (a re-sync ships only
/// what changed): a directory header (its contents are listed separately)
/// or a blob (file or symlink).
#[derive(Debug, Clone)]
pub struct Shipped {
    pub path: Vec<u8>,
    pub id: Oid,
    pub filemode: i32,
    pub kind: ObjectType,
}

/// Stream exactly `entries` (in order; parents before children) of the
/// repository's objects as a tar into `out`, returning `out` (flushed) and
/// the manifest of what was shipped (files hashed on the way).
pub fn build_entries_into<W: Write>(
    repo_dir: &Path,
    commit: Oid,
    entries: &[Shipped],
    out: W,
) -> Result<(W, Manifest), SourceError> {
    bound_git_memory();
    let repo = Repository::open(repo_dir)?;
    let mtime = repo.find_commit(commit)?.time().seconds().max(0) as u64;
    let mut tar = deterministic_tar(out, None);
    let mut manifest = Manifest::default();
    let mut w = Walker::new(&mut tar, &mut manifest, mtime);
    for e in entries {
        w.entry(&repo, &e.path, e.kind, e.id, e.filemode)?;
    }
    let mut out = tar.into_inner()?.inner;
    out.flush()?;
    Ok((out, manifest))
}

/// The archive digest computed while the archive is written.
enum ArchiveHash {
    Sha256(Sha256),
    Entries(EntriesDigest),
}

/// A writer that counts and optionally hashes what passes through.
struct MaybeHashing<W> {
    inner: W,
    hash: Option<ArchiveHash>,
    n: u64,
}

impl<W> MaybeHashing<W> {
    /// The next regular file's content hash is given by
    /// [`MaybeHashing::content_digest`] (entries digest only).
    fn expect_content_digest(&mut self) {
        if let Some(ArchiveHash::Entries(d)) = self.hash.as_mut() {
            d.expect_content_digest();
        }
    }

    /// The hex SHA-256 of the regular file just written.
    fn content_digest(&mut self, sha256_hex: &str) -> io::Result<()> {
        let Some(ArchiveHash::Entries(d)) = self.hash.as_mut() else {
            return Ok(());
        };
        let mut raw = [0u8; 32];
        hex::decode_to_slice(sha256_hex, &mut raw).map_err(io::Error::other)?;
        d.content_digest(&raw).map_err(io::Error::other)
    }
}

impl<W: Write> Write for MaybeHashing<W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        match self.hash.as_mut() {
            Some(ArchiveHash::Sha256(h)) => h.update(&b[..n]),
            Some(ArchiveHash::Entries(d)) => d.update(&b[..n]).map_err(io::Error::other)?,
            None => {}
        }
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

type SubmoduleLookup<'a> = dyn Fn(&[u8]) -> Option<(std::path::PathBuf, Oid)> + 'a;

struct Walker<'a, W: Write> {
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
fn deterministic_tar<W: Write>(out: W, hash: Option<ArchiveHash>) -> tar::Builder<MaybeHashing<W>> {
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
    fn new(
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

    fn tree(
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
                    if depth > super::MAX_TREE_DEPTH {
                        return Err(super::too_deep(&path, depth));
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
    fn entry(
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

/// A writer that hashes and counts what passes through.
pub struct HashingWriter<W> {
    inner: W,
    hash: Sha256,
    n: u64,
}

impl<W: Write> HashingWriter<W> {
    pub fn new(inner: W) -> Self {
        HashingWriter {
            inner,
            hash: Sha256::new(),
            n: 0,
        }
    }
    /// The inner writer, the hex sha256 and the byte count.
    pub fn finish(self) -> (W, String, u64) {
        (self.inner, hex::encode(self.hash.finalize()), self.n)
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(b)?;
        self.hash.update(&b[..n]);
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// A reader that hashes and counts what passes through, reading in large
/// chunks so hashing stays on the fast path.
struct HashingReader<R> {
    inner: R,
    hash: Sha256,
    /// The git object id of a blob (SHA-1 over header + content).
    object: sha1::Sha1,
    n: u64,
    buf: Vec<u8>,
    pos: usize,
    len: usize,
}

impl<R: Read> HashingReader<R> {
    /// Over the content of a blob of `size` bytes.
    fn new(inner: R, buf: Vec<u8>, size: u64) -> Self {
        let mut object = sha1::Sha1::new();
        sha1::Digest::update(&mut object, format!("blob {size}\0").as_bytes());
        HashingReader {
            inner,
            hash: Sha256::new(),
            object,
            n: 0,
            buf,
            pos: 0,
            len: 0,
        }
    }

    /// The buffer, the hex SHA-256, the byte count, the hex object id.
    fn finish(self) -> (Vec<u8>, String, u64, String) {
        let object = hex::encode(sha1::Digest::finalize(self.object));
        (self.buf, hex::encode(self.hash.finalize()), self.n, object)
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.len {
            let n = self.inner.read(&mut self.buf)?;
            if n == 0 {
                return Ok(0);
            }
            self.hash.update(&self.buf[..n]);
            sha1::Digest::update(&mut self.object, &self.buf[..n]);
            self.n += n as u64;
            self.pos = 0;
            self.len = n;
        }
        let k = out.len().min(self.len - self.pos);
        out[..k].copy_from_slice(&self.buf[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
