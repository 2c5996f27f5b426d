//! An upstream connection of rfs's egress proxy: it counts the bytes
//! each way, says when it last carried one ([`super::idle`]), ends with
//! the reason when rfs closes it, and is recorded in the sandbox's
//! [`EgressLog`] when dropped.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use super::{Connection, EgressLog};

/// An upstream connection counting its bytes; recorded when dropped.
pub(super) struct Counted {
    /// Its id in the log's open connections.
    id: u64,
    inner: TcpStream,
    rec: Option<Connection>,
    started: Instant,
    log: Arc<EgressLog>,
    /// Its place among the upstream connections open at once.
    _slot: tokio::sync::OwnedSemaphorePermit,
    /// When it last carried a byte, and whether rfs closed it.
    watch: super::idle::Watch,
}

impl Counted {
    pub(super) fn new(
        inner: TcpStream,
        rec: Connection,
        started: Instant,
        log: Arc<EgressLog>,
        slot: tokio::sync::OwnedSemaphorePermit,
        watch: super::idle::Watch,
    ) -> Counted {
        let id = log.opened(&rec);
        Counted {
            id,
            inner,
            rec: Some(rec),
            started,
            log,
            _slot: slot,
            watch,
        }
    }
}

impl Counted {
    /// The error ending it, once rfs closed it (idle), recorded with it.
    fn closed_by_rfs(&mut self, cx: &mut Context<'_>) -> Option<std::io::Error> {
        let why = self.watch.poll_closed(cx)?;
        if let Some(rec) = self.rec.as_mut() {
            rec.error.get_or_insert_with(|| why.clone());
        }
        Some(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            why,
        ))
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        if let Some(mut r) = self.rec.take() {
            r.duration_ms = self.started.elapsed().as_millis() as u64;
            self.log.closed(self.id, r);
        }
    }
}

impl AsyncRead for Counted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        // Whether rfs closed it is asked only while it waits: a read
        // with data costs nothing more (the relay's hot path).
        if r.is_pending() {
            if let Some(why) = self.closed_by_rfs(cx) {
                return Poll::Ready(Err(why));
            }
        }
        let n = (buf.filled().len() - before) as u64;
        if n > 0 {
            self.watch.touch();
        }
        if let Some(rec) = self.rec.as_mut() {
            rec.bytes_down += n;
        }
        r
    }
}

impl AsyncWrite for Counted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        if r.is_pending() {
            if let Some(why) = self.closed_by_rfs(cx) {
                return Poll::Ready(Err(why));
            }
        }
        if let Poll::Ready(Ok(n)) = &r {
            self.watch.touch();
            if let Some(rec) = self.rec.as_mut() {
                rec.bytes_up += *n as u64;
            }
        }
        r
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
