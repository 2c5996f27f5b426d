//! Setup once, fork per proof (#36) on `daytona`, by the sandbox's
//! class, as Daytona v0.190.0 allows (`sandbox.service.ts`):
//!
//! - **`linux-vm`, `windows`** (the classes `forkSandbox` takes,
//!   :1093-1094): the checkpoint is a fork of the sandbox
//!   (`POST /sandbox/{id}/fork`, body `ForkSandbox`; the fork starts
//!   `creating`, :1142-1143), kept running (and alive) until the suite
//!   removes it; a proof's sandbox is a fork of the checkpoint. Forks of
//!   one source are made one at a time and a busy source is waited for
//!   (see `fork_lock`). Every fork is labelled `relayflows/fork-of` with
//!   its parent, so a list puts children before parents (Daytona deletes
//!   no sandbox with a live fork, :2020-2029), and the sandbox a
//!   checkpoint was forked from outlives it (see [`Fork::holds_its_source`]).
//! - **any other class** (`container`, Daytona's default snapshots'): the
//!   checkpoint is a snapshot of the sandbox (see `snapshot`) and a
//!   proof's sandbox is created from it.
//!
//! Either way the proof's sandbox is relabelled as the proof's, given the
//! proof's network (a fork keeps its source's CIDR list and block flag,
//! not its domain list, :1139-1140) and checked against what the proof
//! asked, as a created one is.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::json;

use super::dto::SandboxDto;
use super::http::{enc, Call, Retry};
use super::sandbox::sandbox_name;
use super::snapshot::{self, is_snapshot};
use super::{Api, DaytonaProvider};
use crate::provider::fork::{Checkpoint, Fork, Forked};
use crate::provider::{CreateSpec, Labels, Provider, ProviderError, ProviderResult};

/// The label naming the sandbox a fork was made from.
pub(super) const FORK_OF: &str = "relayflows/fork-of";

impl Api {
    /// Fork sandbox `id` as `name` (never resent blindly: a busy source
    /// is retried, see `fork_lock`), wait until the fork is started and
    /// the source is back, one fork of a source at a time.
    async fn fork_started(&self, id: &str, name: &str) -> ProviderResult<SandboxDto> {
        let url = format!("{}/sandbox/{}/fork", self.http.config().api_url, enc(id));
        let body = json!({ "name": name });
        let lock = super::fork_lock::source_lock(&self.http.config().api_url, id);
        let _one_at_a_time = lock.lock().await;
        let dto = self
            .when_not_busy(id, "fork", || {
                let call = Call::new("fork sandbox", Some(id), Method::POST, url.clone())
                    .retry(Retry::Never)
                    .timeout(self.http.config().create_timeout);
                let body = body.clone();
                async move { self.http.json::<SandboxDto>(&call, |r| r.json(&body)).await }
            })
            .await?;
        self.remember(&dto);
        let started = self.wait_started(dto).await;
        // The source is `forking` until the runner's job ends: the next
        // fork of it waits for that here, not in a 400.
        let _ = self.settled(id, super::fork_lock::BUSY_WAIT).await;
        started
    }

    /// `PUT /sandbox/{id}/labels` (replaces them all).
    async fn set_labels(&self, id: &str, labels: &Labels) -> ProviderResult<()> {
        let url = format!("{}/sandbox/{}/labels", self.http.config().api_url, enc(id));
        let call = Call::new("label sandbox", Some(id), Method::PUT, url);
        let body = json!({ "labels": labels });
        self.http
            .send(&call, |r| r.json(&body))
            .await
            .map(|_| ())
            .map_err(Into::into)
    }

