//! Service containers ([`crate::provider::Services`]): a container of an
//! image present on the daemon (never pulled), in the network namespace
//! of a sandbox container (`network_mode: container:<id>`), so it has
//! exactly the sandbox's network: its loopback, and whatever route the
//! sandbox has (none with `network: false` or a filtered network, whose
//! only way out is rfs's proxy). It holds only the sandbox container's
//! capabilities, with `no-new-privileges` ([`super::hardening`]).
//!
//! It carries the sandbox's labels (so `rfs sandboxes` and `rfs gc` find
//! it as they find the sandbox) and its own. Removal is forced with its
//! anonymous volumes and verified: the daemon no longer knows it.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{
    CreateContainerOptions, LogsOptionsBuilder, StartContainerOptions, StopContainerOptions,
};
use futures_util::StreamExt as _;
use tokio_util::sync::CancellationToken;

use super::client::{self, Client};
use super::container::{check_id, destroy, inspect};
use crate::provider::services::{ServiceSpec, ServiceStarted, SERVICE_LABEL, SERVICE_OF_LABEL};
use crate::provider::{ExecOutcome, OutputSink, ProviderError, ProviderResult};

/// How long a service is given to end on SIGTERM before it is killed.
const STOP_GRACE_S: i32 = 5;

/// The network (and PID) mode that puts a container in sandbox `id`'s
/// namespace.
fn shared_network(id: &str) -> String {
    format!("container:{id}")
}

/// The image `image` names on the daemon, by content; refused when it is
/// not there (rfs never pulls).
pub(super) async fn image(
    client: &Client,
    image: &str,
    service: &str,
) -> ProviderResult<crate::events::ImagePin> {
    let api = client.api().await?;
    let info = match api.inspect_image(image).await {
        Ok(info) => info,
        Err(e) if client::status(&e) == Some(404) => {
            return Err(ProviderError::Provision(format!(
                "docker image `{image}` of service `{service}` is not present on the daemon at {}; rfs never pulls images: build, load or pull it first",
                client.host()
            )))
        }
        Err(e) => return Err(client.error(e)),
    };
    let id = info
        .id
        .filter(|i| super::image::is_image_id(i))
        .ok_or_else(|| {
            ProviderError::Provision(format!(
                "the docker daemon at {} does not say which image `{image}` is",
                client.host()
            ))
        })?;
    let mut repo_digests = info.repo_digests.unwrap_or_default();
    repo_digests.sort();
    Ok(crate::events::ImagePin { id, repo_digests })
}

/// Create and start the service; removed again if anything fails. It
/// gets the sandbox's resource limits (memory, processes, cpus): a
/// service is bounded as the sandbox is, never more.
pub(super) async fn start(
    client: &Client,
    sandbox_id: &str,
    spec: &ServiceSpec,
) -> ProviderResult<ServiceStarted> {
    check_id(sandbox_id)?;
    let api = client.api().await?;
    let sandbox = inspect(client, sandbox_id)
        .await?
        .filter(|c| c.state.as_ref().and_then(|s| s.running) == Some(true))
        .ok_or_else(|| {
            ProviderError::NotRunning(format!(
                "sandbox container {sandbox_id} is not running: service `{}` cannot join its network",
                spec.name
            ))
        })?;
    let limits = sandbox.host_config.unwrap_or_default();
    let mut labels: HashMap<String, String> = spec.labels.clone().into_iter().collect();
    labels.insert(SERVICE_LABEL.into(), spec.name.clone());
    labels.insert(SERVICE_OF_LABEL.into(), sandbox_id.into());
    let body = ContainerCreateBody {
        image: Some(spec.image.clone()),
        cmd: spec.cmd.clone(),
        env: Some(super::exec::env_entries(&spec.env)?),
        labels: Some(labels),
        host_config: Some(super::hardening::hardened(
            true,
            HostConfig {
                // In the sandbox's PID namespace, whose init (the sandbox's
                // `sleep` of --max-lifetime, under docker-init) reaps it: when
                // the sandbox ends — its lifetime over though rfs was killed —
                // every process of the service is killed with it.
                init: Some(false),
                pid_mode: Some(shared_network(sandbox_id)),
                network_mode: Some(shared_network(sandbox_id)),
                memory: limits.memory,
                memory_swap: limits.memory_swap,
                pids_limit: limits.pids_limit,
                nano_cpus: limits.nano_cpus,
                shm_size: limits.shm_size,
                ..Default::default()
            },
        )),
        ..Default::default()
    };
    let created = api
        .create_container(None::<CreateContainerOptions>, body)
        .await
        .map_err(|e| client.error(e))?;
    // A limit the daemon dropped is refused, as the sandbox's is.
    let checked = match super::container::dropped_limits(&created.warnings) {
        Some(refusal) => Err(refusal),
        None => started(client, sandbox_id, &created.id, spec).await,
    };
    if checked.is_err() {
        let _ = destroy(client, &created.id).await;
    }
    checked
}

