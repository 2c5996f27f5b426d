//! The provider seam: everything rfs does to a sandbox goes through [`Provider`].
//!
//! The trait is shaped for remote providers: a sandbox path is a *remote* path
//! (a `String`, never a host `Path`), uploads take a local file and a remote
//! destination, and interactive sessions are byte streams over channels.

pub mod daytona;
pub mod docker;
pub mod fork;
pub mod host_mount;
pub mod input;
pub mod isolation;
pub mod labels;
pub mod limits;
pub mod local;
pub mod output_sink;
pub mod own_executable;
pub mod owner;
pub mod process_group;
pub mod registry;
pub mod select;
pub mod services;
pub mod supervisor;
pub mod traced;
pub mod unavailable;
pub mod wrapper;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

pub use labels::Labels;
pub use output_sink::{
    BoundedCollect, Collect, OutputSink, PROBE_OUTPUT, TREE_REPORT_OUTPUT, TREE_REPORT_STDERR,
};
pub use services::{ServiceSpec, ServiceStarted, Services};

/// Result type of provider calls. A failure is a kind a caller can match,
/// with the provider's message; the runtime decides whether it is a
/// refusal or an internal error.
pub type ProviderResult<T> = Result<T, ProviderError>;

/// What went wrong inside a provider: the kind, with a message that
/// names the sandbox and says why in the provider's own words.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// The provider (daemon, API) cannot be reached or is not usable.
    #[error("provider {provider} is unavailable: {message}")]
    Unavailable { provider: String, message: String },
    /// The sandbox does not exist (any more).
    #[error("sandbox {id} not found")]
    NotFound { id: String },
    /// Refused before the provider was asked: the request is malformed
    /// (an empty command, a relative path, an invalid environment variable).
    #[error("{0}")]
    Invalid(String),
    /// The provider's configuration is missing or invalid (an unknown
    /// provider name, no API key, no rfs executable to copy).
    #[error("{0}")]
    Config(String),
    /// The provider has no such capability for this sandbox.
    #[error("{0}")]
    Unsupported(String),
    /// Provisioning failed: the image or snapshot, the sandbox's start,
    /// a setting the provider ignored.
    #[error("{0}")]
    Provision(String),
    /// The sandbox exists but is not running.
    #[error("{0}")]
    NotRunning(String),
    /// The command could not be started in the sandbox (a missing working
    /// directory, not an executable, the toolbox's refusal).
    #[error("{0}")]
    NotStarted(String),
    /// A file or archive could not be placed in the sandbox.
    #[error("{0}")]
    Transfer(String),
    /// A command's process group could not be killed.
    #[error("{0}")]
    Kill(String),
    /// The provider's API or daemon answered with an error, in its own
    /// words.
    #[error("{0}")]
    Api(String),
    /// The provider's answer breaks its API's contract (no command id, a
    /// relative home directory, a list that never ends).
    #[error("{0}")]
    Protocol(String),
    /// Reading or writing on rfs's side (a local file, a pipe, a stream).
    #[error("{0}")]
    Io(String),
    /// No answer within the bound rfs sets.
    #[error("{0}")]
    Timeout(String),
    /// The sandbox was paused, killed or removed outside rfs while rfs
    /// waited on it.
    #[error("{0}")]
    Lost(String),
    /// Destroyed, but not verified gone within the bound.
    #[error("{0}")]
    NotVerifiedGone(String),
    /// A helper rfs ran in a sandbox wrote more than rfs reads from it
    /// (issue #43: what a sandbox sends is bounded, and the bound said):
    /// rfs stopped reading and abandoned it.
    #[error("{helper} sent more than {bound} bytes on its {stream}, the most rfs reads from it: rfs stopped reading and abandoned it")]
    OutputBound {
        helper: String,
        stream: &'static str,
        bound: u64,
    },
}

