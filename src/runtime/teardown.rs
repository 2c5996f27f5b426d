//! Verified teardown: destroy, then poll until get-by-id says not found
//! **and** the id is absent from the provider's inventory in the same round,
//! within a deadline (providers may be eventually consistent).

use std::time::{Duration, Instant};

use super::Run;
use rfs_evidence::events::Event;
use rfs_sandbox::provider::{labels, Provider};

/// The proof that a sandbox is gone.
#[derive(Debug, Clone)]
pub struct GoneProof {
    pub id: String,
    pub polls: u32,
    pub elapsed_ms: u128,
    pub inventory_count: usize,
    pub saw_present_before: bool,
}

/// A sandbox that could not be proven gone within the deadline.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{}sandbox {id} not verified gone after {elapsed_ms} ms and {polls} polls: {last}", .destroy_error.as_ref().map(|e| format!("destroy failed: {e}; ")).unwrap_or_default())]
pub struct NotGone {
    pub id: String,
    pub elapsed_ms: u128,
    pub polls: u32,
    /// What the last poll saw.
    pub last: String,
    /// Why every destroy call failed, if they all did.
    pub destroy_error: Option<String>,
}

/// Destroy `id` and verify it is gone. Errors say what could not be proven.
pub async fn destroy_verified(
    p: &dyn Provider,
    id: &str,
    deadline: Duration,
) -> Result<GoneProof, NotGone> {
    let start = Instant::now();
    // A sandbox the provider still lists as being deleted (Daytona's soft
    // delete) was not there for rfs to destroy.
    // Every call is bounded by what is left of the deadline: a provider
    // that stops answering (a wedged daemon) ends the teardown as not
    // verified, naming the sandbox, instead of holding the run.
    let left = || deadline.saturating_sub(start.elapsed());
    let saw_present_before = matches!(bounded(left(), p.get(id)).await,
        Ok(Some(i)) if !rfs_sandbox::provider::being_removed(&i.state));
    let mut destroy_err = None;
    for attempt in 0..3 {
        match bounded(left(), p.destroy(id)).await {
            Ok(()) => {
                destroy_err = None;
                break;
            }
            Err(e) => {
                destroy_err = Some(e.to_string());
                tokio::time::sleep(Duration::from_millis(200 * (attempt + 1))).await;
            }
        }
    }
    let mut polls = 0;
    let mut wait = Duration::from_millis(20);
    let mut last;
    loop {
        polls += 1;
        let by_id = bounded(left(), p.get(id)).await;
        let inventory = bounded(left(), p.list(&labels::rfs_selector())).await;
        match (&by_id, &inventory) {
            (Ok(None), Ok(inv)) if !inv.iter().any(|s| s.id == id) => {
                return Ok(GoneProof {
                    id: id.to_owned(),
                    polls,
                    elapsed_ms: start.elapsed().as_millis(),
                    inventory_count: inv.len(),
                    saw_present_before,
                })
            }
            _ => {
                last = match (by_id, inventory) {
                    (Err(e), _) | (_, Err(e)) => format!("provider error: {e}"),
                    (Ok(Some(s)), _) => format!("get-by-id still returns it (state {})", s.state),
                    (Ok(None), Ok(_)) => "still listed in the inventory".into(),
                };
                tracing::debug!(target: "rfs::teardown", sandbox = id, poll = polls, "not gone yet: {last}");
            }
        }
        if start.elapsed() >= deadline {
            return Err(NotGone {
                id: id.to_owned(),
                elapsed_ms: start.elapsed().as_millis(),
                polls,
                last,
                destroy_error: destroy_err,
            });
        }
        tokio::time::sleep(wait).await;
        wait = (wait * 2).min(Duration::from_secs(2));
    }
}

/// `call`, or a provider error when it does not answer within `left`.
async fn bounded<T>(
    left: Duration,
    call: impl std::future::Future<Output = rfs_sandbox::provider::ProviderResult<T>>,
) -> rfs_sandbox::provider::ProviderResult<T> {
    match tokio::time::timeout(left, call).await {
        Ok(r) => r,
        Err(_) => Err(rfs_sandbox::provider::ProviderError::Timeout(
            "no answer from the provider before the cleanup deadline".into(),
        )),
    }
}

/// Tear down the run's sandbox at the end of the run (or after a failed
/// sync). Returns a warning when the teardown could not be proven.
pub(crate) async fn finish(run: &Run) -> Option<String> {
    let (id, destroyed) = {
        let st = run.state();
        (st.sandbox.as_ref().map(|s| s.id.clone()), st.destroyed)
    };
    let id = match id {
        Some(id) if !destroyed => id,
        _ => {
            if !destroyed {
                let _ = run.record(Event::CleanupNone {
                    reason: "no sandbox was provisioned".into(),
                });
            }
            return None;
        }
    };
    if run.cfg.keep {
        super::kept::mark_kept(&run.cfg.state_dir, &id);
        run.record_connections_kept(run.cfg.provider.egress(&id).as_ref());
        let _ = run.record(Event::CleanupKept {
            sandbox_id: id,
            reason: "--keep".into(),
        });
        return None;
    }
    if let Some(reason) = run.hand_held_source_to_suite(&id) {
        let _ = run.record(Event::CleanupKept {
            sandbox_id: id,
            reason,
        });
        return None;
    }
    destroy_and_record(run, &id, "run end").await
}

/// Destroy the run's sandbox now, journal the proof, mark it destroyed.
pub(crate) async fn destroy_and_record(run: &Run, id: &str, why: &str) -> Option<String> {
    // Connections still open end with the sandbox: journaled once it is
    // gone, before the proof that it is.
    let egress = run.cfg.provider.egress(id);
    let res = destroy_verified(run.cfg.provider.as_ref(), id, run.cfg.cleanup_deadline).await;
    run.record_connections(egress.as_ref());
    match res {
        Ok(proof) => {
            run.state().destroyed = true;
            let _ = run.record(Event::CleanupVerified {
                sandbox_id: proof.id,
                why: why.to_owned(),
                get_by_id: "not found".into(),
                in_inventory: false,
                inventory_count: proof.inventory_count,
                polls: proof.polls,
                elapsed_ms: super::ms(proof.elapsed_ms),
                saw_present_before: proof.saw_present_before,
            });
            None
        }
        Err(e) => {
            let _ = run.record(Event::CleanupFailed {
                sandbox_id: id.to_owned(),
                why: why.to_owned(),
                error: e.to_string(),
            });
            Some(format!("teardown of sandbox {id} not verified: {e}"))
        }
    }
}
