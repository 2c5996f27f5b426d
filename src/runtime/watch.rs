//! Watching the run's sandbox while rfs waits on it. A sandbox frozen
//! outside rfs (`docker pause`) never answers: a command in it neither
//! ends nor fails, so a wait on it had no bound. While a sync, re-sync or
//! step waits, the provider is asked for the sandbox's state every
//! [`WATCH_EVERY`]; a sandbox that is paused, no longer runs or is gone
//! ends the wait with what the provider said.

use std::future::Future;
use std::time::Duration;

use rfs_sandbox::provider::{Provider, SandboxInfo};

/// How often a waiting run asks the provider for its sandbox's state (the
/// first time after this long too, so short commands never pay for it).
pub(crate) const WATCH_EVERY: Duration = Duration::from_secs(2);

/// How a sandbox the provider no longer knows is named.
pub(crate) const VANISHED: &str = "vanished: the provider no longer knows it (removed outside rfs)";

/// How the sandbox ended, if the provider's answer to get-by-id says it
/// no longer runs (`None`: not found).
pub(crate) fn death_of(found: Option<&SandboxInfo>) -> Option<String> {
    match found {
        None => Some(VANISHED.to_owned()),
        Some(info) if rfs_sandbox::provider::being_removed(&info.state) => Some(format!(
            "vanished: removed outside rfs (the provider reports it `{}`)",
            info.state
        )),
        Some(info) if !alive(&info.state) => Some(format!(
            "died outside rfs (the provider reports it `{}`)",
            info.state
        )),
        Some(_) => None,
    }
}

/// Why a waiting run must stop waiting on its sandbox: it was paused, or
/// it is dead or gone (`None`: it runs).
pub(crate) fn stalled(found: Option<&SandboxInfo>) -> Option<String> {
    match found {
        Some(info) if info.state.eq_ignore_ascii_case("paused") => Some(
            "was paused outside rfs (the provider reports it `paused`: frozen, it can neither finish nor fail the command)"
                .to_owned(),
        ),
        other => death_of(other),
    }
}

/// `wait` to its end, unless the sandbox stalls first: then `Err` with
/// how (the wait is dropped; the sandbox's teardown ends what it ran).
pub(crate) async fn watched<F: Future>(
    provider: &dyn Provider,
    id: &str,
    wait: F,
) -> Result<F::Output, String> {
    tokio::select! {
        biased;
        out = wait => Ok(out),
        how = watch(provider, id) => Err(how),
    }
}

/// Ask the provider every [`WATCH_EVERY`] until the sandbox stalls. A
/// provider that cannot answer is asked again (the wait itself reports
/// what fails).
async fn watch(provider: &dyn Provider, id: &str) -> String {
    loop {
        tokio::time::sleep(WATCH_EVERY).await;
        if let Some(found) = state_of(provider, id).await {
            if let Some(how) = stalled(found.as_ref()) {
                return how;
            }
        }
    }
}

/// The sandbox as get-by-id reports it, or as the inventory lists it when
/// get-by-id does not answer within [`ASK_WITHIN`] (docker's inspect
/// waits on a container whose exec start was frozen by a pause, while
/// its list still answers). `None`: neither answered.
async fn state_of(provider: &dyn Provider, id: &str) -> Option<Option<SandboxInfo>> {
    if let Ok(Ok(found)) = tokio::time::timeout(ASK_WITHIN, provider.get(id)).await {
        return Some(found);
    }
    let selector = rfs_sandbox::provider::labels::rfs_selector();
    match tokio::time::timeout(ASK_WITHIN, provider.list(&selector)).await {
        Ok(Ok(all)) => Some(all.into_iter().find(|s| s.id == id)),
        _ => None,
    }
}

/// How long one question about the sandbox's state may take.
const ASK_WITHIN: Duration = Duration::from_secs(5);

/// Whether a provider-reported state is a sandbox that still runs
/// (docker `running`/`paused`, daytona `started`, local `running`, and
/// the transitional states around them).
fn alive(state: &str) -> bool {
    matches!(
        state.to_ascii_lowercase().as_str(),
        "running" | "paused" | "started" | "starting" | "restarting" | "created" | "unknown" | ""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(state: &str) -> SandboxInfo {
        SandboxInfo {
            id: "x".into(),
            state: state.into(),
            ..Default::default()
        }
    }

    #[test]
    fn a_paused_sandbox_stalls_a_wait_but_is_not_dead() {
        assert!(stalled(Some(&info("paused")))
            .unwrap()
            .contains("paused outside rfs"));
        assert_eq!(death_of(Some(&info("paused"))), None);
    }

    #[test]
    fn running_sandboxes_do_not_stall_and_gone_ones_do() {
        for s in ["running", "started", "Running", ""] {
            assert_eq!(stalled(Some(&info(s))), None, "{s}");
        }
        assert!(stalled(None).unwrap().starts_with("vanished"));
        assert!(stalled(Some(&info("exited"))).unwrap().starts_with("died"));
        assert!(stalled(Some(&info("removing")))
            .unwrap()
            .starts_with("vanished"));
    }
}