impl ProviderError {
    /// The same error with its message rewritten (redaction of secrets).
    pub fn map_message(self, f: impl Fn(&str) -> String) -> Self {
        use ProviderError as E;
        match self {
            E::Unavailable { provider, message } => E::Unavailable {
                provider,
                message: f(&message),
            },
            E::NotFound { id } => E::NotFound { id },
            E::Invalid(m) => E::Invalid(f(&m)),
            E::Config(m) => E::Config(f(&m)),
            E::Unsupported(m) => E::Unsupported(f(&m)),
            E::Provision(m) => E::Provision(f(&m)),
            E::NotRunning(m) => E::NotRunning(f(&m)),
            E::NotStarted(m) => E::NotStarted(f(&m)),
            E::Transfer(m) => E::Transfer(f(&m)),
            E::Kill(m) => E::Kill(f(&m)),
            E::Api(m) => E::Api(f(&m)),
            E::Protocol(m) => E::Protocol(f(&m)),
            E::Io(m) => E::Io(f(&m)),
            E::Timeout(m) => E::Timeout(f(&m)),
            E::Lost(m) => E::Lost(f(&m)),
            E::NotVerifiedGone(m) => E::NotVerifiedGone(f(&m)),
            E::OutputBound {
                helper,
                stream,
                bound,
            } => E::OutputBound {
                helper: f(&helper),
                stream,
                bound,
            },
        }
    }
}

/// What the runtime asks for when it provisions the run's sandbox.
#[derive(Debug, Clone, Default)]
pub struct CreateSpec {
    pub run_id: String,
    pub labels: Labels,
    /// Environment baked into the sandbox (if the provider supports it).
    pub env: BTreeMap<String, String>,
    /// What the sandbox starts from (a docker image, a Daytona snapshot),
    /// as the provider's [`Profile::starts_from`] names it; a provider
    /// ignores a kind it does not start from, and its own default applies
    /// when `None`.
    pub base: Option<Base>,
    /// Upper bound on the sandbox's life: a dead-man switch for providers
    /// that support one, so a killed rfs cannot leak a sandbox forever.
    pub max_lifetime: Duration,
    /// Isolation and network asked for (already accepted by
    /// [`Provider::isolation`]).
    pub isolation: isolation::IsolationRequest,
    /// Folders of this machine to mount read-write inside the sandbox's
    /// home (accepted by [`Provider::cache_mounts`]; empty: none).
    pub caches: Vec<CacheMount>,
}

/// A folder kept by rfs between runs, mounted read-write into a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CacheMount {
    pub name: String,
    /// The folder on this machine (rfs holds its lock).
    pub host_dir: std::path::PathBuf,
    /// Where it goes, relative to the sandbox user's home (`.cache/pip`).
    pub home_relative: String,
}

/// A sandbox as the provider reports it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxInfo {
    /// The exact provider id.
    pub id: String,
    pub labels: Labels,
    /// Absolute remote path of the sandbox user's home directory.
    pub home: String,
    /// Provider-reported state (`running`, `exited`, ...), informational.
    pub state: String,
}

/// One command to run in a sandbox.
#[derive(Debug, Clone)]
pub struct ExecRequest {
    /// argv; providers never wrap this in a login shell.
    pub argv: Vec<String>,
    /// Absolute remote working directory.
    pub cwd: String,
    /// Environment, applied in order (later entries win).
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    /// Cancelled when the run is interrupted: the provider must kill the
    /// command's whole process group and return.
    pub cancel: CancellationToken,
}

/// How a command ended. A missing exit code is never success (the
/// default, "nothing known", is not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ExecOutcome {
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub timed_out: bool,
    pub cancelled: bool,
}

impl ExecOutcome {
    pub fn success(&self) -> bool {
        self.exit == Some(0) && !self.timed_out && !self.cancelled
    }

    /// Whether anything is known of how the command ended (an exit code,
    /// a signal, or rfs's own timeout or cancellation). An outcome with
    /// none of these is a lost channel: the command may still be running.
    pub fn is_known(&self) -> bool {
        self.exit.is_some() || self.signal.is_some() || self.timed_out || self.cancelled
    }
}

pub use input::InputStream;

