//! Docker provider: one container per sandbox, driven through the Engine API
//! with bollard (never the `docker` CLI).
//!
//! * **Lifetime.** The container's main process is `sleep <max_lifetime>`
//!   under Docker's init, with `auto_remove`: when rfs dies without cleaning
//!   up, the container stops and removes itself once its lifetime is over (a
//!   dead-man switch; a zero lifetime means [`DEFAULT_MAX_LIFETIME`]). A
//!   container that removed itself reads as gone, exactly like one rfs
//!   destroyed. Images are never pulled: a missing image is an error.
//! * **Home.** The sandbox home is an anonymous volume carrying the
//!   sandbox's labels (files there bypass the storage driver's writable
//!   layer, a FUSE file system on rootless engines); it goes with the
//!   container, and destroy verifies that it did.
//! * **Commands** run under a tiny `sh` wrapper (module `wrapper`) that
//!   checks the executable and records the command's process group, so a
//!   timeout or a cancellation kills the whole group (and its session)
//!   inside the container. Runtime setup failures (missing cwd, missing
//!   executable) become [`ProviderError`](super::ProviderError)s naming the
//!   path or command and the sandbox. The image therefore needs `/bin/sh`,
//!   `cat`, `rm`, `sleep` and `id` (any busybox or coreutils image has them).
//!   Processes a command deliberately moves out of its session (`setsid`
//!   daemons) are not killed on timeout; they die with the sandbox.
//! * **Uploads** stream a single-entry tar built on the fly (module
//!   `upload`); the file keeps its local permission bits and belongs to the
//!   sandbox user. The source archive does not use them: it streams into
//!   the verification command's stdin while it is built
//!   ([`StreamInput::exec_with_input`](super::StreamInput::exec_with_input)), through the sandbox's stream lane
//!   (module `lane`: a FIFO of this machine bind-mounted into the
//!   container) when the daemon shares this machine's kernel, over the
//!   exec's attached connection otherwise.
//! * **rfs's own executable** (module `own_exe`) is linked into the
//!   stream lane (uploaded into the home where there is none) as one
//!   directory with its interpreter and libraries before a sync, probed,
//!   run as the native verifier and removed.
//!
//! The tests in `tests/docker_provider.rs` need a local engine; they build
//! the registry-free image `rfs-test-busybox:latest` themselves with
//! `scripts/docker-test-image.sh`.

mod client;
mod container;
mod egress;
mod exec;
pub mod exec_script;
mod fork;
mod hardening;
mod host_binds;
mod image;
mod lane_probe;
mod limits;
mod own_copy;
mod own_exe;
mod pty;
mod service;
mod stdin_fifo;
mod upload;
mod usage;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use async_trait::async_trait;

use super::{
    CreateSpec, ExecOutcome, ExecRequest, InputRoute, InputStream, Labels, NativeVerifier,
    OutputSink, Provider, ProviderError, ProviderResult, PtyChannel, PtyRequest, SandboxInfo,
    StreamInput,
};
use client::Client;
pub use container::DEFAULT_MAX_LIFETIME;
use exec::Feed;
use own_copy::Placed;
use stdin_fifo::Lane;

/// Environment variable naming the default image.
mod options;
pub use options::{image_from_env, DockerOptions, DEFAULT_HOME, IMAGE_ENV};

/// The Docker provider.
pub struct DockerProvider {
    client: Client,
    options: DockerOptions,
    owners: upload::Owners,
    /// rfs's executable, copied into a sandbox for the native verifier.
    own_exe: Option<PathBuf>,
    /// What `own_exe` needs to start in a container (found once).
    bundle: OnceLock<Result<own_exe::ExecutableBundle, String>>,
    /// Sandbox id -> where its copy of the bundle is.
    prepared: Mutex<HashMap<String, Placed>>,
    /// Sandbox id -> its stream lane, or why it has none.
    lanes: Mutex<HashMap<String, LaneState>>,
    /// Sandbox id -> its resource limits and their counters.
    limits_seen: limits::Seen,
    /// Sandbox id -> rfs's egress proxy serving it (filtered network).
    proxies: egress::Proxies,
}

/// A sandbox's stream lane.
#[derive(Clone)]
enum LaneState {
    /// Mounted (its probe runs on first use).
    Mounted(Arc<Lane>),
    /// Not mounted, and why.
    Refused(String),
}

impl DockerProvider {
    /// Connect to the daemon named by `DOCKER_HOST` (default: the local
    /// socket). Does not contact the daemon: [`Provider::preflight`] does.
    pub fn connect(options: DockerOptions) -> ProviderResult<Self> {
        Ok(DockerProvider {
            client: Client::connect()?,
            options,
            owners: upload::Owners::default(),
            own_exe: crate::provider::own_executable::executable().map(Path::to_path_buf),
            bundle: OnceLock::new(),
            prepared: Mutex::default(),
            lanes: Mutex::default(),
            limits_seen: limits::Seen::default(),
            proxies: egress::Proxies::default(),
        })
    }

