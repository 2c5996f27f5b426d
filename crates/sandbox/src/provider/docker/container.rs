//! Container lifecycle: create (with the dead-man switch and the home
//! directory), get, list and verified destroy.

use std::collections::HashMap;
use std::time::Duration;

use bollard::models::{
    ContainerCreateBody, ContainerInspectResponse, HostConfig, Mount, MountType, MountVolumeOptions,
};
use bollard::query_parameters::{
    CreateContainerOptions, InspectContainerOptions, ListContainersOptionsBuilder,
    RemoveContainerOptionsBuilder, StartContainerOptions,
};

use super::client::{self, Client};
use super::exec::{self, ExecSpec};
use super::stdin_fifo::Lane;
use super::DockerOptions;
use crate::provider::{labels, CreateSpec, Labels, ProviderError, ProviderResult, SandboxInfo};

/// Lifetime used when a [`CreateSpec`] gives none (zero): one day.
pub const DEFAULT_MAX_LIFETIME: Duration = Duration::from_secs(24 * 60 * 60);
/// How long destroy waits for the daemon to report the container gone.
const DESTROY_VERIFY: Duration = Duration::from_secs(20);

/// True for a full Docker container id (64 lowercase hex digits). rfs only
/// ever addresses containers by exact id: the daemon would also accept a
/// name or an id prefix.
fn is_container_id(id: &str) -> bool {
    id.len() == 64
        && id
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Refuse anything but a full container id.
pub(super) fn check_id(id: &str) -> ProviderResult<()> {
    if is_container_id(id) {
        Ok(())
    } else {
        Err(ProviderError::Invalid(format!(
            "`{id}` is not a full docker container id"
        )))
    }
}

/// Whole seconds of the container's life (at least one).
fn lifetime_secs(max: Duration) -> u64 {
    let max = if max.is_zero() {
        DEFAULT_MAX_LIFETIME
    } else {
        max
    };
    let secs = max.as_secs() + u64::from(max.subsec_nanos() > 0);
    secs.max(1)
}

/// When a slow start is first said, and how often after that.
const SLOW_AFTER: Duration = Duration::from_secs(10);
const SLOW_EVERY: Duration = Duration::from_secs(30);
/// How long the progress line's ping may take.
const PING_WITHIN: Duration = Duration::from_secs(5);

/// Create and start a container (with `lane` mounted, if given; with
/// network mode `none` when `proxied`: rfs's egress proxy is its way
/// out), then create the home directory. A loaded daemon can take minutes for this:
/// each request waits up to [`client::start_timeout`] (not bollard's two
/// minutes), and from [`SLOW_AFTER`] on a line on stderr says the start
/// is slow, how long it has taken and whether the daemon still answers.
pub(super) async fn create(
    client: &Client,
    options: &DockerOptions,
    spec: &CreateSpec,
    lane: Option<&Lane>,
    proxied: bool,
) -> ProviderResult<SandboxInfo> {
    let bound = client::start_timeout()?;
    let patient = client.patient("create and start the container", bound);
    let work = create_started(&patient, options, spec, lane, proxied);
    said_when_slow(client, bound, work).await
}

/// `work`, with a line on stderr at [`SLOW_AFTER`] and every
/// [`SLOW_EVERY`] after it while it has not ended.
async fn said_when_slow<T>(
    client: &Client,
    bound: Duration,
    work: impl std::future::Future<Output = T>,
) -> T {
    let started = tokio::time::Instant::now();
    let ticker = async {
        let mut at = started + SLOW_AFTER;
        loop {
            tokio::time::sleep_until(at).await;
            let answers = match tokio::time::timeout(PING_WITHIN, client.ping()).await {
                Ok(Ok(())) => "it answers pings, so it is busy, not gone".to_owned(),
                Ok(Err(e)) => format!("a ping failed too: {e}"),
                Err(_) => format!(
                    "it did not answer a ping within {} s either",
                    PING_WITHIN.as_secs()
                ),
            };
            errln!(
                "rfs: the Docker daemon at {} is slow to start the container ({} s so far; {answers}); \
                 waiting up to {} s per request ({})",
                client.host(),
                started.elapsed().as_secs(),
                bound.as_secs(),
                client::START_TIMEOUT_ENV
            );
            at += SLOW_EVERY;
        }
    };
    tokio::select! {
        out = work => out,
        never = ticker => never,
    }
}

async fn create_started(
    client: &Client,
    options: &DockerOptions,
    spec: &CreateSpec,
    lane: Option<&Lane>,
    proxied: bool,
) -> ProviderResult<SandboxInfo> {
    let image = spec
        .base
        .as_ref()
        .and_then(|b| b.image())
        .or(options.image.as_deref())
        .filter(|i| !i.is_empty())
        .ok_or_else(|| {
            ProviderError::Provision(format!(
                "no docker image given: name one for the sandbox or set {}",
                super::IMAGE_ENV
            ))
        })?;
    if !options.home.starts_with('/') {
        return Err(ProviderError::Invalid(format!(
            "home directory `{}` is not an absolute path",
            options.home
        )));
    }
    let api = client.api().await?;
    let image_info = match api.inspect_image(image).await {
        Ok(info) => info,
        Err(e) if client::status(&e) == Some(404) => {
            return Err(ProviderError::Provision(format!(
                "docker image `{image}` is not present on the daemon at {}; rfs never pulls \
                 images: build, load or pull it first",
                client.host()
            )))
        }
        Err(e) => return Err(client.error(e)),
    };
    let owner = options.user.clone().or_else(|| {
        image_info
            .config
            .as_ref()
            .and_then(|c| c.user.clone())
            .filter(|u| !u.is_empty())
    });
    let as_root = super::hardening::is_root(owner.as_deref());
    let body = container_body(options, spec, image, lane, proxied, as_root)?;
    let created = api
        .create_container(None::<CreateContainerOptions>, body)
        .await
        .map_err(|e| client.error(e))?;
    // A limit the daemon dropped (a kernel without its cgroup) is refused,
    // never ignored.
    if let Some(refusal) = dropped_limits(&created.warnings) {
        let _ = destroy(client, &created.id).await;
        return Err(refusal);
    }
    match start_and_prepare(client, options, &created.id, owner.as_deref()).await {
        Ok(info) => Ok(info),
        Err(e) => {
            // Leave nothing behind; the creation error is what matters.
            let _ = destroy(client, &created.id).await;
            Err(e)
        }
    }
}

/// The container rfs creates for `spec`: `image` kept alive by `sleep`
/// for the sandbox's lifetime, its env, labels, limits, network and mounts
/// (the home volume, the lane, the caches).
fn container_body(
    options: &DockerOptions,
    spec: &CreateSpec,
    image: &str,
    lane: Option<&Lane>,
    proxied: bool,
    as_root: bool,
) -> ProviderResult<ContainerCreateBody> {
    let mut env = spec
        .env
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect::<Vec<_>>();
    // Caches are mounted under the sandbox's home: `~` in a command (and
    // a tool's `$HOME/.cache`) must mean that home, not the image user's.
    if !spec.caches.is_empty() {
        env.push(("HOME".into(), options.home.clone()));
    }
    // The resource limits (accepted by `Provider::limits`).
    let limits = super::limits::host_config(&spec.isolation.limits.values());
    Ok(ContainerCreateBody {
        image: Some(image.to_string()),
        entrypoint: Some(vec![
            "sleep".into(),
            lifetime_secs(spec.max_lifetime).to_string(),
        ]),
        user: options.user.clone(),
        env: Some(exec::env_entries(&env)?),
        labels: Some(
            spec.labels
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<HashMap<_, _>>(),
        ),
        host_config: Some(super::hardening::hardened(
            as_root,
            HostConfig {
                init: Some(true),
                auto_remove: Some(true),
                // `network: false`, and a filtered network (rfs's proxy is
                // placed in it after the start): no interfaces but the
                // container's own loopback.
                network_mode: (!spec.isolation.network.has_route() || proxied)
                    .then(|| "none".to_owned()),
                mounts: Some(
                    std::iter::once(home_volume(&options.home, &spec.labels))
                        .chain(lane.map(Lane::mount))
                        .chain(spec.caches.iter().map(|c| cache_bind(&options.home, c)))
                        .chain(super::host_binds::mounts(&spec.isolation.host_mounts))
                        .collect(),
                ),
                ..limits
            },
        )),
        ..Default::default()
    })
}

/// The refusal for resource limits the daemon said it did not apply
/// (its create warnings), if any.
pub(super) fn dropped_limits(warnings: &[String]) -> Option<ProviderError> {
    let dropped: Vec<&String> = warnings
        .iter()
        .filter(|w| {
            let w = w.to_ascii_lowercase();
            ["memory", "pids", "cpu", "swap"]
                .iter()
                .any(|k| w.contains(k))
        })
        .collect();
    (!dropped.is_empty()).then(|| {
        ProviderError::Provision(format!(
            "the Docker daemon did not apply the sandbox's resource limits: {}",
            dropped
                .iter()
                .map(|w| w.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        ))
    })
}

/// Whether a failed [`create`] was the daemon refusing a bind mount (its
/// source is not on the daemon's machine, say).
pub(super) fn is_mount_refusal(e: &ProviderError) -> bool {
    let ProviderError::Api(text) = e else {
        return false;
    };
    text.contains("bind source path") || text.contains("invalid mount config")
}

/// A cache (a folder of this machine, which the daemon's must be) bound
/// read-write under the sandbox's home; the daemon mounts it after the
/// home's volume (deeper targets after shallower ones).
fn cache_bind(home: &str, c: &crate::provider::CacheMount) -> Mount {
    Mount {
        target: Some(format!(
            "{}/{}",
            home.trim_end_matches('/'),
            c.home_relative
        )),
        source: Some(c.host_dir.to_string_lossy().into_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(false),
        ..Default::default()
    }
}

/// The sandbox home as an anonymous volume carrying the sandbox's labels.
///
/// A volume lives on the daemon host's own filesystem, not in the
/// container's writable layer: under a FUSE storage driver
/// (`fuse-overlayfs`, rootless engines) every file created in the layer is
/// a round trip through a user-space process, and extracting the synced
/// tree there took several times longer than into a volume. Anonymous, it
/// is removed with the container (`auto_remove`, and `v` on destroy, which
/// verifies it is gone); labelled, `rfs gc` and a reviewer can tell whose
/// it is if a daemon ever keeps one.
fn home_volume(home: &str, labels: &crate::provider::Labels) -> Mount {
    Mount {
        target: Some(home.to_owned()),
        typ: Some(MountType::VOLUME),
        volume_options: Some(MountVolumeOptions {
            labels: Some(labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// Start the container and create the home directory owned by `owner`.
async fn start_and_prepare(
    client: &Client,
    options: &DockerOptions,
    id: &str,
    owner: Option<&str>,
) -> ProviderResult<SandboxInfo> {
    let api = client.api().await?;
    api.start_container(id, None::<StartContainerOptions>)
        .await
        .map_err(|e| {
            ProviderError::Provision(format!(
                "cannot start sandbox container {id}: {}",
                client.error(e)
            ))
        })?;
    let mut argv = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        r#"mkdir -p "$1" && { [ -z "$2" ] || chown "$2" "$1"; }"#.to_string(),
        "rfs-home".to_string(),
        options.home.clone(),
    ];
    argv.extend(owner.map(str::to_string));
    let spec = ExecSpec {
        argv,
        cwd: "/",
        env: &[],
        user: Some(exec::ROOT),
        tty: false,
        stdin: false,
    };
    let (code, out) =
        exec::run_collect(client, id, spec, exec::Helper::small("the home's mkdir")).await?;
    if code != Some(0) {
        return Err(ProviderError::Provision(format!(
            "cannot create home directory {} in sandbox {id} ({}): {}{}",
            options.home,
            crate::exit_code::ExitText(code),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    get(client, options, id).await?.ok_or_else(|| {
        ProviderError::Provision(format!(
            "sandbox container {id} vanished right after creation"
        ))
    })
}

/// The pid (on this machine) of a running container's main process.
pub(super) async fn main_pid(client: &Client, id: &str) -> ProviderResult<i64> {
    inspect(client, id)
        .await?
        .and_then(|i| i.state.and_then(|s| s.pid))
        .filter(|p| *p > 0)
        .ok_or_else(|| {
            ProviderError::Provision(format!("sandbox container {id} has no running process"))
        })
}

/// Inspect a container; `None` when the daemon does not know it.
pub(super) async fn inspect(
    client: &Client,
    id: &str,
) -> ProviderResult<Option<ContainerInspectResponse>> {
    let api = client.api().await?;
    match api
        .inspect_container(id, None::<InspectContainerOptions>)
        .await
    {
        Ok(info) => Ok(Some(info)),
        Err(e) if client::status(&e) == Some(404) => Ok(None),
        Err(e) => Err(client.error(e)),
    }
}

/// A sandbox by exact id.
pub(super) async fn get(
    client: &Client,
    options: &DockerOptions,
    id: &str,
) -> ProviderResult<Option<SandboxInfo>> {
    if !is_container_id(id) {
        return Ok(None);
    }
    let Some(info) = inspect(client, id).await? else {
        return Ok(None);
    };
    if info.id.as_deref() != Some(id) {
        return Ok(None);
    }
    Ok(Some(SandboxInfo {
        id: id.to_string(),
        labels: info
            .config
            .and_then(|c| c.labels)
            .unwrap_or_default()
            .into_iter()
            .collect(),
        home: options.home.clone(),
        state: info
            .state
            .and_then(|s| s.status)
            .map(|s| s.to_string())
            .unwrap_or_else(|| "unknown".into()),
    }))
}

/// Every container (running or not) carrying all of `want`.
pub(super) async fn list(
    client: &Client,
    options: &DockerOptions,
    want: &Labels,
) -> ProviderResult<Vec<SandboxInfo>> {
    let api = client.api().await?;
    let selector: Vec<String> = want.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let mut filters = HashMap::new();
    if !selector.is_empty() {
        filters.insert("label".to_string(), selector);
    }
    let opts = ListContainersOptionsBuilder::default()
        .all(true)
        .filters(&filters)
        .build();
    let found = api
        .list_containers(Some(opts))
        .await
        .map_err(|e| client.error(e))?;
    Ok(found
        .into_iter()
        .filter_map(|c| {
            let have: Labels = c.labels.unwrap_or_default().into_iter().collect();
            // The daemon filtered already; re-check so a filter quirk can
            // never widen the selection.
            labels::matches(&have, want).then_some(SandboxInfo {
                id: c.id?,
                labels: have,
                home: options.home.clone(),
                state: c
                    .state
                    .map(|s| s.to_string())
                    .unwrap_or_else(|| "unknown".into()),
            })
        })
        .collect())
}

/// Force-remove a container with its anonymous volumes and verify that the
/// daemon no longer knows it. Already gone is success.
pub(super) async fn destroy(client: &Client, id: &str) -> ProviderResult<()> {
    check_id(id)?;
    let api = client.api().await?;
    // The volumes to check afterwards: the home, and any other anonymous
    // one (a container already gone has none left to name).
    let volumes = inspect(client, id)
        .await?
        .map(|c| anonymous_volumes(&c))
        .unwrap_or_default();
    let opts = RemoveContainerOptionsBuilder::default()
        .force(true)
        .v(true)
        .build();
    let deadline = tokio::time::Instant::now() + DESTROY_VERIFY;
    loop {
        match api.remove_container(id, Some(opts.clone())).await {
            Ok(()) => {}
            // Gone already, or an auto-removal is in progress.
            Err(e) if matches!(client::status(&e), Some(404 | 409)) => {}
            Err(e) => return Err(client.error(e)),
        }
        for _ in 0..10 {
            if inspect(client, id).await?.is_none() {
                return destroy_volumes(client, id, &volumes, deadline).await;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ProviderError::NotVerifiedGone(format!(
                    "sandbox container {id} still exists {}s after its removal",
                    DESTROY_VERIFY.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The names of a container's volumes that Docker created for it (no
/// named volume a user mounted is ever touched).
fn anonymous_volumes(c: &ContainerInspectResponse) -> Vec<String> {
    let names: Vec<String> = c
        .mounts
        .iter()
        .flatten()
        .filter(|m| m.typ.as_deref() == Some("volume"))
        .filter_map(|m| m.name.clone())
        .collect();
    // Anonymous volumes are named by a 64-hex id, like containers.
    names.into_iter().filter(|n| is_container_id(n)).collect()
}

/// After the container is gone: each of its anonymous volumes must be
/// gone too (removed with it by `v`); one the daemon kept is removed and
/// polled until it is, within the destroy deadline.
async fn destroy_volumes(
    client: &Client,
    id: &str,
    volumes: &[String],
    deadline: tokio::time::Instant,
) -> ProviderResult<()> {
    let api = client.api().await?;
    for name in volumes {
        loop {
            match api.inspect_volume(name).await {
                Err(e) if client::status(&e) == Some(404) => break,
                Err(e) => return Err(client.error(e)),
                Ok(_) => {}
            }
            match api
                .remove_volume(name, None::<bollard::query_parameters::RemoveVolumeOptions>)
                .await
            {
                Ok(()) => {}
                // Gone meanwhile, or still held while the removal finishes.
                Err(e) if matches!(client::status(&e), Some(404 | 409)) => {}
                Err(e) => return Err(client.error(e)),
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(ProviderError::NotVerifiedGone(format!(
                    "volume {name} of sandbox container {id} still exists {}s after its removal",
                    DESTROY_VERIFY.as_secs()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The daemon's refusal of a bind source it cannot see (Docker 20.10
    /// and 28, as rfs maps it) means "create without the lane"; other
    /// failures are the creation's own.
    #[test]
    fn a_bind_source_the_daemon_cannot_see_is_a_mount_refusal() {
        let refused = ProviderError::Api(
            "docker daemon: invalid mount config for type \"bind\": bind source path does not \
             exist: /tmp/rfs-lane-1-2-x/in.d (HTTP 400)"
                .into(),
        );
        assert!(is_mount_refusal(&refused));
        let other = ProviderError::Provision(
            "docker image `nope` is not present on the daemon at unix:///var/run/docker.sock"
                .into(),
        );
        assert!(!is_mount_refusal(&other));
    }

    #[test]
    fn lifetime_rounds_up_and_defaults() {
        assert_eq!(lifetime_secs(Duration::from_millis(1500)), 2);
        assert_eq!(lifetime_secs(Duration::from_secs(30)), 30);
        assert_eq!(lifetime_secs(Duration::from_millis(1)), 1);
        assert_eq!(
            lifetime_secs(Duration::ZERO),
            DEFAULT_MAX_LIFETIME.as_secs()
        );
    }

    #[test]
    fn only_full_ids_are_ids() {
        assert!(is_container_id(&"a1".repeat(32)));
        assert!(!is_container_id("a1b2"));
        assert!(!is_container_id(&"A1".repeat(32)));
        assert!(!is_container_id(&"g1".repeat(32)));
    }
}