/// How [`Provider::exec_with_input`] carries a stream into a sandbox
/// command's standard input (journaled with the sync).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputRoute {
    /// `stdin`: the provider's own command channel; `fifo`: a pipe this
    /// machine shares with the sandbox.
    pub via: String,
    /// Why a faster route was not taken, when one was tried.
    pub fallback: Option<String>,
}

impl InputRoute {
    /// The provider's own command channel, nothing else tried.
    pub fn stdin() -> Self {
        InputRoute {
            via: "stdin".into(),
            fallback: None,
        }
    }
}

/// An interactive session under a PTY in the sandbox.
#[derive(Debug, Clone)]
pub struct PtyRequest {
    pub argv: Vec<String>,
    pub cwd: String,
    pub env: Vec<(String, String)>,
    pub cols: u16,
    pub rows: u16,
}

/// Input to a PTY session.
#[derive(Debug, Clone)]
pub enum PtyInput {
    Data(Vec<u8>),
    Resize {
        cols: u16,
        rows: u16,
    },
    /// Kill the session's whole process group.
    Kill,
}

/// A live PTY session: bytes in, bytes out, resize, exit status.
/// `output` closes when the session's output ends; `exit` resolves once.
/// Dropping every `input` sender kills the session like [`PtyInput::Kill`].
pub struct PtyChannel {
    pub input: mpsc::UnboundedSender<PtyInput>,
    pub output: mpsc::Receiver<Vec<u8>>,
    pub exit: oneshot::Receiver<ExecOutcome>,
}

/// Facts about a provider that shape how rfs uses it (none of them is a
/// promise of a method: capabilities are [`Provider::streaming`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    /// What this provider's sandboxes start from, so rfs knows which of
    /// the script's `image` and `snapshot` options is its [`CreateSpec::base`].
    pub starts_from: BaseKind,
    /// Whether bytes sent to this provider's sandboxes cross a network, so
    /// that compressing a transfer pays for its CPU cost.
    pub remote: bool,
    /// Whether [`Provider::exec`]'s future owns everything it waits on
    /// (created and dropped within the call: pipes, child, timers; no
    /// pooled connection or task of the provider's), so that it may be
    /// polled on the calling thread's own event loop instead of the run's
    /// runtime.
    pub exec_is_self_contained: bool,
}

/// What kind of thing a provider's sandboxes start from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaseKind {
    /// Nothing to choose (a local directory).
    Nothing,
    /// An image (`sandbox(#{ image })`, `--image`).
    Image,
    /// A snapshot (`sandbox(#{ snapshot })`; `--snapshot` sets the
    /// provider's default).
    Snapshot,
}

/// What a sandbox starts from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Base {
    /// A docker image.
    Image(String),
    /// A Daytona snapshot.
    Snapshot(String),
}

impl Base {
    /// The image, if this is one.
    pub fn image(&self) -> Option<&str> {
        match self {
            Base::Image(i) => Some(i),
            Base::Snapshot(_) => None,
        }
    }

    /// The snapshot, if this is one.
    pub fn snapshot(&self) -> Option<&str> {
        match self {
            Base::Snapshot(s) => Some(s),
            Base::Image(_) => None,
        }
    }
}

impl Default for Profile {
    fn default() -> Profile {
        Profile {
            starts_from: BaseKind::Image,
            remote: false,
            exec_is_self_contained: false,
        }
    }
}

/// The operations every sandbox backend honours. What only some can do is
/// a typed capability ([`Provider::streaming`], and through it
/// [`StreamInput::native`]): a provider without it has no such method.
#[async_trait]
pub trait Provider: Send + Sync {
    /// Provider name as selected by `--provider`.
    fn name(&self) -> &str;

    /// Facts that shape how rfs uses this provider.
    fn profile(&self) -> Profile {
        Profile::default()
    }

