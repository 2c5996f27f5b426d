//! A checkpoint of a sandbox Daytona does not fork (class `container`,
//! its default snapshots', and `android`): a snapshot of it
//! (`POST /sandbox/{id}/snapshot` with `{name}`, `sandbox.controller.ts`
//! :748-779), from which each proof's sandbox is created. The sandbox is
//! `snapshotting` meanwhile; the snapshot appears `active` once the
//! runner's job is done (`utils/persist-snapshot-from-sandbox.util.ts`
//! :60-67), earlier servers show it `pending` first; it is removed with
//! `DELETE /snapshots/{id}` (`snapshot.controller.ts` :164-186, the id,
//! not the name), `removing` until the row is gone (404).
//!
//! A snapshot carries no labels, so its name carries what `rfs gc` needs
//! to judge it as it judges a labelled sandbox: `rfs-cp.` then the owner's
//! host (a hash), uid, pid and pid start, the start time, the run, a
//! random part and the checkpoint's name, `.`-separated.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;
use tokio::time::Instant;

use super::http::{enc, Call, Retry};
use super::Api;
use crate::provider::fork::CHECKPOINT_LABEL;
use crate::provider::{labels, Labels, ProviderError, ProviderResult};

/// Every snapshot name rfs makes starts so.
pub(super) const PREFIX: &str = "rfs-cp.";
/// Bound on the wait for a snapshot to be `active`.
const ACTIVE_WAIT: Duration = Duration::from_secs(15 * 60);

/// The parts of Daytona's `Snapshot` rfs reads.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(super) struct SnapshotDto {
    pub id: String,
    pub name: String,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub error_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct SnapshotPage {
    items: Vec<SnapshotDto>,
    #[serde(default, rename = "totalPages")]
    total_pages: Option<u64>,
}

fn host_hash(host: &str) -> String {
    use sha2::Digest as _;
    hex::encode(&sha2::Sha256::digest(host.as_bytes())[..4])
}

/// A name without the separator (`.` → `~`: a character no label value
/// of rfs's has, and one a code span in EVIDENCE.md keeps).
fn part(s: &str) -> String {
    s.replace('.', "~")
}

/// The snapshot's name for checkpoint `name` with rfs's `labels`.
pub(super) fn encode(name: &str, l: &Labels) -> String {
    let get = |k: &str| part(l.get(k).map(String::as_str).unwrap_or(""));
    let rand = uuid::Uuid::new_v4().simple().to_string();
    format!(
        "{PREFIX}{}.{}.{}.{}.{}.{}.{}.{}",
        host_hash(l.get(labels::OWNER_HOST).map(String::as_str).unwrap_or("")),
        get(labels::OWNER_USER),
        get(labels::OWNER_PID),
        get(labels::OWNER_PID_START),
        get(labels::STARTED_AT),
        get(labels::RUN_ID),
        &rand[..8],
        part(name),
    )
}

/// rfs's labels of a snapshot it named ([`encode`]); `None`: not rfs's.
pub(super) fn decode(snapshot: &str) -> Option<Labels> {
    let rest = snapshot.strip_prefix(PREFIX)?;
    let f: Vec<&str> = rest.splitn(8, '.').collect();
    let [host, uid, pid, pid_start, started, run, _rand, name] = f[..] else {
        return None;
    };
    let back = |s: &str| s.replace('~', ".");
    let me = crate::provider::owner::host();
    let mut l = Labels::new();
    l.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
    let host = if host_hash(&me) == host {
        me
    } else {
        format!("another host (name hash {host})")
    };
    l.insert(labels::OWNER_HOST.into(), host);
    for (k, v) in [
        (labels::OWNER_USER, uid),
        (labels::OWNER_PID, pid),
        (labels::OWNER_PID_START, pid_start),
        (labels::STARTED_AT, started),
        (labels::RUN_ID, run),
        (CHECKPOINT_LABEL, name),
    ] {
        l.insert(k.into(), back(v));
    }
    Some(l)
}

/// Whether checkpoint id `id` is a snapshot (else a forked sandbox).
pub(super) fn is_snapshot(id: &str) -> bool {
    id.starts_with(PREFIX)
}

