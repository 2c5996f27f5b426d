//! Daytona provider: sandboxes through Daytona's REST API and, inside
//! them, its toolbox API (`{toolboxProxyUrl}/{id}`), written from the
//! published specs (see book/src/daytona.md for every quirk handled).
//!
//! * **Configuration** ([`config`]): `DAYTONA_API_KEY` (or a JWT with
//!   `DAYTONA_ORGANIZATION_ID`), `DAYTONA_API_URL`, `DAYTONA_TARGET`,
//!   default snapshot from `--snapshot` / `RELAYFLOWS_SANDBOX_SNAPSHOT`.
//!   The credential is redacted from everything the provider says.
//! * **HTTP** ([`http`]): per-request timeouts; idempotent calls retry with
//!   backoff and jitter on 429 (`Retry-After`), 5xx and connection errors;
//!   create and command exec are never resent.
//! * **Lifecycle** (`sandbox`): every rfs label, a unique name per run,
//!   auto-stop after [`Config::auto_stop_minutes`] idle minutes and
//!   auto-delete at stop (a dead-man switch), kept alive by rfs every
//!   [`Config::keep_alive_every`] (a quarter of the auto-stop interval by
//!   default) while the run lives (up to its max lifetime); bounded wait for `started`;
//!   ambiguous create failures are resolved by name/labels; delete once.
//! * **Commands** (`exec`): one toolbox session per command, async exec,
//!   polled status and logs; the wrapper (`wrapper`) sets cwd and env and
//!   records the process group, which timeouts and Ctrl-C kill.
//! * **Uploads** (`toolbox`): multipart, streamed from the file.
//! * **Terminals** (`pty`): the toolbox PTY over a rustls WebSocket.

mod agent;
pub mod config;
mod dto;
mod exec;
mod follow;
mod fork;
mod fork_lock;
pub mod http;
mod log_watch;
mod logs;
mod network_fields;
mod outcome;
mod pty;
mod relay;
pub mod resources;
pub mod sandbox;
mod session;
mod shell_text;
mod snapshot;
mod toolbox;
mod ws;

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{
    CreateSpec, ExecOutcome, ExecRequest, Labels, OutputSink, Profile, Provider, ProviderError,
    ProviderResult, PtyChannel, PtyRequest, SandboxInfo,
};
pub use config::{Config, ConfigError};
use dto::SandboxDto;
use http::Http;

/// Home assumed for sandboxes rfs did not create in this process (listing
/// only; rfs asks the toolbox for the real one of its own sandbox).
const DEFAULT_HOME: &str = "/home/daytona";

/// Shared state of the provider's calls.
#[derive(Clone)]
pub struct Api {
    http: Http,
    toolboxes: Arc<Mutex<HashMap<String, String>>>,
    homes: Arc<Mutex<HashMap<String, String>>>,
    keep_alive: Arc<Mutex<HashMap<String, CancellationToken>>>,
    /// Each sandbox's step agents (see [`agent`]).
    agents: Arc<Mutex<HashMap<String, agent::Pool>>>,
    /// Steps go through step agents (unless `RFS_DAYTONA_STEP_AGENT=off`).
    step_agents: bool,
    /// How long the last verified teardown took (the soft delete's lag).
    delete_lag: Arc<Mutex<Option<std::time::Duration>>>,
}

impl Api {
    fn remember(&self, d: &SandboxDto) {
        if let Some(u) = d.toolbox_proxy_url.as_deref().filter(|u| !u.is_empty()) {
            let base = format!("{}/{}", u.trim_end_matches('/'), http::enc(&d.id));
            lock(&self.toolboxes).insert(d.id.clone(), base);
        }
    }
    fn cached_toolbox(&self, id: &str) -> Option<String> {
        lock(&self.toolboxes).get(id).cloned()
    }
    fn forget(&self, id: &str) {
        lock(&self.agents).remove(id);
        lock(&self.toolboxes).remove(id);
        lock(&self.homes).remove(id);
        if let Some(t) = lock(&self.keep_alive).remove(id) {
            t.cancel();
        }
    }
    fn info(&self, d: &SandboxDto) -> SandboxInfo {
        let home =
            lock(&self.homes)
                .get(&d.id)
                .cloned()
                .unwrap_or_else(|| match d.user.as_deref() {
                    Some("root") => "/root".into(),
                    Some(u) if !u.is_empty() && !u.contains('/') => format!("/home/{u}"),
                    _ => DEFAULT_HOME.into(),
                });
        SandboxInfo {
            id: d.id.clone(),
            labels: d.labels(),
            home,
            state: d.state().to_owned(),
        }
    }

