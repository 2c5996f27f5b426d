//! The native verifier's walk ([`super::native_check`]): walk the
//! extracted tree on disk, take every regular file's content hash from its
//! read-back ([`super::native_read_back`]) when it is still that file,
//! unchanged, else hash it as read from the filesystem now (one thread per
//! core, each taking the next file), and
//! write the report [`super::remote_check::parse_report`] reads, in the
//! format of [`super::remote_check::SCRIPT`]: `ROOT`, `ARCHIVE`, `DIRS`,
//! `LINKS` (name, target + newline, as `readlink` prints it), `EXEC`,
//! `FILES` as `BATCH` names `SUMS` `sha256sum` lines (one batch per
//! thread, pairing its own names and sums), `END`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

use super::native_read_back::{io_err, sha256_to_end, FileState, ReadBack, ReadBackError, READ};

/// The tree as read back. Names are `./`-prefixed, as `find .` prints them.
#[derive(Debug, Default)]
pub struct Tree {
    pub dirs: Vec<Vec<u8>>,
    pub links: Vec<(Vec<u8>, Vec<u8>)>,
    /// The regular files' names.
    pub files: Vec<Vec<u8>>,
    /// One batch per hashing thread, in the order it took its files.
    pub batches: Vec<Vec<Hashed>>,
}

/// A regular file as read back.
#[derive(Debug)]
pub struct Hashed {
    /// Its index in [`Tree::files`].
    pub file: usize,
    /// The owner's exec bit.
    pub exec: bool,
    /// The sha256 of its content.
    pub sha256: [u8; 32],
}

/// Walk `root` (physical) and hash its files; a file in `read_back` that
/// is still the file that was read back, unchanged, is not read again.
pub fn walk(root: &Path, read_back: &HashMap<Vec<u8>, ReadBack>) -> Result<Tree, ReadBackError> {
    let mut tree = Tree::default();
    tree.dirs.push(b".".to_vec());
    let mut stack = vec![(root.to_path_buf(), b".".to_vec())];
    while let Some((dir, name)) = stack.pop() {
        for e in std::fs::read_dir(&dir).map_err(io_err(&dir))? {
            let e = e.map_err(io_err(&dir))?;
            let mut child = name.clone();
            child.push(b'/');
            child.extend_from_slice(e.file_name().as_bytes());
            let path = e.path();
            let t = e.file_type().map_err(io_err(&path))?;
            if t.is_dir() {
                tree.dirs.push(child.clone());
                stack.push((path, child));
            } else if t.is_symlink() {
                let target = std::fs::read_link(&path).map_err(io_err(&path))?;
                tree.links.push((child, target.into_os_string().into_vec()));
            } else if t.is_file() {
                tree.files.push(child);
            }
        }
    }
    tree.batches = hash_all(root, &tree.files, read_back)?;
    Ok(tree)
}

/// Hash `files` on one thread per core; each returns the files it took.
fn hash_all(
    root: &Path,
    files: &[Vec<u8>],
    read_back: &HashMap<Vec<u8>, ReadBack>,
) -> Result<Vec<Vec<Hashed>>, ReadBackError> {
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .min(files.len().max(1));
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    let mut buf = vec![0u8; READ];
                    let mut batch = Vec::new();
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some(name) = files.get(i) else {
                            return Ok(batch);
                        };
                        let path = root.join(OsStr::from_bytes(&name[2..]));
                        let (exec, sha256) = hash_file(&path, read_back.get(name), &mut buf)?;
                        batch.push(Hashed {
                            file: i,
                            exec,
                            sha256,
                        });
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().map_err(|_| ReadBackError::Thread)?)
            .collect()
    })
}

/// A regular file's exec bit (owner) and content sha256: the read-back's
/// when the file is still the one read back, unchanged (its `lstat` says
/// so, and no descriptor is opened), else read from disk now (never
/// through a symlink).
fn hash_file(
    path: &Path,
    known: Option<&ReadBack>,
    buf: &mut [u8],
) -> Result<(bool, [u8; 32]), ReadBackError> {
    if let Some(k) = known {
        let meta = std::fs::symlink_metadata(path).map_err(io_err(path))?;
        if k.stat == FileState::of(&meta) {
            return Ok((meta.permissions().mode() & 0o100 != 0, k.sha256));
        }
    }
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(path))?;
    let meta = f.metadata().map_err(io_err(path))?;
    let exec = meta.permissions().mode() & 0o100 != 0;
    let sha256 = sha256_to_end(&mut f, buf).map_err(io_err(path))?;
    Ok((exec, sha256))
}