/// Start it, check it has the sandbox's network and pin its image.
async fn started(
    client: &Client,
    sandbox_id: &str,
    id: &str,
    spec: &ServiceSpec,
) -> ProviderResult<ServiceStarted> {
    let api = client.api().await?;
    api.start_container(id, None::<StartContainerOptions>)
        .await
        .map_err(|e| {
            ProviderError::Provision(format!(
                "cannot start service `{}` (container {id}): {}",
                spec.name,
                client.error(e)
            ))
        })?;
    let network = inspect(client, id)
        .await?
        .and_then(|c| c.host_config.and_then(|h| h.network_mode))
        .unwrap_or_default();
    if network != shared_network(sandbox_id) {
        return Err(ProviderError::Provision(format!(
            "service `{}` was given network `{network}` by the daemon, not sandbox {sandbox_id}'s: refused",
            spec.name
        )));
    }
    let image = super::image::pin(client, id).await?;
    Ok(ServiceStarted {
        id: id.to_owned(),
        image,
        network,
    })
}

/// Stream its logs into `sink` until it ends (or `cancel`).
pub(super) async fn follow(
    client: &Client,
    id: &str,
    sink: &mut dyn OutputSink,
    cancel: CancellationToken,
) -> ProviderResult<ExecOutcome> {
    check_id(id)?;
    let api = client.api().await?;
    let opts = LogsOptionsBuilder::new()
        .follow(true)
        .stdout(true)
        .stderr(true)
        .build();
    let mut logs = api.logs(id, Some(opts));
    loop {
        tokio::select! {
            _ = cancel.cancelled() => {
                return Ok(ExecOutcome { cancelled: true, ..Default::default() });
            }
            item = logs.next() => match item {
                Some(Ok(out)) => super::exec::route_plain(out, sink),
                Some(Err(e)) => return Err(client.error(e)),
                None => break,
            },
        }
    }
    ended(client, id).await
}

/// How the container ended (its exit code, once it is not running).
async fn ended(client: &Client, id: &str) -> ProviderResult<ExecOutcome> {
    // The log stream ends a moment before the daemon says it exited.
    for _ in 0..50 {
        let state = inspect(client, id).await?.and_then(|c| c.state);
        match state {
            None => return Ok(ExecOutcome::default()),
            Some(s) if s.running != Some(true) => {
                return Ok(ExecOutcome {
                    exit: s.exit_code.and_then(|c| i32::try_from(c).ok()),
                    ..Default::default()
                })
            }
            Some(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
    Ok(ExecOutcome::default())
}

/// Stop it (SIGTERM, then SIGKILL after [`STOP_GRACE_S`]), remove it
/// verified gone; how it ended.
pub(super) async fn remove(client: &Client, id: &str) -> ProviderResult<ExecOutcome> {
    check_id(id)?;
    let api = client.api().await?;
    let opts = StopContainerOptions {
        t: Some(STOP_GRACE_S),
        signal: None,
    };
    match api.stop_container(id, Some(opts)).await {
        Ok(()) => {}
        // Gone, or not running.
        Err(e) if matches!(client::status(&e), Some(304 | 404)) => {}
        Err(e) => return Err(client.error(e)),
    }
    let outcome = ended(client, id).await?;
    destroy(client, id).await?;
    Ok(outcome)
}
