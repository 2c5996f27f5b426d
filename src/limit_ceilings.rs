//! The resource limits of a run: the person's ceilings (`--max-memory`,
//! `--max-pids`, `--max-disk`, `--max-cpus`, else `RFS_MAX_MEMORY`, ...),
//! rfs's default caps where none is given, and the repository's defaults
//! from `rfs.toml`'s `[limits]`, which may only stay under the ceilings.
//! A script's `sandbox()` options are checked against the same ceilings
//! at run time (`rfs::runtime::placement`).

use serde::Deserialize;

use rfs_evidence::error::{Error, Result};
use rfs_sandbox::provider::limits::{
    ceiling_env, ceiling_flag, parse_limit, Limit, LimitKind, Limits, LimitsRequest,
};

/// The person's ceilings, as given on the command line.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct CeilingArgs {
    /// The most memory any sandbox of this run may have (e.g. 2G); also
    /// the limit when the script and rfs.toml name none. A script asking
    /// more is refused. Also RFS_MAX_MEMORY.
    #[arg(long, value_name = "SIZE")]
    pub max_memory: Option<String>,
    /// The most processes any sandbox of this run may have (rfs's default
    /// cap: 4096); also the limit when none is named. Also RFS_MAX_PIDS.
    #[arg(long, value_name = "N")]
    pub max_pids: Option<String>,
    /// The most writable disk any sandbox of this run may have (rfs's
    /// default cap on local: 10 GiB, or half the host's memory); also the
    /// limit when none is named. Also RFS_MAX_DISK.
    #[arg(long, value_name = "SIZE")]
    pub max_disk: Option<String>,
    /// The most cpus any sandbox of this run may use (e.g. 1.5); also the
    /// limit when none is named. Also RFS_MAX_CPUS.
    #[arg(long, value_name = "N")]
    pub max_cpus: Option<String>,
    /// The most bytes of output this run keeps in its logs on this
    /// machine, all steps, spawned processes and services together
    /// (default 256M); past it output is cut, said on the console and in
    /// the journal. rfs.toml may only lower it. Also RFS_MAX_LOG_BYTES.
    #[arg(long, value_name = "SIZE")]
    pub max_log_bytes: Option<String>,
}

impl CeilingArgs {
    fn flag(&self, kind: LimitKind) -> Option<&str> {
        match kind {
            LimitKind::Memory => self.max_memory.as_deref(),
            LimitKind::Pids => self.max_pids.as_deref(),
            LimitKind::Disk => self.max_disk.as_deref(),
            LimitKind::Cpus => self.max_cpus.as_deref(),
        }
    }
}

/// The variable that sets the run's log bound (`--max-log-bytes`).
pub const MAX_LOG_BYTES_ENV: &str = "RFS_MAX_LOG_BYTES";

/// The bound on the bytes of output a run keeps in its logs (issue #43),
/// and who set it. The person sets it (`--max-log-bytes`, else
/// [`MAX_LOG_BYTES_ENV`], else 256 MiB); `rfs.toml`'s `[limits]
/// log_bytes` may only lower it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogBound {
    pub bytes: u64,
    pub by: String,
}

impl Default for LogBound {
    /// 256 MiB, rfs's default.
    fn default() -> Self {
        LogBound {
            bytes: crate::runtime::output::DEFAULT_MAX_LOG_BYTES,
            by: rfs_sandbox::provider::limits::RFS_DEFAULT.into(),
        }
    }
}

/// The run's log bound: `--max-log-bytes`, else `RFS_MAX_LOG_BYTES`, else
/// 256 MiB (a size as Docker reads it: `64M`, `1G`, bytes when bare);
/// `rfs.toml`'s `[limits] log_bytes` under it, refused above it.
pub fn log_bound(flags: &CeilingArgs, file: Option<&RepoLimits>) -> Result<LogBound> {
    let person = match flags.max_log_bytes.as_deref().map(str::trim) {
        Some(v) if !v.is_empty() => Some((v.to_owned(), "--max-log-bytes flag".to_owned())),
        _ => std::env::var(MAX_LOG_BYTES_ENV)
            .ok()
            .filter(|v| !v.trim().is_empty())
            .map(|v| (v, format!("{MAX_LOG_BYTES_ENV} environment variable"))),
    };
    let bound = match person {
        Some((raw, by)) => LogBound {
            bytes: rfs_sandbox::provider::limits::parse_size(&raw)
                .map_err(|e| Error::Usage(format!("{by}: {e}")))?,
            by,
        },
        None => LogBound::default(),
    };
    let Some(asked) = file.and_then(|f| f.log_bytes.as_deref()) else {
        return Ok(bound);
    };
    let refuse =
        |why: String| Error::Usage(format!("refused: rfs.toml: [limits] log_bytes: {why}"));
    let bytes = rfs_sandbox::provider::limits::parse_size(asked).map_err(refuse)?;
    if bytes > bound.bytes {
        return Err(refuse(format!(
            "{} exceeds this run's log bound of {} ({}); pass --max-log-bytes {asked} to allow it",
            rfs_sandbox::provider::limits::show_bytes(bytes),
            rfs_sandbox::provider::limits::show_bytes(bound.bytes),
            bound.by
        )));
    }
    Ok(LogBound {
        bytes,
        by: "rfs.toml".into(),
    })
}

/// `rfs.toml`'s `[limits]`: the repository's defaults.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoLimits {
    pub memory: Option<String>,
    pub pids: Option<u64>,
    pub disk: Option<String>,
    pub cpus: Option<f64>,
    /// The most output the run keeps in its logs: only under the
    /// person's bound ([`log_bound`]).
    pub log_bytes: Option<String>,
}

/// The run's limits: the person's ceilings (flag, else environment
/// variable; rfs's default caps for the rest), narrowed by `rfs.toml`'s
/// `[limits]` (a value above a ceiling is refused, naming the file and
/// the flag that would allow it).
pub fn limits_request(flags: &CeilingArgs, file: Option<&RepoLimits>) -> Result<LimitsRequest> {
    let mut person = vec![];
    for kind in LimitKind::ALL {
        let env = ceiling_env(kind);
        let (raw, by) = match flags.flag(kind).map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) => (v.to_owned(), format!("{} flag", ceiling_flag(kind))),
            None => match std::env::var(&env).ok().filter(|v| !v.trim().is_empty()) {
                Some(v) => (v, format!("{env} environment variable")),
                None => continue,
            },
        };
        let value = parse_limit(kind, &raw).map_err(|e| Error::Usage(format!("{by}: {e}")))?;
        person.push(Limit { kind, value, by });
    }
    let req = LimitsRequest::with_ceilings(person);
    let Some(file) = file else { return Ok(req) };
    let refuse = |e: rfs_sandbox::provider::limits::LimitsError| {
        Error::Usage(format!("refused: rfs.toml: [limits] {e}"))
    };
    let size = |kind: LimitKind, v: &Option<String>| -> Result<Option<u64>> {
        v.as_deref()
            .map(|s| parse_limit(kind, s))
            .transpose()
            .map_err(refuse)
    };
    let asked = Limits {
        memory: size(LimitKind::Memory, &file.memory)?,
        disk: size(LimitKind::Disk, &file.disk)?,
        pids: file
            .pids
            .map(|n| rfs_sandbox::provider::limits::check(LimitKind::Pids, n))
            .transpose()
            .map_err(refuse)?,
        cpus: file
            .cpus
            .map(rfs_sandbox::provider::limits::parse_cpus)
            .transpose()
            .map_err(refuse)?,
    };
    req.narrowed(&asked, "rfs.toml").map_err(refuse)
}
