//! The egress record: one [`Connection`] per attempt through rfs's proxy,
//! kept until the run journals it as a `net.connect` fact.
//!
//! What a sandbox asks for is hostile and may come by the thousand a
//! second, so the record is bounded: a refusal just like one already
//! kept (same destination, rule, route and step) only counts on it
//! (`repeated`), and at most [`MAX_PENDING`] records wait to be journaled;
//! past that, attempts are counted and said in one record of their own.

use std::sync::{Arc, Mutex};

pub use rfs_evidence::events::network_facts::Connection;

/// The connections of one sandbox not yet journaled, and the step now
/// running (shared by the proxy and the run).
#[derive(Debug, Default)]
pub struct EgressLog {
    inner: Mutex<Inner>,
}

/// The most records waiting to be journaled (a step's worth: the run
/// takes them at every step's end).
pub const MAX_PENDING: usize = 2_000;

#[derive(Debug, Default)]
struct Inner {
    pending: Vec<Connection>,
    /// Attempts left out since the last take, past [`MAX_PENDING`].
    dropped: u64,
    step: Option<String>,
    /// Connections open now (recorded when they close), by id, as they
    /// were when they opened.
    open: std::collections::BTreeMap<u64, Connection>,
    next_id: u64,
    /// Proxy credentials rfs gave commands -> who was given them (the
    /// command, and its step when it is one).
    openers: std::collections::HashMap<String, Opener>,
    /// Whether a proxy serves this record (a sandbox behind it).
    served: bool,
}

/// Who a command rfs started is: `step `build``, `spawn `server``…, and
/// the step it is, when it is one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opener {
    pub label: String,
    pub step: Option<String>,
}

/// The most commands given credentials of their own in one sandbox;
/// past it, commands share the plain proxy address (attributed to the
/// step running).
const MAX_OPENERS: usize = 16_384;

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

    /// A proxy serves this record from now on.
    pub fn mark_served(&self) {
        if let Ok(mut i) = self.inner.lock() {
            i.served = true;
        }
    }

    /// Whether a proxy serves this record: its sandbox's commands reach
    /// the network through it.
    pub fn served(&self) -> bool {
        self.inner.lock().is_ok_and(|i| i.served)
    }

    /// The proxy user name for a command (`label`, of step `step` when it
    /// is one), to put in its proxy variables; `None` past
    /// [`MAX_OPENERS`].
    pub fn opener(&self, label: &str, step: Option<&str>) -> Option<String> {
        let mut i = self.inner.lock().ok()?;
        if i.openers.len() >= MAX_OPENERS {
            return None;
        }
        let token = format!("rfs{}", uuid::Uuid::new_v4().simple());
        let cut: String = label.chars().take(200).collect();
        i.openers.insert(
            token.clone(),
            Opener {
                label: cut,
                step: step.map(str::to_owned),
            },
        );
        Some(token)
    }

    /// Who was given proxy user name `token` (`None`: nobody, a made-up one).
    pub fn opener_of(&self, token: &str) -> Option<Opener> {
        self.inner.lock().ok()?.openers.get(token).cloned()
    }

    /// The step now running.
    pub fn step(&self) -> Option<String> {
        self.inner.lock().ok().and_then(|i| i.step.clone())
    }

    /// A connection opened, as it is now (recorded by
    /// [`EgressLog::closed`] with what it carried); its id.
    pub fn opened(&self, c: &Connection) -> u64 {
        let Ok(mut i) = self.inner.lock() else {
            return 0;
        };
        i.next_id += 1;
        let id = i.next_id;
        i.open.insert(id, c.clone());
        id
    }

    /// Opened connection `id` closed.
    pub fn closed(&self, id: u64, c: Connection) {
        if let Ok(mut i) = self.inner.lock() {
            i.open.remove(&id);
            i.keep(c);
        }
    }

    /// [`EgressLog::take`], and every connection still open, as it was
    /// when it opened, with `why` as its error: for a run that ends
    /// leaving its sandbox (`--keep`), whose open connections would
    /// otherwise never be journaled.
    pub fn take_with_open(&self, why: &str) -> Vec<Connection> {
        let mut out = self.take();
        if let Ok(i) = self.inner.lock() {
            out.extend(i.open.values().cloned().map(|mut c| {
                c.error = Some(why.to_owned());
                c
            }));
        }
        out
    }

    /// Wait (at most `bound`) until no connection is open: a program that
    /// has exited may have closed its end a moment before the proxy saw
    /// it.
    pub fn settle(&self, bound: std::time::Duration) {
        let until = std::time::Instant::now() + bound;
        while self.inner.lock().is_ok_and(|i| !i.open.is_empty())
            && std::time::Instant::now() < until
        {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
    }

    pub fn push(&self, c: Connection) {
        if let Ok(mut i) = self.inner.lock() {
            i.keep(c);
        }
    }

    /// Every connection recorded since the last call; when attempts were
    /// left out past [`MAX_PENDING`], a last record says how many.
    pub fn take(&self) -> Vec<Connection> {
        let Ok(mut i) = self.inner.lock() else {
            return vec![];
        };
        let mut out = std::mem::take(&mut i.pending);
        let dropped = std::mem::take(&mut i.dropped);
        if dropped > 0 {
            out.push(Connection {
                name: None,
                address: None,
                port: 0,
                allowed: false,
                rule: format!(
                    "{dropped} more attempts through rfs's proxy not recorded one by one: the record keeps at most {MAX_PENDING} a step"
                ),
                via: "record bound".into(),
                bytes_up: 0,
                bytes_down: 0,
                duration_ms: 0,
                step: i.step.clone(),
                opened_by: None,
                error: None,
                repeated: dropped.saturating_sub(1),
            });
        }
        out
    }
}

impl Inner {
    fn keep(&mut self, c: Connection) {
        if !c.allowed {
            let same = self.pending.iter_mut().rev().find(|p| {
                !p.allowed
                    && p.name == c.name
                    && p.address == c.address
                    && p.port == c.port
                    && p.rule == c.rule
                    && p.via == c.via
                    && p.step == c.step
                    && p.error == c.error
            });
            if let Some(p) = same {
                p.repeated += 1;
                return;
            }
        }
        if self.pending.len() >= MAX_PENDING {
            self.dropped += 1;
            return;
        }
        self.pending.push(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(name: &str) -> Connection {
        Connection {
            name: Some(name.into()),
            address: None,
            port: 80,
            allowed: false,
            rule: "not in the allow list".into(),
            via: "http".into(),
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 0,
            step: Some("s".into()),
            opened_by: None,
            error: None,
            repeated: 0,
        }
    }

    /// Refused connections grew rfs's memory and the bundle without
    /// bound (1,500 refusals in 0.6 s: 730 MB, a 350 MB bundle). Repeats
    /// are counted on one record, and distinct ones past the bound are
    /// counted in one record that says so.
    #[test]
    fn a_flood_of_refusals_is_counted_not_kept_one_by_one() {
        let log = EgressLog::new();
        for _ in 0..10_000 {
            log.push(refused("same.example"));
        }
        for n in 0..(MAX_PENDING + 500) {
            log.push(refused(&format!("n{n}.example")));
        }
        let got = log.take();
        assert_eq!(got.len(), MAX_PENDING + 1);
        assert_eq!(got[0].repeated, 9_999);
        let last = got.last().unwrap();
        assert!(last.rule.contains("501 more attempts"), "{}", last.rule);
        assert_eq!(last.attempts(), 501);
        assert!(log.take().is_empty());
    }
}
