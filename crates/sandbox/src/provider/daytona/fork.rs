//! Setup once, fork per proof on `daytona` (#36), through Daytona's fork
//! API (`POST /sandbox/{id}/fork`, body `ForkSandbox`): the answer is the
//! new sandbox (`forking`, then `started`), whose filesystem is a copy of
//! the source's. A checkpoint is such a fork of the setup's sandbox, kept
//! running (and alive) until the suite removes it, labelled as rfs's and
//! as a checkpoint (so `rfs gc` finds one a crashed rfs left); a proof's
//! sandbox is a fork of the checkpoint, relabelled as the proof's, given
//! the proof's network (a fork keeps its source's) and checked against
//! what the proof asked, as a created one is.

use async_trait::async_trait;
use reqwest::Method;
use serde_json::json;

use super::dto::SandboxDto;
use super::http::{enc, Call, Retry};
use super::sandbox::sandbox_name;
use super::{Api, DaytonaProvider};
use crate::provider::fork::{Checkpoint, Fork, Forked};
use crate::provider::{CreateSpec, Labels, Provider, ProviderError, ProviderResult};

impl Api {
    /// Fork sandbox `id` as `name` (never resent), and wait until the
    /// fork is started.
    async fn fork_started(&self, id: &str, name: &str) -> ProviderResult<SandboxDto> {
        let url = format!("{}/sandbox/{}/fork", self.http.config().api_url, enc(id));
        let call = Call::new("fork sandbox", Some(id), Method::POST, url)
            .retry(Retry::Never)
            .timeout(self.http.config().create_timeout);
        let body = json!({ "name": name });
        let dto = self
            .http
            .json::<SandboxDto>(&call, |r| r.json(&body))
            .await
            .map_err(|e| ProviderError::Provision(format!("cannot fork sandbox {id}: {e}")))?;
        self.remember(&dto);
        self.wait_started(dto).await
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
    /// source's: `POST /sandbox/{id}/network-settings`), or destroy it
    /// (verified) and say why; the sandbox as it is now. What the answer
    /// says is checked by [`DaytonaProvider::adopt`], as a created
    /// sandbox's fields are.
    async fn network_or_destroy(
        &self,
        dto: SandboxDto,
        policy: &crate::network::NetworkPolicy,
    ) -> ProviderResult<SandboxDto> {
        use super::network_fields::{network_fields, NetworkFields};
        let (block_all, allow_list) = match network_fields(policy) {
            Ok(NetworkFields::BlockAll) => (true, None),
            Ok(NetworkFields::AllowList(l)) => (false, Some(l)),
            Ok(NetworkFields::Open) => (false, None),
            // Refused before anything ran (the create's check); never open.
            Err(why) => {
                let cleanup = self.destroy_unused(&dto.id).await;
                return Err(ProviderError::Provision(format!(
                    "fork {} cannot hold the proof's network: {why}; {cleanup}",
                    dto.id
                )));
            }
        };
        let has = (
            dto.network_block_all == Some(true),
            dto.network_allow_list.clone().filter(|l| !l.is_empty()),
        );
        if has == (block_all, allow_list.clone()) {
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
            "networkAllowList": allow_list.unwrap_or_default(),
        });
        match self.http.json::<SandboxDto>(&call, |r| r.json(&body)).await {
            Ok(now) => Ok(now),
            Err(e) => {
                let cleanup = self.destroy_unused(&dto.id).await;
                Err(ProviderError::Provision(format!(
                    "cannot give fork {} the proof's network (it has its checkpoint's): {e}; {cleanup}",
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
            let home = self.get(id).await?.map(|i| i.home).unwrap_or_default();
            let cname = format!("rfs-checkpoint-{name}-{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
            let dto = self.api.fork_started(id, &cname).await?;
            self.api.label_or_destroy(&dto.id, labels).await?;
            self.api
                .start_keep_alive(&dto.id, crate::provider::DEFAULT_MAX_LIFETIME);
            Ok(Checkpoint {
                id: dto.id,
                how: "a fork of the sandbox (Daytona's fork API: a copy of its filesystem), kept until the suite ends".into(),
                home,
                host_bytes: None,
            })
        }
        .await;
        res.map_err(|e| self.redact(e))
    }

    async fn fork(&self, checkpoint: &Checkpoint, spec: &CreateSpec) -> ProviderResult<Forked> {
        let res = async {
            let dto = self
                .api
                .fork_started(&checkpoint.id, &sandbox_name(&spec.run_id))
                .await?;
            self.api.label_or_destroy(&dto.id, &spec.labels).await?;
            let mut dto = self
                .api
                .network_or_destroy(dto, &spec.isolation.network)
                .await?;
            dto.labels = Some(spec.labels.clone());
            let info = self.adopt(dto, spec).await?;
            Ok(Forked {
                info,
                how: format!(
                    "a fork of checkpoint sandbox {} (Daytona's fork API)",
                    checkpoint.id
                ),
            })
        }
        .await;
        res.map_err(|e| self.redact(e))
    }

    /// Deleted, then verified as a sandbox's teardown is: `GET` says 404
    /// and the list no longer has it (a `destroying` one is not gone).
    async fn remove_checkpoint(&self, id: &str) -> ProviderResult<()> {
        self.destroy(id).await?;
        self.api
            .destroy_gone(id, super::sandbox::GONE_WAIT)
            .await
            .map_err(|e| self.redact(e))
    }

    /// Daytona's checkpoints are sandboxes: in the sandbox list.
    async fn list_checkpoints(&self) -> ProviderResult<Vec<(String, Labels)>> {
        Ok(vec![])
    }

    async fn checkpoint_exists(&self, id: &str) -> ProviderResult<bool> {
        let d = self.api.get_dto(id).await.map_err(|e| self.redact(e))?;
        Ok(d.is_some())
    }
}
