//! The connection to the Docker daemon: address, API version negotiation and
//! the mapping of bollard errors to [`ProviderError`].

use std::sync::Arc;
use std::time::Duration;

use bollard::errors::Error as BollardError;
use bollard::Docker;
use tokio::sync::OnceCell;

use crate::provider::{ProviderError, ProviderResult};

/// Provider name used in [`ProviderError::Unavailable`].
const PROVIDER: &str = "docker";

/// The daemon address used when `DOCKER_HOST` is not set.
const DEFAULT_HOST: &str = "unix:///var/run/docker.sock";

/// Request timeout for uploads: the daemon answers only after the whole
/// archive has been received, which can take long for big files.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(6 * 60 * 60);

/// Seconds the daemon may take to create and start a sandbox container
/// (default [`START_TIMEOUT`]).
pub(super) const START_TIMEOUT_ENV: &str = "RFS_DOCKER_START_TIMEOUT";

/// How long the daemon may take to create and start a container by
/// default: a daemon on a loaded machine (a load average of 30 on two
/// cores) took longer than bollard's two minutes to answer a start.
pub(super) const START_TIMEOUT: Duration = Duration::from_secs(10 * 60);

/// The bound on creating and starting a container: `RFS_DOCKER_START_TIMEOUT`
/// (whole seconds, at least 1) or [`START_TIMEOUT`].
pub(super) fn start_timeout() -> ProviderResult<Duration> {
    match std::env::var(START_TIMEOUT_ENV) {
        Ok(v) if !v.trim().is_empty() => match v.trim().parse::<u64>() {
            Ok(s) if s > 0 => Ok(Duration::from_secs(s)),
            _ => Err(ProviderError::Config(format!(
                "{START_TIMEOUT_ENV}=`{v}` is not a whole number of seconds above 0"
            ))),
        },
        _ => Ok(START_TIMEOUT),
    }
}

/// A lazily negotiated connection to one daemon. Cheap to clone; clones
/// share the negotiation.
#[derive(Clone)]
pub(super) struct Client {
    docker: Docker,
    host: Arc<str>,
    negotiated: Arc<OnceCell<()>>,
    /// What this client waits for with a longer bound than a request's
    /// (see [`Client::patient`]), for the message when it runs out.
    waits_for: Option<&'static str>,
}

impl Client {
    /// Build a client for `DOCKER_HOST` (or the default local socket).
    /// Nothing is sent to the daemon yet.
    pub(super) fn connect() -> ProviderResult<Self> {
        let host = std::env::var("DOCKER_HOST")
            .ok()
            .filter(|h| !h.is_empty())
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        let docker = Docker::connect_with_host(&host).map_err(|e| unreachable_daemon(&host, &e))?;
        Ok(Client {
            docker,
            host: host.into(),
            negotiated: Arc::new(OnceCell::new()),
            waits_for: None,
        })
    }

    /// The same connection, each request bounded by `bound` instead of
    /// bollard's two minutes: for what a loaded daemon is slow to do
    /// (`what`: "create and start the container"), so that slow is not
    /// mistaken for not answering.
    pub(super) fn patient(&self, what: &'static str, bound: Duration) -> Client {
        Client {
            docker: self.docker.clone().with_timeout(bound),
            host: self.host.clone(),
            negotiated: self.negotiated.clone(),
            waits_for: Some(what),
        }
    }

    /// The daemon address, for messages.
    pub(super) fn host(&self) -> &str {
        &self.host
    }

    /// The API handle, after negotiating the API version once (so that an
    /// older daemon, e.g. API 1.41, is spoken to in its own version).
    pub(super) async fn api(&self) -> ProviderResult<&Docker> {
        self.negotiated
            .get_or_try_init(|| async {
                // Clones share the version, so negotiating on a clone
                // downgrades `self.docker` too.
                self.docker
                    .clone()
                    .negotiate_version()
                    .await
                    .map(|_| ())
                    .map_err(|e| self.error(e))
            })
            .await?;
        Ok(&self.docker)
    }

    /// An API handle with a long request timeout, for uploads.
    pub(super) async fn upload_api(&self) -> ProviderResult<Docker> {
        Ok(self.api().await?.clone().with_timeout(UPLOAD_TIMEOUT))
    }

    /// Check that the daemon answers.
    pub(super) async fn ping(&self) -> ProviderResult<()> {
        let api = self.api().await?;
        api.ping().await.map_err(|e| self.error(e))?;
        Ok(())
    }

    /// Map a bollard error: transport failures mean the daemon is
    /// unavailable, anything else is reported in the daemon's own words.
    pub(super) fn error(&self, e: BollardError) -> ProviderError {
        match e {
            BollardError::DockerResponseServerError {
                status_code,
                message,
            } => ProviderError::Api(format!("docker daemon: {message} (HTTP {status_code})")),
            BollardError::RequestTimeoutError => match self.waits_for {
                Some(what) => ProviderError::Timeout(format!(
                    "the Docker daemon at {} did not {what} within {} s (it did not answer the request at all in that time); \
                     set {START_TIMEOUT_ENV} (seconds) to wait longer",
                    self.host,
                    self.docker.timeout().as_secs()
                )),
                None => ProviderError::Unavailable {
                    provider: PROVIDER.into(),
                    message: format!(
                        "the Docker daemon at {} did not answer within {} s",
                        self.host,
                        self.docker.timeout().as_secs()
                    ),
                },
            },
            e @ (BollardError::IOError { .. }
            | BollardError::HyperResponseError { .. }
            | BollardError::HyperLegacyError { .. }
            | BollardError::HttpClientError { .. }
            | BollardError::SocketNotFoundError(_)) => unreachable_daemon(&self.host, &e),
            e => ProviderError::Api(format!("docker: {e}")),
        }
    }
}

/// The error for a daemon that cannot be reached at `host`.
fn unreachable_daemon(host: &str, e: &BollardError) -> ProviderError {
    ProviderError::Unavailable {
        provider: PROVIDER.into(),
        message: format!(
            "cannot reach the Docker daemon at {host} ({e}); is dockerd running? \
             Set DOCKER_HOST to use another daemon"
        ),
    }
}

/// The HTTP status of a daemon error, if it is one.
pub(super) fn status(e: &BollardError) -> Option<u16> {
    match e {
        BollardError::DockerResponseServerError { status_code, .. } => Some(*status_code),
        _ => None,
    }
}

/// The daemon's message of a daemon error, if it is one.
pub(super) fn server_message(e: &BollardError) -> Option<&str> {
    match e {
        BollardError::DockerResponseServerError { message, .. } => Some(message),
        _ => None,
    }
}
