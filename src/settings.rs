//! Raw command-line arguments and environment turned into validated
//! settings, in one place.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rfs_evidence::error::{Error, Result};
use rfs_sandbox::provider::select::{self, ProviderChoice};

pub use rfs_sandbox::source::allowed_repos::AllowedRepos;

/// Env var overriding where rfs keeps its state (local sandboxes, runs).
pub const STATE_DIR_ENV: &str = "RFS_STATE_DIR";
/// Default maximum sandbox lifetime (the dead-man switch).
pub use rfs_sandbox::provider::DEFAULT_MAX_LIFETIME;
/// The longest `--max-lifetime` accepted (30 days).
pub const MAX_MAX_LIFETIME: Duration = Duration::from_secs(30 * 24 * 3600);

/// Validated settings of `rfs run`.
#[derive(Debug, Clone)]
pub struct RunSettings {
    pub script: PathBuf,
    pub provider: ProviderChoice,
    pub state_dir: PathBuf,
    pub run_id: String,
    pub out_dir: PathBuf,
    pub invocation_dir: PathBuf,
    pub vars: BTreeMap<String, String>,
    pub keep: bool,
    pub image: Option<String>,
    /// Whether `image` is the repository's choice (`rfs.toml`), not the
    /// person's (`--image`, `RFS_DOCKER_IMAGE`).
    pub image_by_repository: bool,
    /// Daytona's default snapshot: `--snapshot`, else
    /// `RELAYFLOWS_SANDBOX_SNAPSHOT` (read by the provider).
    pub snapshot: Option<String>,
    pub max_lifetime: Duration,
    pub cleanup_deadline: Duration,
    /// `--isolation`, else `RFS_LOCAL_ISOLATION` (local only), else auto.
    pub isolation: rfs_sandbox::provider::isolation::IsolationRequest,
    /// `rfs.toml`'s `secrets`: variables redacted whatever their name.
    pub secret_names: std::collections::BTreeSet<String>,
    /// `--allow-dirty`: ship the working tree as it is (uncommitted
    /// changes included) and mark the evidence not reproducible.
    pub allow_dirty: bool,
    /// The repositories a script may ship: where rfs started, and each
    /// `--allow-repo`.
    pub allowed_repos: rfs_sandbox::source::allowed_repos::AllowedRepos,
    /// The bound on the output the run keeps in its logs
    /// (`--max-log-bytes`, else `RFS_MAX_LOG_BYTES`, else 256 MiB).
    pub max_log: crate::limit_ceilings::LogBound,
}

/// The raw inputs of `rfs run`.
#[derive(Debug, Clone, Default)]
pub struct RunArgs {
    pub script: PathBuf,
    pub provider: Option<String>,
    pub out: Option<PathBuf>,
    pub vars: Vec<String>,
    pub keep: bool,
    pub image: Option<String>,
    pub snapshot: Option<String>,
    pub max_lifetime_secs: Option<u64>,
    pub isolation: Option<String>,
    pub allow_dirty: bool,
    /// `--allow-repo`: more repositories a script may ship.
    pub allow_repos: Vec<PathBuf>,
    /// `--allow-put`: files a script's `put()` may ship besides those of
    /// the working tree.
    pub allow_puts: Vec<PathBuf>,
    /// `--allow-host-network`: scripts may ask for `network: "host"`.
    pub allow_host_network: bool,
    /// `--network POLICY` (else `RFS_NETWORK`): the run's network and the
    /// most a script may ask for.
    pub network: Option<String>,
    /// `--secret NAME`: environment variables handed to the run as
    /// secrets.
    pub secrets: Vec<String>,
    /// The files and folders the person named on this command line for
    /// rfs to write (`--junit`, `--out`): inside the working tree, they
    /// do not make it dirty while untracked.
    pub own_outputs: Vec<rfs_sandbox::source::own_outputs::OwnOutput>,
    /// `--max-memory`, `--max-pids`, `--max-disk`, `--max-cpus`: the
    /// person's resource ceilings (else `RFS_MAX_*`).
    pub ceilings: crate::limit_ceilings::CeilingArgs,
    /// `--mount-ro HOST_DIR:SANDBOX_PATH`: host folders shown read-only
    /// in the sandbox.
    pub mount_ro: Vec<String>,
}

