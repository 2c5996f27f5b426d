//! Idle upstream connections of rfs's egress proxy (#44, finding 9): a
//! background process holding every upstream slot with silent tunnels
//! made a later step's request wait until its timeout. Each upstream
//! connection registers here and says when it last carried a byte; when
//! every slot is taken and another connection waits, the one idle the
//! longest (at least [`MIN_IDLE_TO_EVICT`]) is closed to make room, and
//! any connection idle for [`IDLE_TIMEOUT`] is closed. Each is recorded
//! with why rfs closed it.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// A connection idle this long is closed whatever the load.
pub(super) const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// The least idleness that lets a connection be closed for one waiting.
pub(super) const MIN_IDLE_TO_EVICT: Duration = Duration::from_secs(5);

struct Entry {
    last_ms: Arc<AtomicU64>,
    cancel: CancellationToken,
    why: Arc<Mutex<Option<String>>>,
}

/// The proxy's open upstream connections.
pub(super) struct Idle {
    epoch: Instant,
    next: AtomicU64,
    conns: Mutex<HashMap<u64, Entry>>,
}

impl Idle {
    pub(super) fn new() -> Arc<Idle> {
        Arc::new(Idle {
            epoch: Instant::now(),
            next: AtomicU64::new(0),
            conns: Mutex::new(HashMap::new()),
        })
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Entry>> {
        self.conns.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A new connection's handle (deregistered when dropped).
    pub(super) fn register(self: &Arc<Self>) -> Watch {
        let key = self.next.fetch_add(1, Ordering::Relaxed);
        let last_ms = Arc::new(AtomicU64::new(self.now_ms()));
        let cancel = CancellationToken::new();
        let why = Arc::new(Mutex::new(None));
        self.lock().insert(
            key,
            Entry {
                last_ms: last_ms.clone(),
                cancel: cancel.clone(),
                why: why.clone(),
            },
        );
        Watch {
            key,
            last_ms,
            closed: Box::pin(cancel.cancelled_owned()),
            why,
            idle: self.clone(),
        }
    }

    fn close(e: &Entry, why: String) {
        *e.why.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
        e.cancel.cancel();
    }

    /// Close the connection idle the longest, if it has been idle at
    /// least `min`, for one that waits for a slot (`slots`: how many).
    /// Whether one was closed.
    pub(super) fn evict_longest_idle(&self, min: Duration, slots: usize) -> bool {
        let now = self.now_ms();
        let conns = self.lock();
        let oldest = conns
            .values()
            .filter(|e| !e.cancel.is_cancelled())
            .map(|e| (now.saturating_sub(e.last_ms.load(Ordering::Relaxed)), e))
            .filter(|(idle, _)| *idle >= min.as_millis() as u64)
            .max_by_key(|(idle, _)| *idle);
        match oldest {
            Some((idle, e)) => {
                Self::close(
                    e,
                    format!(
                        "closed by rfs's proxy after {} s idle: all {slots} upstream connections were in use and another one was waiting",
                        idle / 1000
                    ),
                );
                true
            }
            None => false,
        }
    }

    /// Close every connection idle for `max` or more.
    pub(super) fn sweep(&self, max: Duration) {
        let now = self.now_ms();
        for e in self.lock().values() {
            let idle = now.saturating_sub(e.last_ms.load(Ordering::Relaxed));
            if idle >= max.as_millis() as u64 && !e.cancel.is_cancelled() {
                Self::close(
                    e,
                    format!(
                        "closed by rfs's proxy after {} s idle (its bound for an idle connection)",
                        idle / 1000
                    ),
                );
            }
        }
    }
}

/// One connection's registration.
pub(super) struct Watch {
    key: u64,
    last_ms: Arc<AtomicU64>,
    closed: Pin<Box<WaitForCancellationFutureOwned>>,
    why: Arc<Mutex<Option<String>>>,
    idle: Arc<Idle>,
}

impl Watch {
    /// It carried a byte now.
    pub(super) fn touch(&self) {
        self.last_ms.store(self.idle.now_ms(), Ordering::Relaxed);
    }

    /// Why rfs closed it, once it did (and `cx` woken when it does).
    pub(super) fn poll_closed(&mut self, cx: &mut Context<'_>) -> Option<String> {
        match self.closed.as_mut().poll(cx) {
            Poll::Ready(()) => Some(
                self.why
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
                    .unwrap_or_else(|| "closed by rfs's proxy".into()),
            ),
            Poll::Pending => None,
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.idle.lock().remove(&self.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_connection_idle_long_enough_is_evicted_and_the_longest_first() {
        let idle = Idle::new();
        let old = idle.register();
        old.last_ms.store(0, Ordering::Relaxed);
        let young = idle.register();
        young
            .last_ms
            .store(idle.now_ms() + 10_000, Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        assert!(!idle.evict_longest_idle(Duration::from_secs(3600), 2));
        assert!(idle.evict_longest_idle(Duration::ZERO, 2));
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let (mut old, mut young) = (old, young);
        assert!(old.poll_closed(&mut cx).unwrap().contains("were in use"));
        assert!(young.poll_closed(&mut cx).is_none());
        drop(old);
        assert_eq!(idle.lock().len(), 1);
    }
}