    /// The same, copying `exe` (an rfs executable) into sandboxes as its
    /// own executable ([`NativeVerifier::exec_own_with_input`](super::NativeVerifier::exec_own_with_input)); `None` verifies
    /// every sync with the POSIX script.
    pub fn with_own_executable(mut self, exe: Option<PathBuf>) -> Self {
        self.own_exe = exe;
        self
    }

    fn prepared(&self) -> std::sync::MutexGuard<'_, HashMap<String, Placed>> {
        self.prepared.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn lanes(&self) -> std::sync::MutexGuard<'_, HashMap<String, LaneState>> {
        self.lanes.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Create a sandbox with a stream lane where the daemon can mount one,
    /// without one otherwise; the lane's state is kept for the sandbox.
    async fn create_with_lane(
        &self,
        spec: &CreateSpec,
        proxied: bool,
    ) -> ProviderResult<SandboxInfo> {
        let lane = if stdin_fifo::offered_for(self.client.host()) {
            Lane::new().map_err(|e| format!("cannot make a stream lane on this machine: {e}"))
        } else {
            Err(format!(
                "the daemon at {} is not on a local socket, so it cannot share a pipe with rfs",
                self.client.host()
            ))
        };
        let why = match lane {
            Ok(l) => match container::create(&self.client, &self.options, spec, Some(&l), proxied)
                .await
            {
                Ok(info) => {
                    let state = LaneState::Mounted(Arc::new(l));
                    self.lanes().insert(info.id.clone(), state);
                    return Ok(info);
                }
                Err(e) if container::is_mount_refusal(&e) => {
                    format!("the daemon cannot mount it ({e})")
                }
                Err(e) => return Err(e),
            },
            Err(why) => why,
        };
        let info = container::create(&self.client, &self.options, spec, None, proxied).await?;
        let state = LaneState::Refused(why);
        self.lanes().insert(info.id.clone(), state);
        Ok(info)
    }

    /// The sandbox's stream lane once it has passed its probe (run here
    /// on first use), or why the stream goes over the exec's connection.
    async fn lane(&self, id: &str) -> Result<Arc<Lane>, String> {
        let state = self.lanes().get(id).cloned().unwrap_or_else(|| {
            LaneState::Refused("the sandbox was not created by this rfs process".into())
        });
        let lane = match state {
            LaneState::Refused(why) => return Err(why),
            LaneState::Mounted(l) => l,
        };
        let user = self.options.user.as_deref();
        lane.ready(&self.client, id, user).await.map(|()| lane)
    }

    /// Keep `placed` as sandbox `id`'s copy, if its probe answers.
    async fn keep_if_it_starts(
        &self,
        id: &str,
        placed: Placed,
        bundle: &own_exe::ExecutableBundle,
    ) -> Result<(), String> {
        let user = self.options.user.as_deref();
        placed.probe(&self.client, id, user, bundle).await?;
        // A copy prepared earlier and never run is not left behind.
        let earlier = self.prepared().insert(id.to_string(), placed);
        if let Some(earlier) = earlier {
            earlier.remove(&self.client, id, user).await;
        }
        Ok(())
    }
}

#[async_trait]
impl Provider for DockerProvider {
    fn name(&self) -> &str {
        "docker"
    }

    /// The source archive streams into the verification's stdin, through
    /// the sandbox's stream lane or over the exec's attached connection:
    /// never written to a file on either side.
    fn forking(&self) -> Option<&dyn super::fork::Fork> {
        Some(self)
    }

    fn streaming(&self) -> Option<&dyn StreamInput> {
        Some(self)
    }

    /// Service containers in a sandbox's network namespace.
    fn services(&self) -> Option<&dyn super::Services> {
        Some(self)
    }

    /// A bind mount of the cache's folder (the daemon must run on this
    /// machine: one elsewhere refuses the bind at create).
    fn cache_mounts(&self, _req: &super::isolation::IsolationRequest) -> Result<(), String> {
        Ok(())
    }

