//! `rfs gc`: find sandboxes rfs created whose owning process is gone
//! (same host, pid not running or reused) and destroy them, verified.
//! Sandboxes of live owners and of other hosts are left alone.

use std::time::Duration;

use crate::provider::{labels, Provider};
use crate::runtime::owner::{owner_liveness, Liveness};
use crate::runtime::teardown::destroy_verified;

/// What gc decided about one sandbox.
#[derive(Debug, Clone)]
pub struct GcEntry {
    pub provider: String,
    pub id: String,
    pub run_id: String,
    pub action: GcAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GcAction {
    /// Owner alive: kept.
    KeptAlive,
    /// Owner cannot be judged from here: kept.
    KeptUnknown(String),
    /// Orphan listed (dry run).
    WouldDestroy(String),
    /// Orphan destroyed and verified gone.
    Destroyed(String),
    /// Orphan whose destruction failed or could not be verified.
    Failed(String),
}

/// Collect garbage on one provider.
pub async fn collect(p: &dyn Provider, dry_run: bool) -> Result<Vec<GcEntry>, String> {
    let list = p
        .list(&labels::rfs_selector())
        .await
        .map_err(|e| format!("listing sandboxes on {}: {e}", p.name()))?;
    let mut out = vec![];
    for s in list {
        let action = match owner_liveness(&s.labels) {
            Liveness::Alive => GcAction::KeptAlive,
            Liveness::Unknown(why) => GcAction::KeptUnknown(why),
            Liveness::Gone(why) if dry_run => GcAction::WouldDestroy(why),
            Liveness::Gone(why) => {
                match destroy_verified(p, &s.id, Duration::from_secs(60)).await {
                    Ok(proof) => GcAction::Destroyed(format!(
                        "{why}; verified gone after {} poll(s), {} ms",
                        proof.polls, proof.elapsed_ms
                    )),
                    Err(e) => GcAction::Failed(e.to_string()),
                }
            }
        };
        out.push(GcEntry {
            provider: p.name().to_owned(),
            run_id: s.labels.get(labels::RUN_ID).cloned().unwrap_or_default(),
            id: s.id,
            action,
        });
    }
    Ok(out)
}