/// The state directory: `$RFS_STATE_DIR`, else `$XDG_STATE_HOME/rfs`,
/// else `~/.local/state/rfs`.
pub fn state_dir() -> PathBuf {
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    env(STATE_DIR_ENV)
        .or_else(|| env("XDG_STATE_HOME").map(|p| p.join("rfs")))
        .or_else(|| env("HOME").map(|p| p.join(".local/state/rfs")))
        .unwrap_or_else(|| std::env::temp_dir().join("rfs-state"))
}

/// A new run id: UTC timestamp plus random suffix.
pub fn new_run_id() -> String {
    let f = time::macros::format_description!("[year][month][day]T[hour][minute][second]Z");
    let ts = time::OffsetDateTime::now_utc()
        .format(&f)
        .unwrap_or_else(|_| "run".into());
    let rnd = uuid::Uuid::new_v4().simple().to_string();
    format!("{ts}-{}", &rnd[..8])
}

/// Whether `k` may name a variable (`--var`, `rfs.toml`'s `secrets`):
/// letters, digits and underscores.
fn is_var_name(k: &str) -> bool {
    !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parse `KEY=VALUE` pairs.
pub fn parse_vars(raw: &[String]) -> Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for v in raw {
        let (k, val) = v
            .split_once('=')
            .ok_or_else(|| Error::Usage(format!("--var `{v}` must be KEY=VALUE")))?;
        if !is_var_name(k) {
            return Err(Error::Usage(format!(
                "--var name `{k}` must be letters, digits and underscores"
            )));
        }
        out.insert(k.to_owned(), val.to_owned());
    }
    Ok(out)
}

impl RunSettings {
    /// Validate raw arguments against the environment.
    pub fn from_args(a: RunArgs) -> Result<Self> {
        if a.script.as_os_str() != crate::script::STDIN && !a.script.is_file() {
            return Err(Error::Usage(format!(
                "script {} does not exist or is not a file",
                a.script.display()
            )));
        }
        Self::validate(a)
    }

    /// Settings for an interactive session (no script file).
    pub fn for_repl(mut a: RunArgs) -> Result<Self> {
        a.script = PathBuf::from("<repl>");
        Self::validate(a)
    }