    /// Give fork `dto` the network `policy` asks (a fork keeps its
    /// source's CIDR list and block flag and gets no domain list:
    /// `POST /sandbox/{id}/network-settings`), or destroy it (verified)
    /// and say why; the sandbox as it is now. What the answer says is
    /// checked by [`DaytonaProvider::adopt`], as a created sandbox's is.
    async fn network_or_destroy(
        &self,
        dto: SandboxDto,
        policy: &crate::network::NetworkPolicy,
    ) -> ProviderResult<SandboxDto> {
        use super::network_fields::{network_fields, NetworkFields};
        let (block_all, cidrs, domains) = match network_fields(policy) {
            Ok(NetworkFields::BlockAll) => (true, None, None),
            Ok(NetworkFields::Allow { cidrs, domains }) => (false, cidrs, domains),
            Ok(NetworkFields::Open) => (false, None, None),
            // Refused before anything ran (the create's check); never open.
            Err(why) => {
                let cleanup = self.destroy_unused(&dto.id).await;
                return Err(ProviderError::Provision(format!(
                    "fork {} cannot hold the proof's network: {why}; {cleanup}",
                    dto.id
                )));
            }
        };
        let some = |l: &Option<String>| l.clone().filter(|l| !l.is_empty());
        let has = (
            dto.network_block_all == Some(true),
            some(&dto.network_allow_list),
            some(&dto.domain_allow_list),
        );
        if has == (block_all, cidrs.clone(), domains.clone()) {
            return Ok(dto);
        }
        let url = format!(
            "{}/sandbox/{}/network-settings",
            self.http.config().api_url,
            enc(&dto.id)
        );
        let call = Call::new(
            "set the network of sandbox",
            Some(&dto.id),
            Method::POST,
            url,
        );
        let body = json!({
            "networkBlockAll": block_all,
            "networkAllowList": cidrs.unwrap_or_default(),
            "domainAllowList": domains.unwrap_or_default(),
        });
        match self.http.json::<SandboxDto>(&call, |r| r.json(&body)).await {
            Ok(now) => Ok(now),
            Err(e) => {
                let cleanup = self.destroy_unused(&dto.id).await;
                Err(ProviderError::Provision(format!(
                    "cannot give sandbox {} the proof's network (a fork has its checkpoint's): {e}; {cleanup}",
                    dto.id
                )))
            }
        }
    }

    /// Label fork `id` with `labels`, or destroy it (verified) and say why.
    async fn label_or_destroy(&self, id: &str, labels: &Labels) -> ProviderResult<()> {
        if let Err(e) = self.set_labels(id, labels).await {
            let cleanup = self.destroy_unused(id).await;
            return Err(ProviderError::Provision(format!(
                "cannot label fork {id}: {e}; {cleanup}"
            )));
        }
        Ok(())
    }

    /// `GET /sandbox/{id}/forks`: its fork children not deleted.
    pub(super) async fn fork_children(&self, id: &str) -> ProviderResult<Vec<SandboxDto>> {
        let url = format!("{}/sandbox/{}/forks", self.http.config().api_url, enc(id));
        let call = Call::new("list the forks of sandbox", Some(id), Method::GET, url);
        match self.http.json::<Vec<SandboxDto>>(&call, |r| r).await {
            Ok(l) => Ok(l),
            Err(e) if e.status() == Some(404) => Ok(vec![]),
            Err(e) => Err(e.into()),
        }
    }
}

/// `list` with every fork before the sandbox it was forked from (by the
/// `relayflows/fork-of` label): deleting in this order never meets
/// Daytona's "active fork children" refusal (what `rfs gc` does).
pub(super) fn children_first(mut rest: Vec<SandboxDto>) -> Vec<SandboxDto> {
    let mut out = Vec::with_capacity(rest.len());
    while !rest.is_empty() {
        let parents: std::collections::HashSet<String> = rest
            .iter()
            .filter_map(|d| d.labels().get(FORK_OF).cloned())
            .collect();
        let (leaves, inner): (Vec<_>, Vec<_>) =
            rest.into_iter().partition(|d| !parents.contains(&d.id));
        if leaves.is_empty() {
            // A cycle cannot be Daytona's: keep the server's order.
            out.extend(inner);
            break;
        }
        out.extend(leaves);
        rest = inner;
    }
    out
}

/// `labels` with the fork's parent named.
fn with_parent(labels: &Labels, parent: &str) -> Labels {
    let mut l = labels.clone();
    l.insert(FORK_OF.into(), parent.to_owned());
    l
}

