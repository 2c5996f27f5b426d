//! The egress record: one [`Connection`] per attempt through rfs's proxy,
//! kept until the run journals it as a `net.connect` fact.

use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

/// One connection attempt through rfs's egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// The name the program asked for (absent: it gave an address).
    pub name: Option<String>,
    /// The address connected to, or the first one refused (absent: the
    /// name did not resolve).
    pub address: Option<String>,
    pub port: u16,
    pub allowed: bool,
    /// The rule that decided (`default: public address`, `allow
    /// `pypi.org``, `default: loopback (127.0.0.0/8)`, ...).
    pub rule: String,
    /// `connect` (HTTP CONNECT) or `http` (a plain HTTP request).
    pub via: String,
    /// Bytes from the sandbox to the destination, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
    /// The step that was running when the connection was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Why an allowed connection failed (connect error), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Connection {
    /// `name (address):port`, or `address:port`.
    pub fn destination(&self) -> String {
        match (&self.name, &self.address) {
            (Some(n), Some(a)) if n != a => format!("{n} ({a}):{}", self.port),
            (Some(n), _) => format!("{n}:{}", self.port),
            (None, Some(a)) => format!("{a}:{}", self.port),
            (None, None) => format!("?:{}", self.port),
        }
    }
}

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
