//! The native verifier's read-back ([`super::native_check`]), while the
//! archive is extracted: a thread of its own reads back every regular file
//! the extraction finished (from the filesystem, through the descriptor it
//! was created with), hashes it, and computes the archive digest
//! (`tar-entries-sha256`, [`super::archive_digest`]) from the stream's own
//! bytes with those hashes as the content digests. So each byte of content
//! is hashed once in the sandbox, and what the archive digest vouches for
//! is what the filesystem holds.
//!
//! A file of [`FOLLOW`] bytes or more is read back by a [`Follower`] while
//! it is being written, so reading it back overlaps writing it.
//!
//! The extraction hands the thread, in the order it reads them, the
//! stream's chunks and each file once written (content, mode, time:
//! [`Extracted`]). The digest takes the content digests in stream order;
//! if the stream's regular files and the files the extraction reports
//! do not pair up one for one, the verification fails
//! ([`ReadBackError::Unmatched`]) instead of producing a digest.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Seek};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::{mpsc, Arc};

use sha2::{Digest, Sha256};

use super::archive_digest::EntriesDigest;

/// Bytes per read when hashing a file.
pub const READ: usize = 256 * 1024;

/// Files at least this large are read back while they are written.
pub const FOLLOW: u64 = 16 << 20;

/// Messages in flight from the extraction to the read-back thread (each
/// at most one chunk of the stream, so this bounds the memory they hold).
pub const IN_FLIGHT: usize = 16;

/// Chunks the thread may hold while it waits for the file that ends
/// in them; more means the stream and the extraction disagree.
const HELD: usize = 2 * IN_FLIGHT;

/// What could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum ReadBackError {
    #[error("reading back {path}: {source}")]
    Io { path: String, source: io::Error },
    #[error("a file hashing thread failed")]
    Thread,
    #[error("the archive's regular files and the files extracted from it do not pair up")]
    Unmatched,
}

pub fn io_err(path: &Path) -> impl FnOnce(io::Error) -> ReadBackError + '_ {
    move |source| ReadBackError::Io {
        path: path.to_string_lossy().into_owned(),
        source,
    }
}

fn named_err(name: &[u8]) -> impl FnOnce(io::Error) -> ReadBackError + '_ {
    move |source| ReadBackError::Io {
        path: String::from_utf8_lossy(name).into_owned(),
        source,
    }
}