#[async_trait]
impl Fork for DaytonaProvider {
    async fn checkpoint(
        &self,
        id: &str,
        name: &str,
        labels: &Labels,
    ) -> ProviderResult<Checkpoint> {
        let res = async {
            let Some(source) = self.api.get_dto(id).await? else {
                return Err(ProviderError::Provision(format!("sandbox {id} is gone")));
            };
            let home = self.get(id).await?.map(|i| i.home).unwrap_or_default();
            let class = source.sandbox_class.clone().unwrap_or_else(|| "container".into());
            if !source.forks() {
                let snap = snapshot::encode(name, labels);
                self.api.snapshot_active(id, &snap).await?;
                return Ok(Checkpoint {
                    id: snap.clone(),
                    how: format!(
                        "a snapshot of the sandbox (class `{class}`: Daytona forks only `linux-vm` and `windows` sandboxes), snapshot {snap}, removed when the suite ends"
                    ),
                    home,
                    host_bytes: None,
                });
            }
            let cname = format!(
                "rfs-checkpoint-{name}-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            );
            let dto = self.api.fork_started(id, &cname).await?;
            self.api
                .label_or_destroy(&dto.id, &with_parent(labels, id))
                .await?;
            self.api
                .start_keep_alive(&dto.id, crate::provider::DEFAULT_MAX_LIFETIME);
            Ok(Checkpoint {
                id: dto.id,
                how: format!(
                    "a fork of the sandbox (class `{class}`, Daytona's fork API: a copy of its filesystem), kept until the suite ends; the sandbox it was forked from is removed after it"
                ),
                home,
                host_bytes: None,
            })
        }
        .await;
        res.map_err(|e| self.redact(e))
    }

    async fn fork(&self, checkpoint: &Checkpoint, spec: &CreateSpec) -> ProviderResult<Forked> {
        let res = async {
            if is_snapshot(&checkpoint.id) {
                let dto = self
                    .api
                    .create_started_from(spec, Some(&checkpoint.id))
                    .await?;
                let info = self.adopt(dto, spec).await?;
                return Ok(Forked {
                    info,
                    how: format!(
                        "a sandbox created from snapshot {} of the setup's sandbox (class `container`: Daytona forks only `linux-vm` and `windows` sandboxes)",
                        checkpoint.id
                    ),
                });
            }
            // The checkpoint is kept alive while a proof forked from it
            // lives (the setup's run, which kept it alive, has ended):
            // stopped, its dead-man switch would delete it.
            let lifetime = if spec.max_lifetime.is_zero() {
                crate::provider::DEFAULT_MAX_LIFETIME
            } else {
                spec.max_lifetime
            };
            self.api.start_keep_alive(&checkpoint.id, lifetime);
            let dto = self
                .api
                .fork_started(&checkpoint.id, &sandbox_name(&spec.run_id))
                .await?;
            let labels = with_parent(&spec.labels, &checkpoint.id);
            self.api.label_or_destroy(&dto.id, &labels).await?;
            let mut dto = self
                .api
                .network_or_destroy(dto, &spec.isolation.network)
                .await?;
            dto.labels = Some(labels);
            let class = dto.sandbox_class.clone().unwrap_or_default();
            let info = self.adopt(dto, spec).await?;
            Ok(Forked {
                info,
                how: format!(
                    "a fork of checkpoint sandbox {} (class `{class}`, Daytona's fork API)",
                    checkpoint.id
                ),
            })
        }
        .await;
        res.map_err(|e| self.redact(e))
    }

    /// A snapshot: `DELETE /snapshots/{id}`. A forked sandbox: its own
    /// forks first (a proof's teardown that failed), then it, verified
    /// as a sandbox's teardown is.
    async fn remove_checkpoint(&self, id: &str) -> ProviderResult<()> {
        let res = async {
            if is_snapshot(id) {
                return self.api.remove_snapshot(id).await;
            }
            for child in self.api.fork_children(id).await? {
                self.api
                    .destroy_gone(&child.id, super::sandbox::GONE_WAIT)
                    .await?;
            }
            self.destroy(id).await?;
            self.api.destroy_gone(id, super::sandbox::GONE_WAIT).await
        }
        .await;
        res.map_err(|e| self.redact(e))
    }

    /// rfs's snapshots; forked checkpoints are sandboxes, in the list.
    async fn list_checkpoints(&self) -> ProviderResult<Vec<(String, Labels)>> {
        self.api.list_snapshots().await.map_err(|e| self.redact(e))
    }

    async fn checkpoint_exists(&self, id: &str) -> ProviderResult<bool> {
        let res = if is_snapshot(id) {
            self.api.get_snapshot(id).await.map(|s| s.is_some())
        } else {
            self.api.get_dto(id).await.map(|d| d.is_some())
        };
        res.map_err(|e| self.redact(e))
    }

    /// A forked checkpoint's source is its parent: Daytona deletes it only
    /// after its forks.
    fn holds_its_source(&self, checkpoint: &Checkpoint) -> Option<String> {
        (!is_snapshot(&checkpoint.id)).then(|| {
            format!(
                "checkpoint {} is a Daytona fork of this sandbox, and Daytona deletes no sandbox before its forks (\"Cannot delete sandbox which has active fork children\", sandbox.service.ts:2020-2029): it is destroyed after the checkpoint",
                checkpoint.id
            )
        })
    }
}