/// The report, byte for byte as the script writes it.
pub fn write_report(
    out: &mut dyn io::Write,
    root: &Path,
    archive_sha256: &str,
    tree: &Tree,
) -> io::Result<()> {
    let field = |out: &mut dyn io::Write, b: &[u8]| {
        out.write_all(b)?;
        out.write_all(b"\0")
    };
    field(out, b"ROOT")?;
    field(out, root.as_os_str().as_bytes())?;
    field(out, b"ARCHIVE")?;
    field(out, archive_sha256.as_bytes())?;
    field(out, b"DIRS")?;
    for d in &tree.dirs {
        field(out, d)?;
    }
    field(out, b"LINKS")?;
    for (name, target) in &tree.links {
        field(out, name)?;
        out.write_all(target)?;
        field(out, b"\n")?;
    }
    field(out, b"EXEC")?;
    for f in tree.batches.iter().flatten().filter(|f| f.exec) {
        field(out, &tree.files[f.file])?;
    }
    field(out, b"FILES")?;
    let mut line = Vec::new();
    for batch in tree.batches.iter().filter(|b| !b.is_empty()) {
        field(out, b"BATCH")?;
        for f in batch {
            field(out, &tree.files[f.file])?;
        }
        out.write_all(b"SUMS")?;
        for f in batch {
            line.clear();
            sum_line(&mut line, &tree.files[f.file], &hex::encode(f.sha256));
            out.write_all(&line)?;
        }
        out.write_all(b"\0")?;
    }
    field(out, b"END")
}

/// One `sha256sum` line (GNU coreutils' escaping: a leading backslash when
/// the name holds a backslash, newline or carriage return).
fn sum_line(out: &mut Vec<u8>, name: &[u8], sha: &str) {
    let escaped = name.iter().any(|b| matches!(b, b'\\' | b'\n' | b'\r'));
    if escaped {
        out.push(b'\\');
    }
    out.extend_from_slice(sha.as_bytes());
    out.extend_from_slice(b"  ");
    if escaped {
        for &b in name {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                b => out.push(b),
            }
        }
    } else {
        out.extend_from_slice(name);
    }
    out.push(b'\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::native_read_back::Follower;
    use sha2::{Digest, Sha256};

    #[test]
    fn sum_lines_parse_back_for_odd_names() {
        let sha = "ab".repeat(32);
        for name in [
            &b"./plain"[..],
            b"./new\nline",
            b"./back\\slash",
            b"./c\rr",
            b"./\xff",
        ] {
            let mut line = Vec::new();
            sum_line(&mut line, name, &sha);
            let (got, rest) = crate::source::remote_check::parse_sum_line(&line, name).unwrap();
            assert_eq!(got, sha);
            assert!(rest.is_empty());
        }
    }

    /// A read-back is used only for the unchanged file it was read from.
    #[test]
    fn a_file_changed_after_its_read_back_is_read_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"first").unwrap();
        let follower = Follower::start(&path).unwrap();
        follower.written(5);
        let rb = follower.finish().unwrap();
        let mut buf = vec![0u8; READ];
        let (_, sha) = hash_file(&path, Some(&rb), &mut buf).unwrap();
        assert_eq!(sha, rb.sha256, "an unchanged file keeps its read-back");
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"other").unwrap();
        let (_, sha) = hash_file(&path, Some(&rb), &mut buf).unwrap();
        assert_eq!(sha[..], Sha256::digest(b"other")[..]);
    }

    /// A read-back does not vouch for a symlink put in the file's place.
    #[test]
    fn a_file_replaced_by_a_symlink_after_its_read_back_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"first").unwrap();
        let follower = Follower::start(&path).unwrap();
        follower.written(5);
        let rb = follower.finish().unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(dir.path().join("g"), b"first").unwrap();
        std::os::unix::fs::symlink("g", &path).unwrap();
        let mut buf = vec![0u8; READ];
        assert!(hash_file(&path, Some(&rb), &mut buf).is_err());
    }
}