/// A file's content hash as read back, with the identity and state of the
/// file it was read from: the walk takes the hash only for a file that is
/// still that one, unchanged since (same device, inode, size, mode, change
/// time).
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
    pub fn of(m: &std::fs::Metadata) -> FileState {
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

/// What the extraction hands the read-back thread, in the order it
/// happens.
pub enum Extracted {
    /// The next chunk of the (uncompressed) stream, as read.
    Chunk(Arc<Vec<u8>>),
    /// A regular file, completely written (content, mode, time), with
    /// the descriptor it was created with (opened for reading too).
    File { name: Vec<u8>, file: std::fs::File },
    /// A regular file a [`Follower`] read back while it was written.
    Followed { name: Vec<u8>, read_back: ReadBack },
}

/// The sending side, shared by the stream's reader and the extraction.
pub type Sender = mpsc::SyncSender<Extracted>;

/// What the thread returns: the archive digest and the read-back of every
/// regular file (keyed by `./`-prefixed name, as the walk names them).
pub type Outcome = (String, HashMap<Vec<u8>, ReadBack>);

/// Start the read-back thread.
pub fn start() -> io::Result<(
    Sender,
    std::thread::JoinHandle<Result<Outcome, ReadBackError>>,
)> {
    let (tx, rx) = mpsc::sync_channel(IN_FLIGHT);
    let thread = std::thread::Builder::new()
        .name("rfs-verify-read-back".into())
        .spawn(move || read_back_all(rx))?;
    Ok((tx, thread))
}

fn read_back_all(rx: mpsc::Receiver<Extracted>) -> Result<Outcome, ReadBackError> {
    let mut digest = EntriesDigest::every_content_supplied();
    let mut held: VecDeque<(Arc<Vec<u8>>, usize)> = VecDeque::new();
    let mut due: VecDeque<[u8; 32]> = VecDeque::new();
    let mut files = HashMap::new();
    let mut buf = vec![0u8; READ];
    for m in rx {
        match m {
            Extracted::Chunk(c) => held.push_back((c, 0)),
            Extracted::File { name, file } => {
                let rb = read_back(file, &name, &mut buf)?;
                due.push_back(rb.sha256);
                files.insert(name, rb);
            }
            Extracted::Followed { name, read_back } => {
                due.push_back(read_back.sha256);
                files.insert(name, read_back);
            }
        }
        pump(&mut digest, &mut held, &mut due);
        if held.len() > HELD {
            return Err(ReadBackError::Unmatched);
        }
    }
    if !held.is_empty() || !due.is_empty() || digest.awaits_digest() {
        return Err(ReadBackError::Unmatched);
    }
    Ok((digest.finalize(), files))
}

/// Feed the digest the chunks it can take, supplying content digests as
/// they come due.
fn pump(
    digest: &mut EntriesDigest,
    held: &mut VecDeque<(Arc<Vec<u8>>, usize)>,
    due: &mut VecDeque<[u8; 32]>,
) {
    loop {
        if digest.awaits_digest() {
            let Some(d) = due.pop_front() else { return };
            digest
                .content_digest(&d)
                .expect("a digest is supplied only when it is due");
            continue;
        }
        let Some((chunk, at)) = held.front_mut() else {
            return;
        };
        *at += digest.feed(&chunk[*at..]);
        if *at == chunk.len() {
            held.pop_front();
        }
    }
}

/// Hash a written file's content as the filesystem returns it, from its
/// start, through its own descriptor.
fn read_back(mut f: std::fs::File, name: &[u8], buf: &mut [u8]) -> Result<ReadBack, ReadBackError> {
    f.rewind().map_err(named_err(name))?;
    let sha256 = sha256_to_end(&mut f, buf).map_err(named_err(name))?;
    let stat = FileState::of(&f.metadata().map_err(named_err(name))?);
    Ok(ReadBack { stat, sha256 })
}

/// The SHA-256 of what `f` reads from its position to its end.
pub fn sha256_to_end(f: &mut std::fs::File, buf: &mut [u8]) -> io::Result<[u8; 32]> {
    let mut h = Sha256::new();
    loop {
        match f.read(buf) {
            Ok(0) => return Ok(h.finalize().into()),
            Ok(n) => h.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
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
    progress: Arc<Progress>,
    thread: Option<std::thread::JoinHandle<Result<ReadBack, ReadBackError>>>,
}

impl Follower {
    /// Follow the file at `path` (just created; never through a symlink).
    pub fn start(path: &Path) -> Result<Follower, ReadBackError> {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
            .open(path)
            .map_err(io_err(path))?;
        let progress = Arc::new(Progress::default());
        let p = progress.clone();
        let path = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name("rfs-verify-follow".into())
            .spawn(move || follow(f, &path, &p))
            .map_err(|_| ReadBackError::Thread)?;
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
    pub fn finish(mut self) -> Result<ReadBack, ReadBackError> {
        self.progress.set(|s| s.1 = true);
        let t = self.thread.take().expect("joined once");
        t.join().map_err(|_| ReadBackError::Thread)?
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        // Abandoned (the extraction failed): let the thread end.
        self.progress.set(|s| s.1 = true);
    }
}

fn follow(mut f: std::fs::File, path: &Path, p: &Progress) -> Result<ReadBack, ReadBackError> {
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
    }

    fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut b = tar::Builder::new(Vec::new());
        for (name, data) in files {
            let mut h = tar::Header::new_gnu();
            h.set_size(data.len() as u64);
            h.set_mode(0o644);
            b.append_data(&mut h, name, *data).unwrap();
        }
        b.into_inner().unwrap()
    }

    /// Feed `stream` in `step`-byte chunks, reporting after each chunk the
    /// files whose content ended in it (as the extraction does).
    fn digest_as_extracted(
        stream: &[u8],
        files: &[(&str, &[u8])],
        step: usize,
        dir: &Path,
    ) -> Result<Outcome, ReadBackError> {
        let (tx, thread) = start().unwrap();
        let mut ends = Vec::new();
        let mut at = 0u64;
        for (name, data) in files {
            let content_end = at + 512 + data.len() as u64;
            ends.push((name, *data, content_end));
            at = content_end.div_ceil(512) * 512;
        }
        let mut sent = 0;
        let mut next = 0;
        for c in stream.chunks(step) {
            sent += c.len() as u64;
            if tx.send(Extracted::Chunk(Arc::new(c.to_vec()))).is_err() {
                break;
            }
            while next < ends.len() && ends[next].2 <= sent {
                let (name, data, _) = ends[next];
                let path = dir.join(name);
                let mut f = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .open(&path)
                    .unwrap();
                f.write_all(data).unwrap();
                let mut key = b"./".to_vec();
                key.extend_from_slice(name.as_bytes());
                let _ = tx.send(Extracted::File { name: key, file: f });
                next += 1;
            }
        }
        drop(tx);
        thread.join().unwrap()
    }

    /// The digest from the files as read back equals the one over the
    /// stream itself, whatever the chunking; each file's hash is kept.
    #[test]
    fn the_archive_digest_from_read_backs_equals_the_streams() {
        let files: &[(&str, &[u8])] = &[
            ("a", b"abc"),
            ("b", &[5u8; 512]),
            ("c", b""),
            ("d", &[7u8; 3000]),
        ];
        let stream = tar_of(files);
        let want = super::super::archive_digest::of(&stream);
        for step in [1, 100, 512, 4096, 1 << 20] {
            let dir = tempfile::tempdir().unwrap();
            let (got, read) = digest_as_extracted(&stream, files, step, dir.path()).unwrap();
            assert_eq!(got, want, "chunks of {step}");
            assert_eq!(
                read[&b"./d".to_vec()].sha256[..],
                Sha256::digest([7u8; 3000])[..]
            );
        }
    }

    /// A byte of the stream that differs from what was written to the file
    /// (the disk holds other bytes than the stream had) changes the digest.
    #[test]
    fn a_file_that_differs_from_the_stream_changes_the_digest() {
        let files: &[(&str, &[u8])] = &[("a", b"abc"), ("d", &[7u8; 3000])];
        let stream = tar_of(files);
        let want = super::super::archive_digest::of(&stream);
        let written: &[(&str, &[u8])] = &[("a", b"abd"), ("d", &[7u8; 3000])];
        let dir = tempfile::tempdir().unwrap();
        let (got, _) = digest_as_extracted(&stream, written, 512, dir.path()).unwrap();
        assert_ne!(got, want);
    }

    /// A file the stream has but the extraction never reports fails the
    /// read-back instead of giving a digest.
    #[test]
    fn a_regular_file_never_reported_is_refused() {
        let files: &[(&str, &[u8])] = &[("a", b"abc"), ("d", &[7u8; 3000])];
        let stream = tar_of(files);
        let dir = tempfile::tempdir().unwrap();
        let r = digest_as_extracted(&stream, &files[..1], 512, dir.path());
        assert!(matches!(r, Err(ReadBackError::Unmatched)), "{r:?}");
    }
}
