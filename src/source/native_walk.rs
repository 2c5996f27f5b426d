//! The native verifier's read-back ([`super::native_check`]): walk the
//! extracted tree on disk, hash every regular file's content as read from
//! the filesystem (one thread per core, each taking the next file), and
//! write the report [`super::remote_check::parse_report`] reads, in the
//! format of [`super::remote_check::SCRIPT`]: `ROOT`, `ARCHIVE`, `DIRS`,
//! `LINKS` (name, target + newline, as `readlink` prints it), `EXEC`,
//! `FILES` as `BATCH` names `SUMS` `sha256sum` lines (one batch per
//! thread, pairing its own names and sums), `END`.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Read};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
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
pub fn walk(root: &Path, read_back: &HashMap<Vec<u8>, ReadBack>) -> Result<Tree, WalkError> {
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
) -> Result<Vec<Vec<Hashed>>, WalkError> {
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
            .map(|w| w.join().map_err(|_| WalkError::Thread)?)
            .collect()
    })
}

/// A regular file's exec bit (owner) and content sha256, read from disk
/// (never through a symlink).
fn hash_file(
    path: &Path,
    known: Option<&ReadBack>,
    buf: &mut [u8],
) -> Result<(bool, [u8; 32]), WalkError> {
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(io_err(path))?;
    let meta = f.metadata().map_err(io_err(path))?;
    let exec = meta.permissions().mode() & 0o100 != 0;
    if let Some(k) = known.filter(|k| k.stat == FileState::of(&meta)) {
        return Ok((exec, k.sha256));
    }
    let mut h = Sha256::new();
    loop {
        match f.read(buf) {
            Ok(0) => break,
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path)(e)),
        }
    }
    Ok((exec, h.finalize().into()))
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

/// A file's content hash read back while the file was being written
/// ([`Follower`]), with the identity and state of the file it was read
/// from: the walk takes the hash only for a file that is still that one,
/// unchanged since (same device, inode, size, mode, change time).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadBack {
    pub stat: FileState,
    pub sha256: [u8; 32],
}

/// What identifies a file and changes with any change to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileState {
    dev: u64,
    ino: u64,
    size: u64,
    mode: u32,
    ctime: (i64, i64),
}

impl FileState {
    fn of(m: &std::fs::Metadata) -> FileState {
        use std::os::unix::fs::MetadataExt;
        FileState {
            dev: m.dev(),
            ino: m.ino(),
            size: m.size(),
            mode: m.mode(),
            ctime: (m.ctime(), m.ctime_nsec()),
        }
    }
}

/// How far the writer got, and whether it is done.
#[derive(Default)]
struct Progress {
    state: std::sync::Mutex<(u64, bool)>,
    moved: std::sync::Condvar,
}

impl Progress {
    fn set(&self, f: impl FnOnce(&mut (u64, bool))) {
        f(&mut self.state.lock().unwrap_or_else(|p| p.into_inner()));
        self.moved.notify_one();
    }
}

/// Reads a file back from the filesystem, on a thread of its own, while
/// the extraction is still writing it: each byte is read (through its own
/// descriptor) only once the writer has written it, and the file is read to
/// its end once the writer is done. The hash is of what the filesystem
/// returned, exactly as a later read-back would see it.
pub struct Follower {
    progress: std::sync::Arc<Progress>,
    thread: Option<std::thread::JoinHandle<Result<ReadBack, WalkError>>>,
}

impl Follower {
    /// Follow the file at `path` (just created; never through a symlink).
    pub fn start(path: &Path) -> Result<Follower, WalkError> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io_err(path))?;
        let progress = std::sync::Arc::new(Progress::default());
        let p = progress.clone();
        let path = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("rfs-verify-follow".into())
            .spawn(move || follow(f, &path, &p))
            .map_err(|_| WalkError::Thread)?;
        Ok(Follower {
            progress,
            thread: Some(thread),
        })
    }

    /// The writer has written `n` bytes in all.
    pub fn written(&self, n: u64) {
        self.progress.set(|s| s.0 = n);
    }

    /// The writer is done with the file (content, mode, times): read the
    /// rest and return the hash.
    pub fn finish(mut self) -> Result<ReadBack, WalkError> {
        self.progress.set(|s| s.1 = true);
        let t = self.thread.take().expect("joined once");
        t.join().map_err(|_| WalkError::Thread)?
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        // Abandoned (the extraction failed): let the thread end.
        self.progress.set(|s| s.1 = true);
    }
}

fn follow(mut f: std::fs::File, path: &Path, p: &Progress) -> Result<ReadBack, WalkError> {
    let mut buf = vec![0u8; READ];
    let mut h = Sha256::new();
    let mut pos = 0u64;
    loop {
        let (avail, done) = {
            let mut s = p.state.lock().unwrap_or_else(|p| p.into_inner());
            while s.0 <= pos && !s.1 {
                s = p.moved.wait(s).unwrap_or_else(|p| p.into_inner());
            }
            *s
        };
        // Once the writer is done, read to the end of the file.
        let want = if done {
            buf.len()
        } else {
            (avail - pos).min(buf.len() as u64) as usize
        };
        match f.read(&mut buf[..want]) {
            Ok(0) if done => break,
            Ok(0) => {
                return Err(io_err(path)(io::Error::other(
                    "the file is shorter than what was written to it",
                )))
            }
            Ok(n) => {
                h.update(&buf[..n]);
                pos += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(io_err(path)(e)),
        }
    }
    let stat = FileState::of(&f.metadata().map_err(io_err(path))?);
    Ok(ReadBack {
        stat,
        sha256: h.finalize().into(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

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

    #[test]
    fn a_follower_hashes_what_was_written_in_pieces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let mut f = std::fs::File::create_new(&path).unwrap();
        let follower = Follower::start(&path).unwrap();
        let mut all = Vec::new();
        for i in 0..40u8 {
            let piece = vec![i; 100_003];
            f.write_all(&piece).unwrap();
            all.extend_from_slice(&piece);
            follower.written(all.len() as u64);
        }
        let rb = follower.finish().unwrap();
        assert_eq!(rb.sha256[..], Sha256::digest(&all)[..]);
        let mut buf = vec![0u8; READ];
        let (_, sha) = hash_file(&path, Some(&rb), &mut buf).unwrap();
        assert_eq!(sha, rb.sha256);
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
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(&path, b"other").unwrap();
        let mut buf = vec![0u8; READ];
        let (_, sha) = hash_file(&path, Some(&rb), &mut buf).unwrap();
        assert_eq!(sha[..], Sha256::digest(b"other")[..]);
    }
}
