//! Streaming a committed tree from the object database into a tar file.
//!
//! Nothing is read from the working tree. Blobs are streamed (loose objects
//! through the ODB reader, so a 1 GiB file never sits in memory); the archive
//! and every file are hashed in the same pass, which yields the expected
//! [`Manifest`] for the in-sandbox verification.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;

use git2::{ObjectType, Oid, Repository};
use sha2::{Digest, Sha256};

use super::archive_digest::{DigestKind, EntriesDigest};
use super::manifest::Manifest;
use super::repo::ResolvedSource;
use super::SourceError;

mod hashing;
mod walker;

use hashing::ArchiveHash;
pub use hashing::HashingWriter;
use walker::{deterministic_tar, Walker};

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

#[cfg(test)]
mod tests;
