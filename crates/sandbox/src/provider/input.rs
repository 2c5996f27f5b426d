//! A byte stream fed to a command's standard input
//! ([`super::StreamInput::exec_with_input`]): any async reader, or the read
//! end of an OS pipe that its producer writes into directly. A provider
//! that starts the command on this machine can hand such a pipe to the
//! command as its standard input ([`InputStream::into_pipe`]), so no
//! thread of rfs copies the bytes from one to the other; any other
//! provider reads it like every other stream.

use std::io;
use std::os::fd::FromRawFd as _;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct InputStream(Inner);

enum Inner {
    Reader(Box<dyn AsyncRead + Send + Unpin>),
    /// Not read from yet: still a plain (blocking) descriptor.
    Pipe(Option<OwnedFd>),
    PipeReader(tokio::net::unix::pipe::Receiver),
}

impl InputStream {
    pub fn new(reader: impl AsyncRead + Send + Unpin + 'static) -> Self {
        InputStream(Inner::Reader(Box::new(reader)))
    }

    /// The read end of a pipe (its write end belongs to the producer).
    pub fn from_pipe(read_end: OwnedFd) -> Self {
        InputStream(Inner::Pipe(Some(read_end)))
    }

    /// The pipe's read end, for a command to read directly; the stream
    /// itself when it is not a pipe or was read from already.
    pub fn into_pipe(self) -> Result<OwnedFd, Self> {
        match self.0 {
            Inner::Pipe(Some(fd)) => Ok(fd),
            other => Err(InputStream(other)),
        }
    }
}

/// How [`InputStream::copy_into`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copied {
    /// Every byte of the stream was written.
    Whole,
    /// The reader went away (the command closed its input); what it did
    /// not read is dropped.
    ReaderGone,
}

impl InputStream {
    /// Copy the stream into `out` in pieces of `chunk` bytes until its end
    /// or until `out` refuses a write (its reader went away). An error
    /// reading the stream is an error: the reader saw a truncated stream.
    pub async fn copy_into<W: AsyncWrite + Unpin + ?Sized>(
        &mut self,
        out: &mut W,
        chunk: usize,
    ) -> Result<Copied, super::ProviderError> {
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        let mut buf = vec![0u8; chunk];
        loop {
            let n = self.read(&mut buf).await.map_err(|e| {
                super::ProviderError::Io(format!("the input stream broke before its end: {e}"))
            })?;
            if n == 0 {
                return Ok(Copied::Whole);
            }
            if out.write_all(&buf[..n]).await.is_err() {
                return Ok(Copied::ReaderGone);
            }
        }
    }
}

impl AsyncRead for InputStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            match &mut self.0 {
                Inner::Reader(r) => return Pin::new(r).poll_read(cx, buf),
                Inner::PipeReader(r) => return Pin::new(r).poll_read(cx, buf),
                Inner::Pipe(fd) => {
                    let fd = fd.take().expect("a pipe not yet taken");
                    // O_NONBLOCK is set on the read end's own open file
                    // description; the producer's blocking writes are not
                    // affected.
                    let r = tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?;
                    self.0 = Inner::PipeReader(r);
                }
            }
        }
    }
}

/// A pipe (read end, write end), both close-on-exec.
pub fn pipe_cloexec() -> std::io::Result<(std::os::fd::OwnedFd, std::os::fd::OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two descriptors into `fds`.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: both descriptors were just created and are owned here.
    Ok(unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    })
}

/// The pipe buffer asked for (the unprivileged maximum by default; kernel
/// memory, not the process's).
const PIPE: usize = 1 << 20;

/// Ask for a [`PIPE`]-byte buffer on `fd` when it is a pipe (fewer, larger
/// reads and writes); anything else is left alone.
pub fn enlarge_pipe(fd: std::os::fd::RawFd) {
    // SAFETY: fcntl on a descriptor the caller holds; F_SETPIPE_SZ fails
    // harmlessly (EBADF, EINVAL, EPERM) on anything that is not a pipe.
    unsafe {
        libc::fcntl(fd, libc::F_SETPIPE_SZ, PIPE as libc::c_int);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;

    #[tokio::test]
    async fn a_pipe_reads_like_any_stream_or_hands_over_its_read_end() {
        let (r, w) = super::pipe_cloexec().unwrap();
        let t = std::thread::spawn(move || {
            let mut w = std::fs::File::from(w);
            w.write_all(&[3u8; 300_000]).unwrap();
        });
        let mut s = InputStream::from_pipe(r);
        let mut got = Vec::new();
        s.read_to_end(&mut got).await.unwrap();
        t.join().unwrap();
        assert_eq!(got, vec![3u8; 300_000]);
        assert!(s.into_pipe().is_err(), "a stream read from keeps its bytes");

        let (r, _w) = super::pipe_cloexec().unwrap();
        assert!(InputStream::from_pipe(r).into_pipe().is_ok());
        assert!(InputStream::new(&b"x"[..]).into_pipe().is_err());
    }
}