impl Api {
    /// Snapshot sandbox `id` as `snapshot` and wait until it is `active`
    /// and the sandbox is back from `snapshotting`; a snapshot that fails
    /// is removed (verified) and the refusal says why.
    pub(super) async fn snapshot_active(&self, id: &str, snapshot: &str) -> ProviderResult<()> {
        let url = format!(
            "{}/sandbox/{}/snapshot",
            self.http.config().api_url,
            enc(id)
        );
        let body = json!({ "name": snapshot });
        let lock = super::fork_lock::source_lock(&self.http.config().api_url, id);
        let _one_at_a_time = lock.lock().await;
        self.when_not_busy(id, "snapshot", || {
            let call = Call::new("snapshot sandbox", Some(id), Method::POST, url.clone())
                .retry(Retry::Never)
                .timeout(self.http.config().create_timeout);
            let body = body.clone();
            async move { self.http.send(&call, |r| r.json(&body)).await.map(|_| ()) }
        })
        .await?;
        let end = Instant::now() + ACTIVE_WAIT;
        let mut wait = Duration::from_millis(100);
        loop {
            let snap = self.get_snapshot(snapshot).await?;
            let state = snap
                .as_ref()
                .and_then(|s| s.state.clone())
                .unwrap_or_default();
            let sandbox_back = match self.get_dto(id).await? {
                Some(d) => d.state() != "snapshotting",
                None => true,
            };
            if state == "active" && sandbox_back {
                return Ok(());
            }
            let why =
                if matches!(state.as_str(), "error" | "build_failed" | "removing") {
                    Some(format!(
                        "snapshot {snapshot} of sandbox {id} went to state `{state}`{}",
                        snap.and_then(|s| s.error_reason)
                            .filter(|r| !r.is_empty())
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ))
                } else if Instant::now() >= end {
                    Some(format!(
                    "snapshot {snapshot} of sandbox {id} was not active within {} s (state `{}`)",
                    ACTIVE_WAIT.as_secs(),
                    if state.is_empty() { "not there yet" } else { &state }
                ))
                } else {
                    None
                };
            if let Some(why) = why {
                let cleanup = match self.remove_snapshot(snapshot).await {
                    Ok(()) => "it was removed".to_owned(),
                    Err(e) => format!("removing it failed: {e}"),
                };
                return Err(ProviderError::Provision(format!("{why}; {cleanup}")));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 3 / 2).min(Duration::from_secs(2));
        }
    }

    /// `GET /snapshots/{name}`; `None` on 404.
    pub(super) async fn get_snapshot(
        &self,
        name: &str,
    ) -> ProviderResult<Option<super::snapshot::SnapshotDto>> {
        let url = format!("{}/snapshots/{}", self.http.config().api_url, enc(name));
        let call = Call::new("get snapshot", None, Method::GET, url);
        match self.http.json::<SnapshotDto>(&call, |r| r).await {
            Ok(s) if s.name == name || s.id == name => Ok(Some(s)),
            Ok(_) => Ok(None),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `DELETE /snapshots/{id}` of snapshot `name` (gone already is `Ok`).
    pub(super) async fn remove_snapshot(&self, name: &str) -> ProviderResult<()> {
        let Some(s) = self.get_snapshot(name).await? else {
            return Ok(());
        };
        if s.state.as_deref() == Some("removing") {
            return Ok(());
        }
        let url = format!("{}/snapshots/{}", self.http.config().api_url, enc(&s.id));
        let call = Call::new("remove snapshot", None, Method::DELETE, url).retry(Retry::Idempotent);
        match self.http.send(&call, |r| r).await {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(ProviderError::Api(format!(
                "cannot remove snapshot {name}: {e}"
            ))),
        }
    }

    /// rfs's snapshots (named by [`encode`]), with their labels.
    pub(super) async fn list_snapshots(&self) -> ProviderResult<Vec<(String, Labels)>> {
        let mut out = vec![];
        for page in 1..=1000u64 {
            let url = format!("{}/snapshots", self.http.config().api_url);
            let call = Call::new("list snapshots", None, Method::GET, url);
            let q = [
                ("name", PREFIX.to_owned()),
                ("page", page.to_string()),
                ("limit", "100".to_owned()),
            ];
            let p: SnapshotPage = self.http.json(&call, |r| r.query(&q)).await?;
            let empty = p.items.is_empty();
            for s in p.items {
                if let Some(l) = decode(&s.name) {
                    if !out.iter().any(|(n, _)| *n == s.name) {
                        out.push((s.name, l));
                    }
                }
            }
            if empty || p.total_pages.is_none_or(|t| page >= t) {
                return Ok(out);
            }
        }
        Err(ProviderError::Protocol(
            "daytona: list snapshots did not end after 1000 pages".into(),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snapshot_name_carries_the_owner_gc_judges() {
        let mut l = crate::provider::owner::owner_labels();
        l.insert(labels::RUN_ID.into(), "20261207T195307Z-ab12cd34".into());
        l.insert(labels::STARTED_AT.into(), "2026-12-07T19:53:07.123Z".into());
        let n = encode("deps.v1", &l);
        assert!(is_snapshot(&n), "{n}");
        let back = decode(&n).unwrap();
        for k in [
            labels::OWNER_HOST,
            labels::OWNER_PID,
            labels::OWNER_USER,
            labels::OWNER_PID_START,
            labels::RUN_ID,
            labels::STARTED_AT,
        ] {
            assert_eq!(back.get(k), l.get(k), "{k} of {n}");
        }
        assert_eq!(back[CHECKPOINT_LABEL], "deps.v1");
        assert!(decode("daytona-small").is_none());
    }
}
