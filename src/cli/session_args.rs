//! The options every command that starts a run shares.

use std::path::PathBuf;

use crate::settings::RunArgs;
use rfs_sandbox::source::own_outputs::OwnOutput;

/// What `run` and `repl` share: where the run goes and what it gets.
#[derive(Debug, clap::Args)]
pub(crate) struct SessionArgs {
    /// Provider: local (default), docker or daytona. Overrides RELAYFLOWS_SANDBOX_PROVIDER.
    #[arg(long)]
    provider: Option<String>,
    /// Output directory for the journal, logs and EVIDENCE.md
    /// (default: $RFS_STATE_DIR/runs/<run-id>, outside the repository).
    #[arg(long)]
    pub(super) out: Option<PathBuf>,
    /// A value for the script's arg(NAME). Repeatable.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub(super) vars: Vec<String>,
    /// Image for providers that take one (docker). Also RFS_DOCKER_IMAGE.
    #[arg(long)]
    image: Option<String>,
    /// Snapshot for providers that take one (daytona). Also
    /// RELAYFLOWS_SANDBOX_SNAPSHOT; `sandbox(#{ snapshot })` beats both.
    #[arg(long)]
    snapshot: Option<String>,
    /// Maximum sandbox lifetime in seconds (dead-man switch).
    #[arg(long, value_name = "SECS")]
    max_lifetime: Option<u64>,
    /// Isolation of local sandboxes: auto (default), namespaces, gvisor, none.
    /// Also RFS_LOCAL_ISOLATION.
    #[arg(long, value_name = "MODE")]
    isolation: Option<String>,
    /// Ship the working tree as it is, uncommitted changes included, for
    /// writing a proof; the evidence is marked NOT REPRODUCIBLE (console,
    /// EVIDENCE.md, attestation, `rfs verify`).
    #[arg(long)]
    allow_dirty: bool,
    /// Let a script's `sync_source(#{ repo: PATH })` ship the repository
    /// at PATH besides the one rfs was started in. Repeatable.
    #[arg(long = "allow-repo", value_name = "PATH")]
    allow_repos: Vec<PathBuf>,
    /// Let a script's `put(LOCAL, PATH)` ship the file at PATH (or any
    /// file under the folder PATH), which is outside the working tree or
    /// ignored by git. Repeatable.
    #[arg(long = "allow-put", value_name = "PATH")]
    allow_puts: Vec<PathBuf>,
    /// Let a script reach the host: `sandbox(#{ network: "host" })` (the
    /// host's network, unfiltered) and allow-list entries naming the host
    /// itself (its loopback, link-local/metadata or own addresses).
    /// Without it such a script is refused: the default is the public
    /// internet only, through rfs. Also RFS_ALLOW_HOST_NETWORK=1.
    #[arg(long)]
    allow_host_network: bool,
    /// The network of this run's sandboxes and the most a script may ask
    /// for: `off` (only the sandbox's loopback), `public` (the default:
    /// the public internet, through rfs), `host`, or a comma-separated
    /// allow list (`pypi.org,10.0.0.0/8:443`). A script asking for more is
    /// refused. Also RFS_NETWORK.
    #[arg(long, value_name = "POLICY")]
    network: Option<String>,
    /// Hand the environment variable NAME to the run as `arg(NAME)`,
    /// redacted as a secret (a repository's rfs.toml may ask for it, but
    /// only this flag passes it). Repeatable.
    #[arg(long = "secret", value_name = "NAME")]
    secrets: Vec<String>,
    #[command(flatten)]
    ceilings: crate::limit_ceilings::CeilingArgs,
    /// Show the host folder HOST_DIR read-only (nosuid) in the sandbox at
    /// SANDBOX_PATH (a new folder such as /toolchains/rust), e.g. a
    /// rustup toolchain. Its digest is journaled. Only this flag mounts
    /// one: a script or rfs.toml cannot. local (namespaces, gvisor) and
    /// docker; refused on daytona. Repeatable.
    #[arg(long = "mount-ro", value_name = "HOST_DIR:SANDBOX_PATH")]
    mount_ro: Vec<String>,
}

impl SessionArgs {
    pub(super) fn into_run_args(self, script: PathBuf, keep: bool) -> RunArgs {
        RunArgs {
            // Named here for rfs to write: not dirt in the working tree.
            own_outputs: self.out.iter().map(|o| own_output(o, true)).collect(),
            script,
            provider: self.provider,
            out: self.out,
            vars: self.vars,
            keep,
            image: self.image,
            snapshot: self.snapshot,
            max_lifetime_secs: self.max_lifetime,
            isolation: self.isolation,
            allow_dirty: self.allow_dirty,
            allow_repos: self.allow_repos,
            allow_puts: self.allow_puts,
            allow_host_network: self.allow_host_network,
            network: self.network,
            secrets: self.secrets,
            ceilings: self.ceilings,
            mount_ro: self.mount_ro,
        }
    }
}

/// A path the person named on the command line for rfs to write (a
/// folder: `--out`; a file: `--junit`).
pub(super) fn own_output(path: &std::path::Path, folder: bool) -> OwnOutput {
    OwnOutput {
        path: path.to_path_buf(),
        folder,
    }
}