    fn validate(a: RunArgs) -> Result<Self> {
        let invocation_dir = std::env::current_dir()
            .map_err(|e| Error::Usage(format!("cannot read the current directory: {e}")))?;
        // The repository's rfs.toml: after flags and the environment.
        let file = crate::repo_config::for_dir(&invocation_dir)
            .map_err(|e| Error::Usage(format!("refused: {e}")))?;
        let env = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        let provider = select::choose_with_file(
            a.provider.as_deref(),
            std::env::var(select::PROVIDER_ENV).ok().as_deref(),
            file.provider.as_deref(),
        )
        .map_err(|e| Error::Usage(e.to_string()))?;
        let state_dir = state_dir();
        let run_id = new_run_id();
        let out_dir = match a.out {
            Some(o) => {
                let o = absolute(&o);
                rfs_evidence::out_dir::check(&o, &invocation_dir)
                    .map_err(|r| Error::Usage(format!("refused: {r}")))?;
                o
            }
            None => state_dir.join("runs").join(&run_id),
        };
        let person_image = a
            .image
            .filter(|s| !s.trim().is_empty())
            .or_else(rfs_sandbox::provider::docker::image_from_env);
        let image_by_repository = person_image.is_none() && file.image.is_some();
        let image = person_image.or(file.image.clone().filter(|s| !s.trim().is_empty()));
        let max_lifetime = max_lifetime(a.max_lifetime_secs, file.max_lifetime)?;
        // RFS_LOCAL_ISOLATION is the local provider's setting only.
        let isolation_env = provider
            .kind()
            .is_some_and(|k| k.reads_local_isolation_env())
            .then(|| std::env::var(rfs_sandbox::provider::isolation::ISOLATION_ENV).ok())
            .flatten();
        let mut isolation = rfs_sandbox::provider::isolation::IsolationRequest::from_settings(
            a.isolation.as_deref(),
            isolation_env.as_deref(),
        )
        .map_err(|e| Error::Usage(e.to_string()))?;
        isolation.host_network_allowed_by = host_network_allowed_by(a.allow_host_network)?;
        isolation.host_mounts = host_mounts(&a.mount_ro, &file, &state_dir)?;
        if let Some((policy, by)) = person_network(a.network.as_deref())? {
            isolation = isolation.with_person_network(policy, &by);
        }
        // The person's ceilings, then rfs.toml's `[limits]` under them.
        isolation.limits =
            crate::limit_ceilings::limits_request(&a.ceilings, file.limits.as_ref())?;
        // The repository's rfs.toml may only narrow what the person set.
        if let Some(m) = file.isolation.as_deref() {
            let refuse = |e: rfs_sandbox::provider::isolation::IsolationError| {
                Error::Usage(format!("refused: rfs.toml: {e}"))
            };
            let mode = rfs_sandbox::provider::isolation::IsolationMode::parse(m).map_err(refuse)?;
            isolation = isolation.narrowed(mode, "rfs.toml").map_err(refuse)?;
        }
        let mut vars = parse_vars(&a.vars)?;
        let secret_names = secrets_of(&a.secrets, &file, &mut vars)?;
        let allowed_repos =
            rfs_sandbox::source::allowed_repos::AllowedRepos::new(&invocation_dir, &a.allow_repos)
                .map_err(Error::Usage)?;
        let allowed_repos = allowed_repos
            .with_puts(&invocation_dir, &a.allow_puts)
            .map_err(Error::Usage)?
            .with_own_outputs(&invocation_dir, &a.own_outputs);
        let max_log = crate::limit_ceilings::log_bound(&a.ceilings, file.limits.as_ref())?;
        Ok(RunSettings {
            max_log,
            allowed_repos,
            isolation,
            secret_names,
            allow_dirty: a.allow_dirty,
            script: a.script,
            provider,
            state_dir,
            run_id,
            out_dir,
            invocation_dir,
            vars,
            keep: a.keep,
            image,
            image_by_repository,
            // The file's snapshot only where RELAYFLOWS_SANDBOX_SNAPSHOT
            // (read by the provider, after --snapshot) is not set.
            snapshot: a.snapshot.filter(|s| !s.trim().is_empty()).or_else(|| {
                env(rfs_sandbox::provider::daytona::config::SNAPSHOT_ENV)
                    .is_none()
                    .then_some(file.snapshot)
                    .flatten()
                    .filter(|s| !s.trim().is_empty())
            }),
            max_lifetime,
            cleanup_deadline: Duration::from_secs(60),
        })
    }
}

/// The run's bound on its sandbox's life: `--max-lifetime` (`flag`),
/// else rfs.toml's `max_lifetime` (`file`), else the default.
fn max_lifetime(flag: Option<u64>, file: Option<u64>) -> Result<Duration> {
    let lifetime_origin = if flag.is_some() {
        "--max-lifetime"
    } else {
        "rfs.toml's `max_lifetime`"
    };
    Ok(match flag.or(file) {
        Some(0) => {
            return Err(Error::Usage(format!(
                "{lifetime_origin} must be at least 1 second"
            )))
        }
        Some(s) if s > MAX_MAX_LIFETIME.as_secs() => {
            return Err(Error::Usage(format!(
                "{lifetime_origin} must be at most {} seconds (30 days), not {s}",
                MAX_MAX_LIFETIME.as_secs()
            )))
        }
        Some(s) => Duration::from_secs(s),
        None => DEFAULT_MAX_LIFETIME,
    })
}