    fn isolation(
        &self,
        req: &super::isolation::IsolationRequest,
    ) -> Result<super::isolation::IsolationInForce, super::isolation::IsolationError> {
        use super::isolation::{IsolationError, IsolationInForce, IsolationMode};
        req.check_host_reach()?;
        if matches!(req.mode, IsolationMode::None | IsolationMode::Gvisor) {
            return Err(IsolationError::ModeUnsupported {
                provider: "docker".into(),
                mode: req.mode,
                by: req.source.clone(),
                why: match req.mode {
                    IsolationMode::Gvisor => ": its sandboxes are containers of the engine's own runtime (gVisor is the `local` provider's)",
                    _ => ": its sandboxes are always containers",
                }
                .into(),
            });
        }
        use crate::network::NetworkPolicy;
        let enforced = match (&req.network, egress::proxied(self.client.host(), req)?) {
            (NetworkPolicy::Off, _) => {
                Some("Docker network mode `none` (only the container's loopback)")
            }
            (_, true) => Some(
                "rfs's egress proxy: network mode `none` (only the container's loopback) and the proxy at 127.0.0.1:3128 in the container's network namespace",
            ),
            // `"host"`, or nobody asked where rfs cannot place its proxy:
            // Docker's default bridge, said as unfiltered.
            (_, false) => None,
        };
        host_binds::check(self.client.host(), &self.options.home, req)?;
        Ok(IsolationInForce {
            mode: "container".into(),
            reason: format!(
                "a Docker container (isolation `{}` requested by {})",
                req.mode, req.source
            ),
            network: crate::network::fact(&req.network, &req.network_by, enforced),
        })
    }

    fn limits(
        &self,
        req: &super::limits::LimitsRequest,
    ) -> Result<super::limits::LimitsFact, super::limits::LimitsError> {
        limits::decide(req)
    }

    /// Read only after a command that did not succeed (an exec each).
    async fn limits_reached(&self, id: &str, ended_ok: bool) -> Vec<super::limits::LimitHit> {
        if ended_ok || container::check_id(id).is_err() {
            return vec![];
        }
        self.limits_seen.reached(&self.client, id).await
    }

    /// The container's memory and process peaks, from this host's cgroup
    /// files where the daemon keeps them (see `usage`).
    async fn usage(&self, id: &str, reset: bool) -> Option<super::limits::Usage> {
        container::check_id(id).ok()?;
        usage::read(id, reset)
    }

    async fn preflight(&self) -> ProviderResult<()> {
        self.client.ping().await
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        let proxied = egress::proxied(self.client.host(), &spec.isolation)
            .map_err(|e| ProviderError::Provision(e.to_string()))?;
        let info = self.create_with_lane(spec, proxied).await?;
        self.limits_seen
            .created(&info.id, spec.isolation.limits.values());
        if proxied {
            let started = match container::main_pid(&self.client, &info.id).await {
                Ok(pid) => {
                    self.proxies
                        .start(&info.id, pid, &spec.isolation.network)
                        .await
                }
                Err(e) => Err(e),
            };
            if let Err(e) = started {
                let _ = self.destroy(&info.id).await;
                return Err(e);
            }
        }
        Ok(info)
    }

    fn egress(&self, id: &str) -> Option<Arc<crate::network::EgressLog>> {
        self.proxies.log(id)
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        container::get(&self.client, &self.options, id).await
    }

    /// The image the container was created from, by id.
    async fn baked_env_names(&self, base: Option<&super::Base>) -> ProviderResult<Vec<String>> {
        match base
            .and_then(|b| b.image())
            .or(self.options.image.as_deref())
        {
            Some(name) => image::baked_env_names(&self.client, name).await,
            None => Ok(vec![]),
        }
    }

    async fn environment(&self, id: &str) -> ProviderResult<Option<crate::events::Environment>> {
        let image = image::pin(&self.client, id).await?;
        Ok(Some(crate::events::Environment {
            image: Some(image),
            host: None,
        }))
    }

    async fn list(&self, labels: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        container::list(&self.client, &self.options, labels).await
    }

    async fn upload(&self, id: &str, local: &Path, remote_path: &str) -> ProviderResult<()> {
        container::check_id(id)?;
        let owner = self
            .owners
            .resolve(&self.client, id, self.options.user.as_deref())
            .await?;
        upload::upload(&self.client, id, local, remote_path, owner).await
    }

    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        container::check_id(id)?;
        if self.proxies.log(id).is_some() {
            let mut req = req.clone();
            let mut env = crate::network::proxy_env();
            env.append(&mut req.env);
            req.env = env;
            return exec::run(&self.client, id, self.options.user.as_deref(), &req, sink).await;
        }
        exec::run(&self.client, id, self.options.user.as_deref(), req, sink).await
    }

    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        container::check_id(id)?;
        if self.proxies.log(id).is_some() {
            let mut req = req.clone();
            let mut env = crate::network::proxy_env();
            env.append(&mut req.env);
            req.env = env;
            return pty::open(&self.client, id, self.options.user.as_deref(), &req).await;
        }
        pty::open(&self.client, id, self.options.user.as_deref(), req).await
    }

    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        container::destroy(&self.client, id).await?;
        self.proxies.stop(id);
        self.owners.forget(id);
        self.limits_seen.forget(id);
        self.prepared().remove(id);
        self.lanes().remove(id);
        Ok(())
    }
}

