//! The archive as a stream from the thread that builds it to the provider
//! that ships it: a bounded channel of chunks (at most
//! `CAPACITY x CHUNK` bytes in flight), hashed on the consuming side so the
//! archive digest costs the builder nothing; or, when the builder computes
//! the digest itself, an OS pipe ([`pipe`]) that a provider starting the
//! command on this machine hands to it as its standard input, so the
//! builder writes straight into the command (no thread copies the stream
//! in between).
//!
//! The channel ends cleanly only when the builder says it is complete; a
//! builder that fails or disappears (panic) makes the reader return an
//! error, never a silent end of file, so a truncated archive can never look
//! like a whole one. A pipe cannot tell, so it is used only where the
//! builder's own result decides (see [`pipe`]).

use std::io::{self, Write};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::sync::mpsc;

/// The builder's error when the reader went away: a consequence of the
/// consumer's failure, never its cause.
pub const READER_GONE: &str = "the receiving side stopped reading the archive";

/// The payload of the builder's [`io::Error`] when the reader went away,
/// so a caller tells it by type (see [`reader_gone`]).
#[derive(Debug)]
pub struct ReaderGone;

impl std::fmt::Display for ReaderGone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(READER_GONE)
    }
}

impl std::error::Error for ReaderGone {}

/// Whether `e` says the reader went away.
pub fn reader_gone(e: &io::Error) -> bool {
    e.get_ref().is_some_and(|r| r.is::<ReaderGone>())
}

/// Bytes per chunk handed over.
const CHUNK: usize = 1 << 20;
/// Chunks in flight.
const CAPACITY: usize = 4;

enum Msg {
    Data(Vec<u8>),
    Done,
}

/// A pair: the blocking writer for the builder thread, the async reader for
/// the provider, which hashes the stream when `hash` (else only counts it:
/// the builder computes the archive digest itself).
pub fn channel_with(hash: bool) -> (ChunkWriter, ArchiveReader) {
    let (tx, rx) = mpsc::channel(CAPACITY);
    let digest = Arc::new(Mutex::new(None));
    (
        ChunkWriter {
            tx,
            buf: Vec::with_capacity(CHUNK),
        },
        ArchiveReader {
            rx,
            cur: Vec::new(),
            pos: 0,
            hash: hash.then(Sha256::new),
            n: 0,
            done: false,
            digest: digest.clone(),
        },
    )
}

/// The builder's end (blocking; not for async contexts).
pub struct ChunkWriter {
    tx: mpsc::Sender<Msg>,
    buf: Vec<u8>,
}

impl ChunkWriter {
    fn send(&mut self, m: Msg) -> io::Result<()> {
        self.tx
            .blocking_send(m)
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, ReaderGone))
    }

    /// The archive is complete.
    pub fn finish(mut self) -> io::Result<()> {
        self.flush()?;
        self.send(Msg::Done)
    }
}

impl Write for ChunkWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        let k = b.len().min(CHUNK - self.buf.len());
        self.buf.extend_from_slice(&b[..k]);
        if self.buf.len() == CHUNK {
            self.flush()?;
        }
        Ok(k)
    }
    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK));
            self.send(Msg::Data(chunk))?;
        }
        Ok(())
    }
}

/// The builder's end of either kind of stream.
pub enum ArchiveWriter {
    Chunks(ChunkWriter),
    Pipe(PipeWriter),
}

impl ArchiveWriter {
    /// The archive is complete.
    pub fn finish(self) -> io::Result<()> {
        match self {
            ArchiveWriter::Chunks(w) => w.finish(),
            ArchiveWriter::Pipe(w) => w.finish(),
        }
    }
}

impl Write for ArchiveWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        match self {
            ArchiveWriter::Chunks(w) => w.write(b),
            ArchiveWriter::Pipe(w) => w.write(b),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match self {
            ArchiveWriter::Chunks(w) => w.flush(),
            ArchiveWriter::Pipe(w) => w.flush(),
        }
    }
}

/// An OS pipe: the builder's blocking writer (close-on-exec, buffered in
/// [`CHUNK`] pieces) and its read end as an [`InputStream`]. Neither side
/// counts or hashes: the builder must compute the digest. The read end
/// sees the end of the stream when the writer is dropped, finished or not,
/// so a broken build shows only as an archive whose digest differs (the
/// builder's own error says why); a reader that went away makes the
/// builder's writes fail with [`READER_GONE`].
pub fn pipe() -> io::Result<(PipeWriter, crate::provider::InputStream)> {
    let (r, w) = crate::provider::input::pipe_cloexec()?;
    crate::provider::input::enlarge_pipe(std::os::fd::AsRawFd::as_raw_fd(&w));
    Ok((
        PipeWriter(io::BufWriter::with_capacity(CHUNK, std::fs::File::from(w))),
        crate::provider::InputStream::from_pipe(r),
    ))
}

/// The builder's end of a [`pipe`].
pub struct PipeWriter(io::BufWriter<std::fs::File>);

fn gone(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        io::Error::new(io::ErrorKind::BrokenPipe, ReaderGone)
    } else {
        e
    }
}

