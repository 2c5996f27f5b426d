//! Reading whole (non-delta) blobs straight out of a repository's pack
//! files, as a stream. libgit2 cannot stream from packs, and reading a
//! 1 GiB blob whole (or through an mmap of the pack, as git itself does)
//! costs 1 GiB of memory; large files added with `git add` are stored
//! exactly this way (undeltified, in a pack). For small blobs the gain is
//! CPU: libgit2 checks every object it reads with its collision-detecting
//! SHA-1, three to five times slower than SHA-1 on the CPU's SHA
//! extensions, with which the caller re-hashes what is read here as a git
//! object anyway; so a wrong offset or a corrupt pack can never ship wrong
//! bytes (the content would not hash back to its id).
//!
//! What is not a whole blob in a version-2 `.idx` of `objects/pack`
//! (loose, deltified, in an alternate, behind a multi-pack index only, or a
//! SHA-256 repository) is `None`: the caller reads it through libgit2.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;

use git2::Oid;

/// Git's pack object type for blobs.
const OBJ_BLOB: u8 = 3;

/// An index larger than this is not held in memory (its objects are read
/// through libgit2).
const MAX_INDEX: u64 = 64 << 20;

/// The packs of one repository, their indexes in memory.
pub struct Packs {
    packs: Vec<Pack>,
}

struct Pack {
    /// The whole `.idx` file (version 2).
    idx: Vec<u8>,
    /// Objects in it.
    total: usize,
    pack: File,
}

impl Packs {
    /// The packs of the repository at `git_dir` (none when there are none
    /// or they cannot be read: every object then goes through libgit2).
    pub fn open(git_dir: &Path) -> Packs {
        let mut packs = Vec::new();
        if let Ok(dir) = std::fs::read_dir(git_dir.join("objects/pack")) {
            for e in dir.flatten() {
                let idx = e.path();
                if idx.extension().is_some_and(|x| x == "idx") {
                    if let Some(p) = Pack::open(&idx) {
                        packs.push(p);
                    }
                }
            }
        }
        Packs { packs }
    }

    /// A reader over the inflated content of `oid` and its size, if the
    /// object is a blob stored whole in one of the packs.
    pub fn blob(&self, oid: Oid) -> io::Result<Option<(Box<dyn Read + Send + '_>, u64)>> {
        let id = oid.as_bytes();
        if id.len() != 20 {
            return Ok(None);
        }
        for p in &self.packs {
            if let Some(offset) = p.offset(id) {
                return p.blob_at(offset);
            }
        }
        Ok(None)
    }
}

