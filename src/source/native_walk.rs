//! The native verifier's read-back ([`super::native_check`]): walk the
//! extracted tree on disk, hash every regular file's content as read from
//! the filesystem (one thread per core, each taking the next file), and
//! write the report [`super::remote_check::parse_report`] reads, in the
//! format of [`super::remote_check::SCRIPT`]: `ROOT`, `ARCHIVE`, `DIRS`,
//! `LINKS` (name, target + newline, as `readlink` prints it), `EXEC`,
//! `FILES` as `BATCH` names `SUMS` `sha256sum` lines (one batch per
//! thread, pairing its own names and sums), `END`.

use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use sha2::{Digest, Sha256};

/// Bytes per read when hashing a file.
const READ: usize = 256 * 1024;

/// What could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum WalkError {
    #[error("reading back {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("a file hashing thread failed")]
    Thread,
}

fn io_err(path: &Path) -> impl FnOnce(io::Error) -> WalkError + '_ {
    move |source| WalkError::Io {
        path: path.to_string_lossy().into_owned(),
        source,
    }
}

/// The tree as read back. Names are `./`-prefixed, as `find .` prints them.
#[derive(Debug, Default)]
pub struct Tree {
    pub dirs: Vec<Vec<u8>>,
    pub links: Vec<(Vec<u8>, Vec<u8>)>,
    /// One batch per hashing thread: (name, exec, hex sha256).
    pub batches: Vec<Vec<(Vec<u8>, bool, String)>>,
}

/// Walk `root` (physical) and hash its files.
pub fn walk(root: &Path) -> Result<Tree, WalkError> {
    let mut tree = Tree::default();
    let mut files = Vec::new();
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
                files.push((child, path));
            }
        }
    }
    tree.batches = hash_all(&files)?;
    Ok(tree)
}

/// Hash `files` on one thread per core; each returns the files it took.
fn hash_all(files: &[(Vec<u8>, PathBuf)]) -> Result<Vec<Vec<(Vec<u8>, bool, String)>>, WalkError> {
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
                        let Some((name, path)) = files.get(i) else {
                            return Ok(batch);
                        };
                        let (exec, sha) = hash_file(path, &mut buf)?;
                        batch.push((name.clone(), exec, sha));
                    }
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().map_err(|_| WalkError::Thread)?)
            .collect()
    })
}

/// A regular file's exec bit (owner) and content sha256, read from disk
/// (never through a symlink).
fn hash_file(path: &Path, buf: &mut [u8]) -> Result<(bool, String), WalkError> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(path))?;
    let meta = f.metadata().map_err(io_err(path))?;
    let mut h = Sha256::new();
    loop {
        match f.read(buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path)(e)),
        }
    }
    Ok((
        meta.permissions().mode() & 0o100 != 0,
        hex::encode(h.finalize()),
    ))
}

/// The report, byte for byte as the script writes it.
pub fn write_report(out: &mut Vec<u8>, root: &Path, archive_sha256: &str, tree: &Tree) {
    let field = |out: &mut Vec<u8>, b: &[u8]| {
        out.extend_from_slice(b);
        out.push(0);
    };
    field(out, b"ROOT");
    field(out, root.as_os_str().as_bytes());
    field(out, b"ARCHIVE");
    field(out, archive_sha256.as_bytes());
    field(out, b"DIRS");
    for d in &tree.dirs {
        field(out, d);
    }
    field(out, b"LINKS");
    for (name, target) in &tree.links {
        field(out, name);
        out.extend_from_slice(target);
        field(out, b"\n");
    }
    field(out, b"EXEC");
    for (name, _, _) in tree.batches.iter().flatten().filter(|f| f.1) {
        field(out, name);
    }
    field(out, b"FILES");
    for batch in tree.batches.iter().filter(|b| !b.is_empty()) {
        field(out, b"BATCH");
        for (name, _, _) in batch {
            field(out, name);
        }
        out.extend_from_slice(b"SUMS");
        for (name, _, sha) in batch {
            sum_line(out, name, sha);
        }
        out.push(0);
    }
    field(out, b"END");
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