impl PipeWriter {
    /// The archive is complete: flush it and close the pipe.
    pub fn finish(mut self) -> io::Result<()> {
        self.0.flush().map_err(gone)
    }
}

impl Write for PipeWriter {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.write(b).map_err(gone)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(gone)
    }
}

/// The shipping end: an [`AsyncRead`] that hashes what it yields.
pub struct ArchiveReader {
    rx: mpsc::Receiver<Msg>,
    cur: Vec<u8>,
    pos: usize,
    hash: Option<Sha256>,
    n: u64,
    done: bool,
    digest: Arc<Mutex<Option<Counted>>>,
}

/// The hex sha256 of a whole stream (when it was hashed) and its length.
type Counted = (Option<String>, u64);

/// Where the digest of a fully read stream appears.
#[derive(Clone)]
pub struct Digest256(Arc<Mutex<Option<Counted>>>);

impl Digest256 {
    /// The hex sha256 (when the reader hashes) and length, once the whole
    /// stream was read.
    pub fn get(&self) -> Option<Counted> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ArchiveReader {
    pub fn digest(&self) -> Digest256 {
        Digest256(self.digest.clone())
    }
}

impl AsyncRead for ArchiveReader {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let me = &mut *self;
        while me.pos == me.cur.len() {
            if me.done {
                return Poll::Ready(Ok(()));
            }
            match me.rx.poll_recv(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Some(Msg::Data(d))) => {
                    if let Some(h) = me.hash.as_mut() {
                        h.update(&d);
                    }
                    me.n += d.len() as u64;
                    me.cur = d;
                    me.pos = 0;
                }
                Poll::Ready(Some(Msg::Done)) => {
                    me.done = true;
                    let h = me.hash.take().map(|h| hex::encode(h.finalize()));
                    *me.digest.lock().unwrap_or_else(|p| p.into_inner()) = Some((h, me.n));
                }
                Poll::Ready(None) => {
                    return Poll::Ready(Err(io::Error::other(
                        "the archive builder stopped before the archive was complete",
                    )))
                }
            }
        }
        let k = out.remaining().min(me.cur.len() - me.pos);
        out.put_slice(&me.cur[me.pos..me.pos + k]);
        me.pos += k;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn whole_stream_arrives_and_is_hashed() {
        let (mut w, mut r) = channel_with(true);
        let digest = r.digest();
        let data: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let d2 = data.clone();
        let t = std::thread::spawn(move || {
            w.write_all(&d2).unwrap();
            w.finish().unwrap();
        });
        let mut got = vec![];
        r.read_to_end(&mut got).await.unwrap();
        t.join().unwrap();
        assert_eq!(got, data);
        assert_eq!(
            digest.get().unwrap(),
            (Some(hex::encode(Sha256::digest(&data))), data.len() as u64)
        );
    }

    /// A reader that only counts still says how long the stream was.
    #[tokio::test]
    async fn an_unhashed_stream_is_counted() {
        let (mut w, mut r) = channel_with(false);
        let digest = r.digest();
        let t = std::thread::spawn(move || {
            w.write_all(&[1u8; 1000]).unwrap();
            w.finish().unwrap();
        });
        let mut got = vec![];
        r.read_to_end(&mut got).await.unwrap();
        t.join().unwrap();
        assert_eq!(digest.get().unwrap(), (None, 1000));
    }

    /// A builder that stops mid-stream (an error, a panic) is an error for
    /// the reader, never a clean (truncated) end of file, and no digest
    /// appears.
    #[tokio::test]
    async fn a_stream_that_breaks_mid_transfer_is_an_error_not_an_eof() {
        let (mut w, mut r) = channel_with(true);
        let digest = r.digest();
        let t = std::thread::spawn(move || {
            w.write_all(&vec![7u8; CHUNK + 5]).unwrap();
            w.flush().unwrap();
            // dropped without finish, like a failing or panicking builder
        });
        let mut got = vec![];
        let err = r.read_to_end(&mut got).await.unwrap_err();
        t.join().unwrap();
        assert!(err.to_string().contains("stopped before"));
        assert!(digest.get().is_none());
    }

    #[tokio::test]
    async fn a_pipe_carries_the_whole_stream_and_says_when_its_reader_is_gone() {
        let (mut w, mut r) = pipe().unwrap();
        let data: Vec<u8> = (0..3 * CHUNK + 17).map(|i| (i % 251) as u8).collect();
        let d2 = data.clone();
        let t = std::thread::spawn(move || {
            w.write_all(&d2).unwrap();
            w.finish().unwrap();
        });
        let mut got = vec![];
        r.read_to_end(&mut got).await.unwrap();
        t.join().unwrap();
        assert_eq!(got, data);

        let (mut w, r) = pipe().unwrap();
        drop(r);
        let err = w.write_all(&vec![0u8; 2 * CHUNK]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(err.to_string(), READER_GONE);
        assert!(reader_gone(&err));
    }

    #[test]
    fn a_reader_that_goes_away_unblocks_the_builder() {
        let (mut w, r) = channel_with(true);
        drop(r);
        let err = w.write_all(&vec![0u8; 2 * CHUNK]).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
    }
}
