//! Streaming a whole (non-delta) object out of a pack file with plain
//! reads. libgit2 cannot stream from packs, and reading a 1 GiB blob whole
//! (or through an mmap of the pack, as git itself does) costs 1 GiB of
//! memory; large files added with `git add` are stored exactly this way
//! (undeltified, in a pack). The caller re-hashes the content as a git
//! object, so a wrong offset or a corrupt pack cannot ship wrong bytes.

use std::fs::File;
use std::io::{self, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use git2::Oid;

/// Git's pack object type for blobs.
const OBJ_BLOB: u8 = 3;

/// A reader over the inflated content of `oid` and its size, if the object
/// is stored whole in one of `git_dir`'s packs. `Ok(None)` when it is not
/// (loose, deltified, in an alternate, or a SHA-256 repository).
pub fn open(git_dir: &Path, oid: Oid) -> io::Result<Option<(Box<dyn Read + Send>, u64)>> {
    let id = oid.as_bytes();
    if id.len() != 20 {
        return Ok(None);
    }
    let Ok(dir) = std::fs::read_dir(git_dir.join("objects/pack")) else {
        return Ok(None);
    };
    for e in dir.flatten() {
        let idx = e.path();
        if idx.extension().is_none_or(|x| x != "idx") {
            continue;
        }
        if let Some(offset) = find_offset(&idx, id)? {
            return object_at(&idx.with_extension("pack"), offset);
        }
    }
    Ok(None)
}

fn read_u32(f: &mut File, at: u64) -> io::Result<u32> {
    let mut b = [0u8; 4];
    f.seek(SeekFrom::Start(at))?;
    f.read_exact(&mut b)?;
    Ok(u32::from_be_bytes(b))
}

/// The pack offset of `id` per a version-2 `.idx` file.
fn find_offset(idx: &Path, id: &[u8]) -> io::Result<Option<u64>> {
    let mut f = File::open(idx)?;
    let mut head = [0u8; 8];
    f.read_exact(&mut head)?;
    if head != [0xff, b't', b'O', b'c', 0, 0, 0, 2] {
        return Ok(None);
    }
    let fan = |f: &mut File, i: usize| read_u32(f, 8 + 4 * i as u64);
    let total = fan(&mut f, 255)? as u64;
    let first = id[0] as usize;
    let (mut lo, mut hi) = (
        if first == 0 {
            0
        } else {
            fan(&mut f, first - 1)? as u64
        },
        fan(&mut f, first)? as u64,
    );
    let names = 8 + 1024;
    let mut name = [0u8; 20];
    while lo < hi {
        let mid = (lo + hi) / 2;
        f.seek(SeekFrom::Start(names + mid * 20))?;
        f.read_exact(&mut name)?;
        match name.as_slice().cmp(id) {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => {
                let offsets = names + total * 24;
                let small = read_u32(&mut f, offsets + mid * 4)?;
                if small & 0x8000_0000 == 0 {
                    return Ok(Some(small as u64));
                }
                let large = offsets + total * 4 + (small & 0x7fff_ffff) as u64 * 8;
                let mut b = [0u8; 8];
                f.seek(SeekFrom::Start(large))?;
                f.read_exact(&mut b)?;
                return Ok(Some(u64::from_be_bytes(b)));
            }
        }
    }
    Ok(None)
}

/// The inflated object at `offset` of `pack`, if it is a whole blob.
fn object_at(pack: &Path, offset: u64) -> io::Result<Option<(Box<dyn Read + Send>, u64)>> {
    let mut f = BufReader::with_capacity(256 * 1024, File::open(pack)?);
    f.seek(SeekFrom::Start(offset))?;
    let mut byte = [0u8; 1];
    f.read_exact(&mut byte)?;
    let kind = (byte[0] >> 4) & 7;
    let mut size = (byte[0] & 15) as u64;
    let mut shift = 4;
    while byte[0] & 0x80 != 0 {
        f.read_exact(&mut byte)?;
        size |= ((byte[0] & 0x7f) as u64) << shift;
        shift += 7;
        if shift > 63 {
            return Err(io::Error::other("pack object header too long"));
        }
    }
    if kind != OBJ_BLOB {
        return Ok(None);
    }
    let z = flate2::bufread::ZlibDecoder::new(f);
    Ok(Some((Box::new(z.take(size)), size)))
}