    /// Keep the sandbox from auto-stopping while this process lives, up to
    /// `lifetime` (then Daytona's auto-stop and auto-delete take over).
    fn start_keep_alive(&self, id: &str, lifetime: Duration) {
        let token = CancellationToken::new();
        if let Some(old) = lock(&self.keep_alive).insert(id.to_owned(), token.clone()) {
            old.cancel();
        }
        let api = self.clone();
        let id = id.to_owned();
        let end = tokio::time::Instant::now() + lifetime;
        let every = self
            .http
            .config()
            .keep_alive_every
            .max(Duration::from_millis(50));
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = token.cancelled() => return,
                    _ = tokio::time::sleep_until(end) => return,
                    _ = tokio::time::sleep(every) => {}
                }
                if let Err(e) = api.keep_alive(&id).await {
                    tracing::debug!(target: "rfs::daytona", sandbox = %id, error = %e, "keep-alive failed");
                    if e.status() == Some(404) {
                        return;
                    }
                }
            }
        });
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The Daytona provider.
pub struct DaytonaProvider {
    api: Api,
}

impl DaytonaProvider {
    /// A provider for `config`. Nothing is sent yet: [`Provider::preflight`]
    /// checks that the API answers and accepts the credential.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        Ok(DaytonaProvider {
            api: Api {
                http: Http::new(Arc::new(config))?,
                toolboxes: Default::default(),
                homes: Default::default(),
                keep_alive: Default::default(),
                agents: Default::default(),
                step_agents: std::env::var(config::STEP_AGENT_ENV)
                    .map_or(true, |v| v.trim() != "off"),
                delete_lag: Default::default(),
            },
        })
    }

    /// The provider configured from the environment (`snapshot`: the
    /// `--snapshot` flag, which beats `RELAYFLOWS_SANDBOX_SNAPSHOT`).
    pub fn from_env(snapshot: Option<String>) -> Result<Self, ConfigError> {
        Self::new(Config::from_env(snapshot)?)
    }

    fn redact(&self, e: ProviderError) -> ProviderError {
        let cfg = self.api.http.config();
        e.map_message(|m| cfg.redact(m))
    }
}

impl Drop for DaytonaProvider {
    fn drop(&mut self) {
        for (_, t) in lock(&self.api.keep_alive).drain() {
            t.cancel();
        }
    }
}

impl DaytonaProvider {
    /// A started sandbox made for `spec` (created, or forked): checked
    /// against what `spec` asked (network, resources; destroyed, verified,
    /// when it breaks them), its home asked of the toolbox, kept alive.
    async fn adopt(&self, dto: SandboxDto, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        if let Ok(network_fields::NetworkFields::Allow { cidrs, domains }) =
            network_fields::network_fields(&spec.isolation.network)
        {
            let has = |l: &Option<String>| l.clone().filter(|l| !l.is_empty());
            for (field, asked, got) in [
                ("networkAllowList", cidrs, has(&dto.network_allow_list)),
                ("domainAllowList", domains, has(&dto.domain_allow_list)),
            ] {
                if asked != got {
                    let cleanup = self.api.destroy_unused(&dto.id).await;
                    return Err(ProviderError::Provision(format!(
                        "sandbox {} has {field} {got:?} although {asked:?} was asked for (the server ignored or changed the field); {cleanup}",
                        dto.id
                    )));
                }
            }
        }
        if !spec.isolation.network.has_route() && dto.network_block_all != Some(true) {
            let cleanup = self.api.destroy_unused(&dto.id).await;
            return Err(ProviderError::Provision(format!(
                "sandbox {} was created without networkBlockAll although `network: false` asked for it (the server ignored the field); {cleanup}",
                dto.id
            )));
        }
        let want = resources::asked(&spec.isolation.limits);
        if let Some(why) = resources::exceeded(&dto, &want) {
            let cleanup = match self.api.destroy_gone(&dto.id, sandbox::GONE_WAIT).await {
                Ok(()) => "it was destroyed (verified gone) before anything ran".to_owned(),
                Err(d) => format!("destroying it could not be verified: {d}"),
            };
            return Err(ProviderError::Provision(format!(
                "sandbox {} breaks the resource limits asked ({}): {why}. A Daytona sandbox gets its snapshot's resources (the API takes none with a snapshot): use a smaller snapshot (--snapshot) or ask for limits it fits; {cleanup}",
                dto.id,
                want.describe()
            )));
        }
        let home = match self.api.home_dir(&dto.id).await {
            Ok(h) => h,
            Err(e) => {
                let cleanup = self.api.destroy_unused(&dto.id).await;
                return Err(ProviderError::Provision(format!(
                    "sandbox {} started but its toolbox does not answer ({e}); {cleanup}",
                    dto.id
                )));
            }
        };
        lock(&self.api.homes).insert(dto.id.clone(), home);
        let lifetime = if spec.max_lifetime.is_zero() {
            super::DEFAULT_MAX_LIFETIME
        } else {
            spec.max_lifetime
        };
        self.api.start_keep_alive(&dto.id, lifetime);
        Ok(self.api.info(&dto))
    }
}