impl Pack {
    fn open(idx_path: &Path) -> Option<Pack> {
        let meta = std::fs::metadata(idx_path).ok()?;
        if meta.len() > MAX_INDEX {
            return None;
        }
        let idx = std::fs::read(idx_path).ok()?;
        if idx.len() < 8 + 1024 || idx[..8] != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
            return None;
        }
        let total = u32_at(&idx, 8 + 4 * 255)? as usize;
        // names, crc32s, small offsets (then large offsets, trailer)
        if idx.len() < 8 + 1024 + total * 28 {
            return None;
        }
        let pack = File::open(idx_path.with_extension("pack")).ok()?;
        Some(Pack { idx, total, pack })
    }

    /// The pack offset of `id`, by the index's fan-out and sorted names.
    fn offset(&self, id: &[u8]) -> Option<u64> {
        let fan = |i: usize| u32_at(&self.idx, 8 + 4 * i).map(|n| n as usize);
        let first = id[0] as usize;
        let mut lo = if first == 0 { 0 } else { fan(first - 1)? };
        let mut hi = fan(first)?.min(self.total);
        let names = 8 + 1024;
        while lo < hi {
            let mid = (lo + hi) / 2;
            let name = self.idx.get(names + mid * 20..names + mid * 20 + 20)?;
            match name.cmp(id) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => {
                    let offsets = names + self.total * 24;
                    let small = u32_at(&self.idx, offsets + mid * 4)?;
                    if small & 0x8000_0000 == 0 {
                        return Some(small as u64);
                    }
                    let large = offsets + self.total * 4 + (small & 0x7fff_ffff) as usize * 8;
                    let b = self.idx.get(large..large + 8)?;
                    return Some(u64::from_be_bytes(b.try_into().ok()?));
                }
            }
        }
        None
    }

    /// The inflated object at `offset`, if it is a whole blob.
    fn blob_at(&self, offset: u64) -> io::Result<Option<(Box<dyn Read + Send + '_>, u64)>> {
        // The object header: type and size, 7 bits a byte.
        let mut head = [0u8; 16];
        let n = self.pack.read_at(&mut head, offset)?;
        let mut i = 0;
        let byte = |i: usize| {
            head[..n]
                .get(i)
                .copied()
                .ok_or_else(|| io::Error::other("pack object header cut short"))
        };
        let mut b = byte(i)?;
        let kind = (b >> 4) & 7;
        let mut size = (b & 15) as u64;
        let mut shift = 4;
        while b & 0x80 != 0 {
            i += 1;
            b = byte(i)?;
            if shift > 57 {
                return Err(io::Error::other("pack object header too long"));
            }
            size |= ((b & 0x7f) as u64) << shift;
            shift += 7;
        }
        if kind != OBJ_BLOB {
            return Ok(None);
        }
        // Reads sized to the object: a small blob costs a few KiB of reads,
        // a large one streams in 256 KiB pieces.
        let capacity = (size as usize + 64).clamp(4 << 10, 256 << 10);
        let at = PackAt {
            pack: &self.pack,
            pos: offset + i as u64 + 1,
        };
        let z = flate2::bufread::ZlibDecoder::new(BufReader::with_capacity(capacity, at));
        Ok(Some((Box::new(z.take(size)), size)))
    }
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// Positioned reads of a shared pack file.
struct PackAt<'a> {
    pack: &'a File,
    pos: u64,
}

impl Read for PackAt<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.pack.read_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed_repo(files: &[(&str, Vec<u8>)]) -> (tempfile::TempDir, Vec<Oid>) {
        let dir = tempfile::tempdir().unwrap();
        let git = |args: &[&str]| {
            let ok = std::process::Command::new("git")
                .args(args)
                .current_dir(dir.path())
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .output()
                .unwrap();
            assert!(ok.status.success(), "{ok:?}");
        };
        git(&["init", "-q"]);
        for (name, data) in files {
            std::fs::write(dir.path().join(name), data).unwrap();
        }
        git(&["add", "-A"]);
        git(&["commit", "-qm", "x"]);
        git(&["gc", "-q"]);
        let repo = git2::Repository::open(dir.path()).unwrap();
        let ids = files
            .iter()
            .map(|(name, _)| {
                repo.head()
                    .unwrap()
                    .peel_to_tree()
                    .unwrap()
                    .get_name(name)
                    .unwrap()
                    .id()
            })
            .collect();
        (dir, ids)
    }

    /// Whole blobs of every size read back exactly; what is not a blob in
    /// a pack is left to libgit2.
    #[test]
    fn whole_packed_blobs_read_back_exactly() {
        let files = vec![
            ("empty", vec![]),
            ("small", b"hello\n".to_vec()),
            ("text", b"0123456789abcdef".repeat(5000)),
            (
                "random",
                (0..300_000u32)
                    .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
                    .collect(),
            ),
        ];
        let (dir, ids) = packed_repo(&files);
        let packs = Packs::open(&dir.path().join(".git"));
        for ((name, data), id) in files.iter().zip(&ids) {
            let (mut r, size) = packs.blob(*id).unwrap().expect(name);
            let mut got = Vec::new();
            r.read_to_end(&mut got).unwrap();
            assert_eq!(size, data.len() as u64, "{name}");
            assert_eq!(&got, data, "{name}");
        }
        let repo = git2::Repository::open(dir.path()).unwrap();
        let tree = repo.head().unwrap().peel_to_tree().unwrap().id();
        assert!(packs.blob(tree).unwrap().is_none(), "a tree is not a blob");
        assert!(packs
            .blob(Oid::from_bytes(&[0u8; 20]).unwrap())
            .unwrap()
            .is_none());
    }
}