    /// What this provider will have in force for `req` and why, or why it
    /// cannot honour it (an option is refused, never ignored). The default
    /// accepts only the defaults.
    fn isolation(
        &self,
        req: &isolation::IsolationRequest,
    ) -> Result<isolation::IsolationInForce, isolation::IsolationError> {
        isolation::only_defaults(self.name(), req)
    }

    /// The resource limits this provider will enforce for `req`, or why
    /// it cannot enforce one that was asked for (refused, never ignored).
    /// The default enforces none: rfs's own default caps are said to be
    /// not enforced, a limit someone asked for is refused.
    fn limits(
        &self,
        req: &limits::LimitsRequest,
    ) -> Result<limits::LimitsFact, limits::LimitsError> {
        limits::none_enforced(self.name(), req)
    }

    /// A limit of sandbox `id` that was reached since this was last asked
    /// (a command killed by the memory limit, a fork refused at the
    /// process limit); asked after each command of a step that did not
    /// succeed. `ended_ok`: the command succeeded (a provider for which
    /// asking is costly may skip it then).
    async fn limits_reached(&self, id: &str, ended_ok: bool) -> Vec<limits::LimitHit> {
        let _ = (id, ended_ok);
        vec![]
    }

    /// What sandbox `id` used since `reset` was last asked (memory peak,
    /// process peak, disk used); `reset`: start counting again. `None`:
    /// the provider does not say.
    async fn usage(&self, id: &str, reset: bool) -> Option<limits::Usage> {
        let _ = (id, reset);
        None
    }

    /// Whether this provider can mount folders of this machine
    /// ([`CreateSpec::caches`]) into a sandbox isolated as `req` asks, or
    /// why not (refused before anything runs, never ignored). The
    /// default cannot.
    fn cache_mounts(&self, req: &isolation::IsolationRequest) -> Result<(), String> {
        let _ = req;
        Err(format!(
            "provider `{}` cannot mount a cache into its sandboxes",
            self.name()
        ))
    }

    /// Whether the caches of a sandbox isolated as `req` asks are bound
    /// into it as they are: what its processes write lands in the cache
    /// folder itself, as they left it (a setuid program, a device node, a
    /// world-writable folder), so rfs makes each fit to keep
    /// ([`crate::untrusted_tree::clean`]) once the sandbox is destroyed.
    /// `false` where the provider writes a cache back itself, keeping
    /// only what may be kept. The default: bound as they are.
    fn caches_bound_as_they_are(&self, req: &isolation::IsolationRequest) -> bool {
        let _ = req;
        true
    }

    /// The record of connections sandbox `id` made through rfs's egress
    /// proxy (`None`: it has none: its network is off, unfiltered or
    /// filtered by the provider itself).
    fn egress(&self, id: &str) -> Option<std::sync::Arc<crate::network::EgressLog>> {
        let _ = id;
        None
    }

    /// Refuse early if the provider cannot work at all (daemon down, missing
    /// credentials). Called before anything else happens in a run.
    async fn preflight(&self) -> ProviderResult<()> {
        Ok(())
    }

    /// Create a sandbox with the given labels. Returns once it can exec.
    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo>;

    /// Get a sandbox by its exact id; `Ok(None)` means not found.
    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>>;

    /// Every sandbox carrying all of `labels` (the provider's full inventory
    /// for that selector, stopped ones included).
    async fn list(&self, labels: &Labels) -> ProviderResult<Vec<SandboxInfo>>;

    /// Copy the local file `local` into the sandbox at absolute `remote_path`
    /// (its parent directory must exist). Streams; never loads the file whole.
    async fn upload(&self, id: &str, local: &Path, remote_path: &str) -> ProviderResult<()>;

    /// Run a command and stream its output into `sink`.
    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome>;

    /// Start an interactive session under a PTY.
    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel>;

    /// Destroy the sandbox. Destroying one that is already gone is `Ok`.
    async fn destroy(&self, id: &str) -> ProviderResult<()>;

    /// Sandbox `id`'s environment by content (the image it was created
    /// from; the host a `local` step sees), journaled with its placement
    /// and compared by `rfs replay`. `None`: nothing to pin (the default).
    async fn environment(&self, id: &str) -> ProviderResult<Option<crate::events::Environment>> {
        let _ = id;
        Ok(None)
    }