#[async_trait]
impl Provider for DaytonaProvider {
    fn name(&self) -> &str {
        "daytona"
    }

    fn forking(&self) -> Option<&dyn super::fork::Fork> {
        Some(self)
    }

    /// Every byte goes over the network to Daytona: the source archive is
    /// gzip'd when the sandbox has gzip (then uploaded streamed from its
    /// file, see `toolbox`).
    fn profile(&self) -> Profile {
        Profile {
            starts_from: super::BaseKind::Snapshot,
            remote: true,
            exec_is_self_contained: false,
        }
    }

    /// `network: false` is Daytona's `networkBlockAll`; isolation modes
    /// other than the default are refused (a sandbox is always Daytona's).
    /// Refused: a cache is a folder of this machine, and a Daytona
    /// sandbox runs elsewhere. Daytona's volumes are kept on its side
    /// (FUSE-mounted object storage shared by the organization, no
    /// exclusive hold a run could take), so rfs could neither hold one
    /// for a run nor digest what it holds honestly.
    fn cache_mounts(&self, _req: &super::isolation::IsolationRequest) -> Result<(), String> {
        Err("provider `daytona` cannot mount a cache: a cache is a folder of this machine and a Daytona sandbox runs elsewhere; Daytona's own volumes are shared object storage rfs cannot lock for a run or digest (run with --provider local or docker to use caches)".into())
    }

    fn isolation(
        &self,
        req: &super::isolation::IsolationRequest,
    ) -> Result<super::isolation::IsolationInForce, super::isolation::IsolationError> {
        use super::isolation::{IsolationError, IsolationInForce, IsolationMode};
        req.refuse_host_mounts(
            "daytona",
            "a Daytona sandbox runs on Daytona's machines, which cannot see this machine's folders (run with --provider local or docker to mount one)",
        )?;
        if req.mode != IsolationMode::Auto {
            return Err(IsolationError::ModeUnsupported {
                provider: "daytona".into(),
                mode: req.mode,
                by: req.source.clone(),
                why: ": its sandboxes are always Daytona's".into(),
            });
        }
        let enforced = match network_fields::network_fields(&req.network) {
            Err(why) => {
                return Err(IsolationError::NetworkPolicyUnsupported {
                    provider: "daytona".into(),
                    policy: req.network.to_string(),
                    why,
                })
            }
            Ok(f) => f.describe(),
        };
        let reason = match &enforced {
            Some(d) => format!("a Daytona sandbox created with {d}"),
            None => "a Daytona sandbox".to_owned(),
        };
        let mut network = crate::network::fact(&req.network, &req.network_by, enforced.as_deref());
        if enforced.is_none() {
            network.enforced_by =
                "nothing rfs controls: Daytona's own network (the host running rfs, its loopback and LAN are not on it)".into();
        }
        Ok(IsolationInForce {
            mode: "provider".into(),
            reason,
            network,
        })
    }

    /// `cpus`, `memory` and `disk` in whole units, held by checking the
    /// created sandbox's resources (see [`resources`]).
    fn limits(
        &self,
        req: &super::limits::LimitsRequest,
    ) -> Result<super::limits::LimitsFact, super::limits::LimitsError> {
        resources::decide(req)
    }

    async fn preflight(&self) -> ProviderResult<()> {
        self.api.ping().await.map_err(|e| self.redact(e))
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        let res = async {
            let dto = self.api.create_started(spec).await?;
            self.adopt(dto, spec).await
        }
        .await;
        res.map_err(|e| self.redact(e))
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        let d = self.api.get_dto(id).await.map_err(|e| self.redact(e))?;
        Ok(d.map(|d| self.api.info(&d)))
    }

    async fn list(&self, labels: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        let l = self
            .api
            .list_dtos(labels)
            .await
            .map_err(|e| self.redact(e))?;
        Ok(fork::children_first(l)
            .iter()
            .map(|d| self.api.info(d))
            .collect())
    }

    async fn upload(&self, id: &str, local: &Path, remote_path: &str) -> ProviderResult<()> {
        self.api
            .upload(id, local, remote_path)
            .await
            .map_err(|e| self.redact(e))
    }

    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        self.api
            .exec(id, req, sink)
            .await
            .map_err(|e| self.redact(e))
    }

    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        self.api.open_pty(id, req).await.map_err(|e| self.redact(e))
    }

    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        // Stop keeping it alive first: the delete is what matters now.
        if let Some(t) = lock(&self.api.keep_alive).remove(id) {
            t.cancel();
        }
        // Its step agents end with it (their streams close).
        lock(&self.api.agents).remove(id);
        self.api.delete(id).await.map_err(|e| self.redact(e))
    }
}
