//! The egress record: one [`Connection`] per attempt through rfs's proxy,
//! kept until the run journals it as a `net.connect` fact.

use std::sync::{Arc, Mutex};

pub use rfs_evidence::events::network_facts::Connection;

/// The connections of one sandbox not yet journaled, and the step now
/// running (shared by the proxy and the run).
#[derive(Debug, Default)]
pub struct EgressLog {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    pending: Vec<Connection>,
    step: Option<String>,
    /// Connections open now (recorded when they close).
    open: usize,
}

impl EgressLog {
    pub fn new() -> Arc<EgressLog> {
        Arc::new(EgressLog::default())
    }

    /// The step connections made from now on belong to (`None`: none).
    pub fn set_step(&self, step: Option<String>) {
        if let Ok(mut i) = self.inner.lock() {
            i.step = step;
        }
    }

    /// The step now running.
    pub fn step(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|i| i.step.clone())
    }

    /// A connection opened (recorded by [`EgressLog::closed`]).
    pub fn opened(&self) {
        if let Ok(mut i) = self.inner.lock() {
            i.open += 1;
        }
    }

    /// An opened connection closed.
    pub fn closed(&self, c: Connection) {
        if let Ok(mut i) = self.inner.lock() {
            i.open = i.open.saturating_sub(1);
            i.pending.push(c);
        }
    }

    /// Wait (at most `bound`) until no connection is open: a program that
    /// has exited may have closed its end a moment before the proxy saw
    /// it.
    pub fn settle(&self, bound: std::time::Duration) {
        let until = std::time::Instant::now() + bound;
        while self.inner.lock().is_ok_and(|i| i.open > 0) && std::time::Instant::now() < until {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    pub fn push(&self, c: Connection) {
        if let Ok(mut i) = self.inner.lock() {
            i.pending.push(c);
        }
    }

    /// Every connection recorded since the last call.
    pub fn take(&self) -> Vec<Connection> {
        self.inner
            .lock()
            .map(|mut i| std::mem::take(&mut i.pending))
            .unwrap_or_default()
    }
}
