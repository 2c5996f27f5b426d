//! The one record of a run: every fact rfs establishes is an [`Event`],
//! written to the hash-chained journal (`journal.jsonl`) and then handed
//! to the [`Reporter`]. `EVIDENCE.md` is rendered from the same events
//! ([`crate::journal::evidence`]), and the console is one more consumer
//! ([`crate::reporter::Console`]) — no fact is written three ways.
//!
//! On disk an event is a journal line's `kind` (the serde tag, e.g.
//! `step.end`) and `payload` (the variant's fields, keys sorted). The
//! book's journal chapter lists every kind and field; a test keeps the two
//! in step.

//! The schema is in [`event`] ([`Event`]); the supporting records of its
//! fields are in [`facts`], the consumer trait in [`reporter`], and one
//! sample of every kind (for the tests that keep the book and the views in
//! step) in `catalog`.

mod event;
mod facts;
mod reporter;

pub mod artifact_facts;
#[cfg(test)]
pub mod catalog;
pub mod checkpoint_facts;
pub mod host_mount_facts;
pub mod network_facts;
pub mod sandbox_facts;
pub mod source_facts;

pub use event::Event;
pub use facts::*;
pub use reporter::{Reporter, Silent};
pub use source_facts::{SourceResynced, SourceVerified};

impl Event {
    /// The journal `kind` and `payload` (keys sorted).
    pub fn to_kind_payload(&self) -> (String, serde_json::Value) {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        let payload = v
            .get_mut("payload")
            .map(serde_json::Value::take)
            .unwrap_or(serde_json::Value::Object(Default::default()));
        (kind, payload)
    }

    /// The event a journal line records. Fails for kinds this rfs does not
    /// know and payloads that do not have the kind's fields.
    pub fn from_kind_payload(
        kind: &str,
        payload: &serde_json::Value,
    ) -> Result<Event, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "kind": kind, "payload": payload }))
    }

    /// The journal `kind`.
    pub fn kind(&self) -> String {
        self.to_kind_payload().0
    }
}