#[async_trait]
impl StreamInput for DockerProvider {
    async fn input_route(&self, id: &str) -> InputRoute {
        if container::check_id(id).is_err() {
            return InputRoute::stdin();
        }
        match self.lane(id).await {
            Ok(_) => InputRoute {
                via: "fifo".into(),
                fallback: None,
            },
            Err(why) => InputRoute {
                via: "stdin".into(),
                fallback: Some(why),
            },
        }
    }

    async fn exec_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        container::check_id(id)?;
        let lane = self.lane(id).await.ok();
        let feed = match &lane {
            Some(l) => Feed::Lane(l),
            None => Feed::Stdin,
        };
        exec::run_with_input(
            &self.client,
            id,
            self.options.user.as_deref(),
            req,
            Some((input, feed)),
            sink,
        )
        .await
    }

    fn native(&self) -> Option<&dyn NativeVerifier> {
        self.own_exe
            .is_some()
            .then_some(self as &dyn NativeVerifier)
    }
}

#[async_trait]
impl NativeVerifier for DockerProvider {
    /// Links rfs's executable, its interpreter and libraries into the
    /// sandbox's lane (nothing to upload), or copies them into a new
    /// directory of the sandbox home where there is no lane or the copy
    /// there does not start, and runs its probe.
    async fn prepare_own_executable(&self, id: &str) -> ProviderResult<()> {
        container::check_id(id)?;
        let exe = self.own_exe.as_deref().ok_or_else(|| {
            ProviderError::Config("this process declared no rfs executable".into())
        })?;
        let bundle = self
            .bundle
            .get_or_init(|| own_exe::ExecutableBundle::of(exe))
            .clone()
            .map_err(|e| ProviderError::Io(format!("cannot copy rfs's executable: {e}")))?;
        if let Ok(lane) = self.lane(id).await {
            let why = match Placed::in_lane(lane, &bundle) {
                Ok(placed) => match self.keep_if_it_starts(id, placed, &bundle).await {
                    Ok(()) => return Ok(()),
                    Err(why) => why,
                },
                Err(e) => e.to_string(),
            };
            tracing::info!(sandbox = id, "uploading rfs's executable: {why}");
        }
        let owner = self
            .owners
            .resolve(&self.client, id, self.options.user.as_deref())
            .await?;
        let placed = Placed::upload(&self.client, id, &self.options.home, owner, &bundle).await?;
        self.keep_if_it_starts(id, placed, &bundle)
            .await
            .map_err(|why| {
                ProviderError::NotStarted(format!(
                    "rfs's executable does not start in sandbox {id} ({why})"
                ))
            })
    }

    /// Runs the copy made by [`Provider::prepare_own_executable`], then
    /// removes it, whatever the outcome.
    async fn exec_own_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        container::check_id(id)?;
        let placed = self.prepared().remove(id).ok_or_else(|| {
            ProviderError::NotStarted(format!(
                "rfs's executable was not copied into sandbox {id} before it was run"
            ))
        })?;
        let Some(Ok(bundle)) = self.bundle.get() else {
            return Err(ProviderError::Unsupported(
                "rfs's executable has no bundle".into(),
            ));
        };
        let mut run = req.clone();
        run.argv = bundle.program(placed.dir());
        run.argv.extend(req.argv.iter().skip(1).cloned());
        let r = self.exec_with_input(id, &run, input, sink).await;
        placed
            .remove(&self.client, id, self.options.user.as_deref())
            .await;
        r
    }
}

/// Connect with the run's default image, already resolved from `--image`
/// and `RFS_DOCKER_IMAGE` by the settings (read once, in one place).
pub fn connect_default(image: Option<String>) -> ProviderResult<DockerProvider> {
    DockerProvider::connect(DockerOptions {
        image,
        user: None,
        home: DEFAULT_HOME.to_string(),
    })
}

#[async_trait]
impl super::Services for DockerProvider {
    async fn start_service(
        &self,
        sandbox_id: &str,
        spec: &super::ServiceSpec,
    ) -> ProviderResult<super::ServiceStarted> {
        service::start(&self.client, sandbox_id, spec).await
    }

    async fn follow_service(
        &self,
        id: &str,
        sink: &mut dyn OutputSink,
        cancel: tokio_util::sync::CancellationToken,
    ) -> ProviderResult<ExecOutcome> {
        service::follow(&self.client, id, sink, cancel).await
    }

    async fn service_image(
        &self,
        image: &str,
        service: &str,
    ) -> ProviderResult<crate::events::ImagePin> {
        service::image(&self.client, image, service).await
    }

    async fn remove_service(&self, id: &str) -> ProviderResult<ExecOutcome> {
        service::remove(&self.client, id).await
    }
}