    /// Names of the variables `base` bakes into every command (an image's `Env`).
    async fn baked_env_names(&self, base: Option<&Base>) -> ProviderResult<Vec<String>> {
        let _ = base;
        Ok(vec![])
    }

    /// The capability to stream a byte stream into a command while rfs
    /// produces it (`None`: syncs upload a file and verify it, the
    /// default).
    fn streaming(&self) -> Option<&dyn StreamInput> {
        None
    }

    /// The capability to checkpoint a sandbox and start sandboxes from
    /// the checkpoint (`None`: refused, see [`fork::unsupported`]).
    fn forking(&self) -> Option<&dyn fork::Fork> {
        None
    }

    /// The capability to start service containers next to a sandbox,
    /// in its network (`None`: `service()` is refused, the default).
    fn services(&self) -> Option<&dyn Services> {
        None
    }
}

/// Capability: a command reads a byte stream from rfs on its standard
/// input while rfs produces it (a sync streams its archive instead of
/// uploading a file).
#[async_trait]
pub trait StreamInput: Send + Sync {
    /// Decide (once per sandbox) how [`StreamInput::exec_with_input`]
    /// carries a stream into sandbox `id`, and say so.
    async fn input_route(&self, id: &str) -> InputRoute {
        let _ = id;
        InputRoute::stdin()
    }

    /// Run a command like [`Provider::exec`], with `input` streamed into
    /// its standard input (closed at the end of `input`). Returns when the
    /// command ends; input it did not read is dropped. An error reading
    /// `input` is an error of the call (the command saw a truncated
    /// stream).
    async fn exec_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome>;

    /// The capability to run rfs's own executable in the sandbox (same
    /// machine, kernel and libraries), so a sync is verified by rfs's
    /// native verifier ([`crate::source::native_check`]) instead of POSIX
    /// tools (`None`: the POSIX script, the default).
    fn native(&self) -> Option<&dyn NativeVerifier> {
        None
    }
}

/// Capability: rfs's own executable runs in the sandbox, reading a stream.
#[async_trait]
pub trait NativeVerifier: Send + Sync {
    /// Make rfs's own executable runnable in sandbox `id` and check that it
    /// starts there, before a sync streams into it (a provider whose
    /// sandboxes are elsewhere copies it in; the copy goes with the next
    /// [`NativeVerifier::exec_own_with_input`]). An error says why it
    /// cannot run there: the sync is then verified with the POSIX script,
    /// and the journal says why.
    async fn prepare_own_executable(&self, id: &str) -> ProviderResult<()> {
        let _ = id;
        Ok(())
    }

    /// Like [`StreamInput::exec_with_input`], the program being rfs's own
    /// executable (`req.argv[0]` is only the name it is given).
    async fn exec_own_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome>;
}

/// Default maximum sandbox lifetime (the dead-man switch), when a run
/// sets none.
pub const DEFAULT_MAX_LIFETIME: std::time::Duration = std::time::Duration::from_secs(4 * 3600);

/// Sleep until `at`, or forever when there is no deadline (for `select!`
/// arms of optional timeouts).
/// How long a step's output is still read after its command exited: a
/// background process it started may keep a copy of the output pipes
/// open (`(setsid sh -c 'sleep 777 &' &)`) and must not hold the step
/// open. The same on every provider (docker's shim and daytona's log
/// stream end such steps after 2 s too); what such a process prints later
/// is not the step's output.
pub const OUTPUT_DRAIN_AFTER_EXIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a provider-reported state says the sandbox is being removed or
/// is gone (docker `removing`, daytona's soft-deleted `destroying` /
/// `destroyed`): not there for rfs to use or destroy.
pub fn being_removed(state: &str) -> bool {
    matches!(
        state.to_ascii_lowercase().as_str(),
        "removing" | "destroying" | "destroyed" | "deleted"
    )
}

pub async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