/// The network the person running rfs set: `--network`, else
/// `RFS_NETWORK` (empty: unset), with who set it.
fn person_network(
    flag: Option<&str>,
) -> Result<Option<(rfs_sandbox::network::NetworkPolicy, String)>> {
    let env = std::env::var(rfs_sandbox::network::NETWORK_ENV).ok();
    let (value, by) = match (flag.map(str::trim).filter(|v| !v.is_empty()), env) {
        (Some(f), _) => (f.to_owned(), "--network flag".to_owned()),
        (None, Some(e)) if !e.trim().is_empty() => (
            e,
            format!("{} environment variable", rfs_sandbox::network::NETWORK_ENV),
        ),
        _ => return Ok(None),
    };
    rfs_sandbox::network::policy::parse_flag(&value)
        .map(|p| Some((p, by.clone())))
        .map_err(|e| Error::Usage(format!("{by}: {e}")))
}

/// The person's host folders (`--mount-ro`); `rfs.toml` asking for one
/// is refused naming the flag: only the person widens what the sandbox
/// sees of this machine.
fn host_mounts(
    flags: &[String],
    file: &crate::repo_config::RepoConfig,
    state_dir: &Path,
) -> Result<Vec<rfs_sandbox::provider::host_mount::HostMount>> {
    use rfs_sandbox::provider::host_mount;
    if let Some(key) = file.host_mount_key() {
        return Err(Error::Usage(format!(
            "refused: rfs.toml: `{key}`: a repository cannot mount a folder of this machine into its sandboxes; only the person running rfs can: pass {} HOST_DIR:SANDBOX_PATH",
            host_mount::FLAG
        )));
    }
    let mounts = flags
        .iter()
        .map(|f| host_mount::parse(f, state_dir))
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| Error::Usage(format!("refused: {e}")))?;
    host_mount::check_distinct(&mounts).map_err(|e| Error::Usage(format!("refused: {e}")))?;
    Ok(mounts)
}

/// Who let scripts ask for `network: "host"`: `--allow-host-network`,
/// else `RFS_ALLOW_HOST_NETWORK` (1/true/yes; 0/false/no/empty: nobody).
fn host_network_allowed_by(flag: bool) -> Result<Option<String>> {
    if flag {
        return Ok(Some("--allow-host-network flag".into()));
    }
    let env = rfs_sandbox::network::ALLOW_HOST_NETWORK_ENV;
    match std::env::var(env).unwrap_or_default().trim() {
        "" | "0" | "false" | "no" => Ok(None),
        "1" | "true" | "yes" => Ok(Some(format!("{env} environment variable"))),
        other => Err(Error::Usage(format!(
            "{env}={other:?}: must be 1, true, yes, 0, false or no"
        ))),
    }
}

/// The run's secrets. `--secret NAME` (the person running rfs) hands the
/// environment variable NAME to the run as `arg(NAME)`; a `--var` of the
/// same name wins. `rfs.toml`'s `secrets` (the repository) only names
/// variables its proofs expect: each must have been passed by the person,
/// and is refused otherwise with the same words whether or not the
/// variable exists here (the repository learns nothing of the host's
/// environment). Every one is redacted whatever its name.
fn secrets_of(
    flags: &[String],
    file: &crate::repo_config::RepoConfig,
    vars: &mut BTreeMap<String, String>,
) -> Result<std::collections::BTreeSet<String>> {
    let mut names = std::collections::BTreeSet::new();
    for name in flags {
        if !is_var_name(name) {
            return Err(Error::Usage(format!(
                "--secret `{name}` must be letters, digits and underscores"
            )));
        }
        if !vars.contains_key(name) {
            let value = std::env::var(name).map_err(|_| {
                Error::Usage(format!(
                    "--secret {name}: the variable is not set in your environment"
                ))
            })?;
            vars.insert(name.clone(), value);
        }
        names.insert(name.clone());
    }
    for name in &file.secrets {
        if !is_var_name(name) {
            return Err(Error::Usage(format!(
                "refused: rfs.toml: secret name `{name}` must be letters, digits and underscores"
            )));
        }
        if !vars.contains_key(name) {
            return Err(Error::Usage(format!(
                "refused: rfs.toml asks for the secret {name}; secrets come from the person running rfs, never from the repository: pass --secret {name} to hand it from your environment (or --var {name}=...)"
            )));
        }
        names.insert(name.clone());
    }
    Ok(names)
}

fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
