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
//!   ([`Provider::exec_with_input`]).
//!
//! The tests in `tests/docker_provider.rs` need a local engine; they build
//! the registry-free image `rfs-test-busybox:latest` themselves with
//! `scripts/docker-test-image.sh`.

mod client;
mod container;
mod exec;
mod pty;
mod upload;
pub(crate) mod wrapper;

use std::path::Path;

use async_trait::async_trait;

use super::{
    CreateSpec, ExecOutcome, ExecRequest, Labels, OutputSink, Provider, ProviderResult, PtyChannel,
    PtyRequest, SandboxInfo,
};
use client::Client;
pub use container::DEFAULT_MAX_LIFETIME;

/// Environment variable naming the default image.
pub const IMAGE_ENV: &str = "RFS_DOCKER_IMAGE";
/// Default home directory of the sandbox user.
pub const DEFAULT_HOME: &str = "/home/rfs";

/// How the Docker provider builds its sandboxes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerOptions {
    /// Image used when the [`CreateSpec`] names none. Never pulled: it must
    /// exist locally.
    pub image: Option<String>,
    /// User (`name`, `uid` or `uid:gid`) the container and every command run
    /// as; `None` keeps the image's default user.
    pub user: Option<String>,
    /// Home directory created (owned by `user`) in every sandbox.
    pub home: String,
}

impl DockerOptions {
    /// Options with the image taken from `RFS_DOCKER_IMAGE` (if set and not
    /// empty), no user override and the default home.
    pub fn from_env() -> Self {
        DockerOptions {
            image: image_from_env(),
            user: None,
            home: DEFAULT_HOME.to_string(),
        }
    }
}

impl Default for DockerOptions {
    /// Same as [`DockerOptions::from_env`].
    fn default() -> Self {
        Self::from_env()
    }
}

/// The Docker provider.
pub struct DockerProvider {
    client: Client,
    options: DockerOptions,
    owners: upload::Owners,
}

impl DockerProvider {
    /// Connect to the daemon named by `DOCKER_HOST` (default: the local
    /// socket). Does not contact the daemon: [`Provider::preflight`] does.
    pub fn connect(options: DockerOptions) -> ProviderResult<Self> {
        Ok(DockerProvider {
            client: Client::connect()?,
            options,
            owners: upload::Owners::default(),
        })
    }
}

#[async_trait]
impl Provider for DockerProvider {
    fn name(&self) -> &str {
        "docker"
    }

    fn isolation(
        &self,
        req: &super::isolation::IsolationRequest,
    ) -> Result<super::isolation::IsolationInForce, super::isolation::IsolationError> {
        use super::isolation::{IsolationError, IsolationInForce, IsolationMode};
        if req.mode == IsolationMode::None {
            return Err(IsolationError::ModeUnsupported {
                provider: "docker".into(),
                mode: req.mode,
                by: req.source.clone(),
                why: ": its sandboxes are always containers".into(),
            });
        }
        Ok(IsolationInForce {
            mode: "container".into(),
            reason: format!(
                "a Docker container (isolation `{}` requested by {})",
                req.mode, req.source
            ),
            network: req.network,
        })
    }

    async fn preflight(&self) -> ProviderResult<()> {
        self.client.ping().await
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        container::create(&self.client, &self.options, spec).await
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        container::get(&self.client, &self.options, id).await
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
        exec::run(&self.client, id, self.options.user.as_deref(), req, sink).await
    }

    /// The source archive streams into the verification's stdin over the
    /// exec's attached connection: never written to a file on either side.
    fn streams_input(&self) -> bool {
        true
    }

    async fn exec_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: super::InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        container::check_id(id)?;
        exec::run_with_input(
            &self.client,
            id,
            self.options.user.as_deref(),
            req,
            Some(input),
            sink,
        )
        .await
    }

    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        container::check_id(id)?;
        pty::open(&self.client, id, self.options.user.as_deref(), req).await
    }

    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        container::destroy(&self.client, id).await?;
        self.owners.forget(id);
        Ok(())
    }
}

/// `RFS_DOCKER_IMAGE`, unless unset, empty or only whitespace.
pub fn image_from_env() -> Option<String> {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
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
