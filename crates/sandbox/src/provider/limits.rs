//! Resource limits of a sandbox: `sandbox(#{ pids, memory, cpus, disk })`,
//! with a process cap and a disk cap that exist even when nobody names one. Sizes read as
//! Docker reads them (`64M` = 64 MiB). What the person running rfs set
//! (`--max-pids`, ...; else rfs's defaults) is the ceiling: `rfs.toml` and
//! a script may ask for any limit under it, never above it.
//! A provider enforces each limit or refuses it before anything runs.

pub use rfs_evidence::events::sandbox_facts::{
    show_bytes, show_used, Limit, LimitHit, LimitKind, LimitsFact, Usage,
};

/// The process cap every sandbox gets when nobody names one (a fork bomb
/// stays inside the sandbox).
pub const DEFAULT_PIDS: u64 = 4096;

/// The smallest process cap: the command, its shell and the start.
pub const MIN_PIDS: u64 = 8;

/// The smallest memory limit (Docker's own minimum, 6 MiB).
pub const MIN_MEMORY: u64 = 6 * 1024 * 1024;

/// The smallest disk limit.
pub const MIN_DISK: u64 = 8 * 1024 * 1024;

/// The most disk a sandbox gets when nobody names a limit: 10 GiB, or
/// half of the host's memory where that is less (on `local` the
/// sandbox's writable space is a tmpfs, whose pages are memory).
pub fn default_disk() -> u64 {
    const TEN_GIB: u64 = 10 << 30;
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            let line = t.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib * 1024);
    match mem {
        Some(m) => TEN_GIB.min((m / 2) & !((1 << 20) - 1)).max(MIN_DISK),
        None => TEN_GIB,
    }
}

/// Why a limit was refused, before anything runs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitsError {
    /// A malformed value.
    #[error("`{kind}`: {why}")]
    Malformed { kind: LimitKind, why: String },
    /// A script or `rfs.toml` asked for more than the person's ceiling.
    #[error("{kind}: {asked} asked by {by} exceeds this run's ceiling of {cap} ({set_by}); pass {flag} {flag_value} to allow it", asked = .kind.show(*.asked), cap = .kind.show(*.cap), flag = ceiling_flag(*.kind), flag_value = flag_value(*.kind, *.asked))]
    Widens {
        kind: LimitKind,
        asked: u64,
        by: String,
        cap: u64,
        set_by: String,
    },
    /// The provider cannot enforce a limit that was asked for.
    #[error("provider `{provider}` cannot enforce the {} ({value}) asked by {by}: {why}", .kind.noun())]
    Unenforceable {
        provider: String,
        kind: LimitKind,
        value: String,
        by: String,
        why: String,
    },
}

/// Parse a size as Docker does (`512`, `64k`, `64M`, `64MB`, `64MiB`,
/// `1.5g`; binary units, case-insensitive; a plain number is bytes).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let bad = || {
        format!(
            "`{s}` is not a size (a number with an optional unit: b, k, m, g, t, e.g. \"512M\")"
        )
    };
    let num_end = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, rest) = t.split_at(num_end);
    if num.is_empty() || num.starts_with('.') || num.ends_with('.') || num.matches('.').count() > 1
    {
        return Err(bad());
    }
    let rest = rest.strip_prefix(' ').unwrap_or(rest).to_ascii_lowercase();
    let mut r = rest.as_str();
    let mult: u64 = match r.chars().next() {
        Some('k') => 1 << 10,
        Some('m') => 1 << 20,
        Some('g') => 1 << 30,
        Some('t') => 1 << 40,
        Some('p') => 1 << 50,
        _ => 1,
    };
    if mult > 1 {
        r = &r[1..];
        r = r.strip_prefix('i').unwrap_or(r);
    }
    r = r.strip_prefix('b').unwrap_or(r);
    if !r.is_empty() {
        return Err(bad());
    }
    let v: f64 = num.parse().map_err(|_| bad())?;
    let bytes = v * mult as f64;
    if !bytes.is_finite() || bytes >= 9.2e18 {
        return Err(format!("`{s}` is too large"));
    }
    Ok(bytes as u64)
}

/// A memory limit: a size as Docker reads it, at least [`MIN_MEMORY`].
pub fn parse_memory(s: &str) -> Result<u64, LimitsError> {
    let b = parse_size(s).map_err(|why| LimitsError::Malformed {
        kind: LimitKind::Memory,
        why,
    })?;
    check(LimitKind::Memory, b)
}

/// A disk limit: a size as Docker reads it, at least [`MIN_DISK`].
pub fn parse_disk(s: &str) -> Result<u64, LimitsError> {
    let b = parse_size(s).map_err(|why| LimitsError::Malformed {
        kind: LimitKind::Disk,
        why,
    })?;
    check(LimitKind::Disk, b)
}

/// Check a value's range; `value` in the kind's unit (bytes, processes,
/// thousandths of a cpu).
pub fn check(kind: LimitKind, value: u64) -> Result<u64, LimitsError> {
    let why = match kind {
        LimitKind::Pids if value < MIN_PIDS => {
            format!("must be at least {MIN_PIDS} processes, not {value}")
        }
        LimitKind::Pids if value > 4_194_304 => {
            format!("must be at most 4194304 (the kernel's bound), not {value}")
        }
        LimitKind::Memory if value < MIN_MEMORY => format!(
            "must be at least 6 MiB, not {} (a plain number is bytes, as in Docker: write \"512M\")",
            show_bytes(value)
        ),
        LimitKind::Disk if value < MIN_DISK => format!(
            "must be at least 8 MiB, not {} (a plain number is bytes, as in Docker: write \"2G\")",
            show_bytes(value)
        ),
        LimitKind::Cpus if value < 10 => {
            format!("must be at least 0.01 cpus, not {}", value as f64 / 1000.0)
        }
        LimitKind::Cpus if value > 1024 * 1000 => {
            format!("must be at most 1024 cpus, not {}", value as f64 / 1000.0)
        }
        _ => return Ok(value),
    };
    Err(LimitsError::Malformed { kind, why })
}

/// A number of cpus (`1.5`) as thousandths of a cpu.
pub fn parse_cpus(c: f64) -> Result<u64, LimitsError> {
    if !c.is_finite() || c <= 0.0 {
        return Err(LimitsError::Malformed {
            kind: LimitKind::Cpus,
            why: format!("must be a number of cpus > 0, not {c}"),
        });
    }
    check(
        LimitKind::Cpus,
        (c * 1000.0).round().min(u64::MAX as f64) as u64,
    )
}

/// Limits a script asks for (values in each kind's unit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    pub pids: Option<u64>,
    pub memory: Option<u64>,
    /// Thousandths of a cpu.
    pub cpus: Option<u64>,
    /// Bytes of writable space.
    pub disk: Option<u64>,
}

impl Limits {
    pub fn get(&self, kind: LimitKind) -> Option<u64> {
        match kind {
            LimitKind::Pids => self.pids,
            LimitKind::Memory => self.memory,
            LimitKind::Cpus => self.cpus,
            LimitKind::Disk => self.disk,
        }
    }

    fn slot(&mut self, kind: LimitKind) -> &mut Option<u64> {
        match kind {
            LimitKind::Pids => &mut self.pids,
            LimitKind::Memory => &mut self.memory,
            LimitKind::Cpus => &mut self.cpus,
            LimitKind::Disk => &mut self.disk,
        }
    }

    pub fn is_empty(&self) -> bool {
        *self == Limits::default()
    }

    /// Script-like text (`pids: 64, memory: "64 MiB"`).
    pub fn describe(&self) -> String {
        LimitKind::ALL
            .iter()
            .filter_map(|k| self.get(*k).map(|v| format!("{k}: {:?}", k.show(v))))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The limits a sandbox is asked for, each with who set it, and the
/// ceilings they must stay under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitsRequest {
    /// What is enforced: a ceiling the person set (or rfs's default cap)
    /// until `rfs.toml` or a script lowers it.
    pub limits: Vec<Limit>,
    /// The person's ceilings (`--max-pids`, `RFS_MAX_PIDS`, ...), and
    /// rfs's own default caps (by `rfs's default`) where no flag names
    /// one: nothing a repository or script asks may exceed them.
    pub ceilings: Vec<Limit>,
}

/// Who set a ceiling that is rfs's own default.
pub const RFS_DEFAULT: &str = "rfs's default";

impl Default for LimitsRequest {
    /// rfs's defaults: a process cap and a disk cap, nothing else.
    fn default() -> Self {
        LimitsRequest::with_ceilings(vec![])
    }
}

/// The flag that sets a limit's ceiling (`--max-pids`).
pub fn ceiling_flag(kind: LimitKind) -> String {
    format!("--max-{kind}")
}

/// The environment variable that sets it (`RFS_MAX_PIDS`).
pub fn ceiling_env(kind: LimitKind) -> String {
    format!("RFS_MAX_{}", kind.to_string().to_ascii_uppercase())
}

/// rfs's own ceiling where the person names none (pids, disk).
pub fn rfs_default(kind: LimitKind) -> Option<u64> {
    match kind {
        LimitKind::Pids => Some(DEFAULT_PIDS),
        LimitKind::Disk => Some(default_disk()),
        LimitKind::Memory | LimitKind::Cpus => None,
    }
}

/// Parse a value as a flag or `rfs.toml` writes it (`512M`, `256`,
/// `1.5`).
pub fn parse_limit(kind: LimitKind, s: &str) -> Result<u64, LimitsError> {
    let malformed = |why: String| LimitsError::Malformed { kind, why };
    match kind {
        LimitKind::Memory => parse_memory(s),
        LimitKind::Disk => parse_disk(s),
        LimitKind::Pids => {
            let n = s
                .trim()
                .parse::<u64>()
                .map_err(|_| malformed(format!("`{s}` is not a number of processes")))?;
            check(kind, n)
        }
        LimitKind::Cpus => parse_cpus(
            s.trim()
                .parse::<f64>()
                .map_err(|_| malformed(format!("`{s}` is not a number of cpus")))?,
        ),
    }
}

/// A value as a flag takes it (`500G`, `256`, `1.5`).
pub fn flag_value(kind: LimitKind, v: u64) -> String {
    match kind {
        LimitKind::Pids => v.to_string(),
        LimitKind::Cpus => (v as f64 / 1000.0).to_string(),
        LimitKind::Memory | LimitKind::Disk => {
            for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
                if v >= 1 << shift && v.is_multiple_of(1 << shift) {
                    return format!("{}{unit}", v >> shift);
                }
            }
            v.to_string()
        }
    }
}

impl LimitsRequest {
    /// The request of a run whose person set `person` (each with who set
    /// it: `--max-pids flag`, ...): those are the ceilings, and rfs's
    /// default caps where none is given (pids, disk). Each ceiling is also
    /// the limit in force until a repository or script lowers it.
    pub fn with_ceilings(person: Vec<Limit>) -> Self {
        let mut ceilings = person;
        for kind in LimitKind::ALL {
            if ceilings.iter().all(|c| c.kind != kind) {
                if let Some(value) = rfs_default(kind) {
                    ceilings.push(Limit {
                        kind,
                        value,
                        by: RFS_DEFAULT.into(),
                    });
                }
            }
        }
        ceilings.sort_by_key(|l| l.kind);
        let limits = ceilings
            .iter()
            .map(|c| Limit {
                by: if c.by == RFS_DEFAULT {
                    "default".into()
                } else {
                    c.by.clone()
                },
                ..c.clone()
            })
            .collect();
        LimitsRequest { limits, ceilings }
    }

    pub fn get(&self, kind: LimitKind) -> Option<&Limit> {
        self.limits.iter().find(|l| l.kind == kind)
    }

    /// The ceiling of `kind`, if any.
    pub fn ceiling(&self, kind: LimitKind) -> Option<&Limit> {
        self.ceilings.iter().find(|l| l.kind == kind)
    }

    /// The request with `asked` in force, asked by `by` (a repository's
    /// `rfs.toml`, a script's `sandbox()` options): a value at or below
    /// the person's ceiling replaces the limit in force (a script may ask
    /// more than `rfs.toml`'s value, which is the repository's default,
    /// never more than the person's ceiling); one above is refused.
    pub fn narrowed(&self, asked: &Limits, by: &str) -> Result<Self, LimitsError> {
        let mut out = self.clone();
        for kind in LimitKind::ALL {
            let Some(v) = asked.get(kind) else { continue };
            if let Some(cap) = self.ceiling(kind) {
                if v > cap.value {
                    return Err(LimitsError::Widens {
                        kind,
                        asked: v,
                        by: by.to_owned(),
                        cap: cap.value,
                        set_by: cap.by.clone(),
                    });
                }
            }
            out.limits.retain(|l| l.kind != kind);
            out.limits.push(Limit {
                kind,
                value: v,
                by: by.to_owned(),
            });
        }
        out.limits.sort_by_key(|l| l.kind);
        Ok(out)
    }

    /// The values alone.
    pub fn values(&self) -> Limits {
        let mut l = Limits::default();
        for x in &self.limits {
            *l.slot(x.kind) = Some(x.value);
        }
        l
    }
}

/// What a provider enforces, and what it does not (only rfs's own
/// defaults may go unenforced, and then it says why).
/// The answer of a provider that enforces no limits: rfs's defaults are
/// said to be not enforced, a limit someone asked for is refused.
pub fn none_enforced(provider: &str, req: &LimitsRequest) -> Result<LimitsFact, LimitsError> {
    let mut fact = LimitsFact::default();
    for l in &req.limits {
        if !l.is_default() {
            return Err(LimitsError::Unenforceable {
                provider: provider.to_owned(),
                kind: l.kind,
                value: l.kind.show(l.value),
                by: l.by.clone(),
                why: "it enforces no resource limits yet".into(),
            });
        }
        fact.not_enforced.push(format!(
            "{} (provider `{provider}` enforces no resource limits yet)",
            l.describe()
        ));
    }
    Ok(fact)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_docker_reads_them() {
        let m = 1u64 << 20;
        for (s, want) in [
            ("512", 512),
            ("64M", 64 * m),
            ("64m", 64 * m),
            ("64MB", 64 * m),
            ("64MiB", 64 * m),
            ("64 M", 64 * m),
            ("1.5g", 1536 * m),
            ("2G", 2048 * m),
            ("10k", 10240),
            ("100b", 100),
        ] {
            assert_eq!(parse_size(s), Ok(want), "{s}");
        }
        for s in [
            "", "M", "64X", "64 MBs", "-1M", "1..5M", ".5M", "64MM", "1e3",
        ] {
            assert!(parse_size(s).is_err(), "{s}");
        }
        assert!(parse_memory("1M").is_err());
        assert_eq!(show_bytes(64 * m), "64 MiB");
        assert_eq!(show_bytes(2 << 30), "2 GiB");
        assert_eq!(show_used(41828 << 10), "40.8 MiB");
        assert_eq!(show_used(64 << 20), "64 MiB");
        assert_eq!(show_used(208 << 10), "208 KiB");
        assert_eq!(show_used(1288 << 20), "1.3 GiB");
        assert_eq!(show_used(100), "100 bytes");
    }

    #[test]
    fn a_script_may_lower_a_limit_but_never_raise_it() {
        let person = LimitsRequest::default();
        let asked = Limits {
            pids: Some(64),
            memory: Some(64 << 20),
            cpus: None,
            disk: None,
        };
        let n = person.narrowed(&asked, "the script").unwrap();
        assert_eq!(n.get(LimitKind::Pids).unwrap().value, 64);
        assert_eq!(n.get(LimitKind::Memory).unwrap().by, "the script");
        let e = person
            .narrowed(
                &Limits {
                    pids: Some(DEFAULT_PIDS + 1),
                    ..Limits::default()
                },
                "the script",
            )
            .unwrap_err();
        assert!(
            matches!(
                e,
                LimitsError::Widens {
                    cap: DEFAULT_PIDS,
                    ..
                }
            ),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "pids: 4097 asked by the script exceeds this run's ceiling of 4096 (rfs's default); pass --max-pids 4097 to allow it"
        );
        assert_eq!(
            LimitHit {
                kind: LimitKind::Memory,
                value: 64 << 20
            }
            .describe(),
            "killed: memory limit 64 MiB reached"
        );
    }

    #[test]
    fn the_persons_ceiling_is_the_default_and_bounds_rfs_toml_and_the_script() {
        let flag = |kind, value| Limit {
            kind,
            value,
            by: format!("{} flag", ceiling_flag(kind)),
        };
        let person = LimitsRequest::with_ceilings(vec![
            flag(LimitKind::Memory, 256 << 20),
            flag(LimitKind::Pids, 20_000),
        ]);
        // The flag's ceilings are in force when nobody names a limit;
        // rfs's default disk cap stays.
        assert_eq!(
            person.get(LimitKind::Memory).unwrap().by,
            "--max-memory flag"
        );
        assert_eq!(person.get(LimitKind::Pids).unwrap().value, 20_000);
        assert_eq!(person.get(LimitKind::Disk).unwrap().by, "default");
        assert_eq!(person.ceiling(LimitKind::Disk).unwrap().by, RFS_DEFAULT);
        // rfs.toml lowers; a script may ask more than rfs.toml's value,
        // up to the person's ceiling, never above it.
        let repo = person
            .narrowed(
                &Limits {
                    memory: Some(64 << 20),
                    ..Limits::default()
                },
                "rfs.toml",
            )
            .unwrap();
        let script = repo
            .narrowed(
                &Limits {
                    memory: Some(128 << 20),
                    ..Limits::default()
                },
                "the script",
            )
            .unwrap();
        assert_eq!(script.get(LimitKind::Memory).unwrap().value, 128 << 20);
        let e = repo
            .narrowed(
                &Limits {
                    memory: Some(1 << 30),
                    ..Limits::default()
                },
                "the script",
            )
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "memory: 1 GiB asked by the script exceeds this run's ceiling of 256 MiB (--max-memory flag); pass --max-memory 1G to allow it"
        );
        assert_eq!(flag_value(LimitKind::Disk, 500 << 30), "500G");
        assert_eq!(flag_value(LimitKind::Memory, (1 << 20) + 1), "1048577");
        assert_eq!(flag_value(LimitKind::Cpus, 1500), "1.5");
        assert_eq!(ceiling_env(LimitKind::Disk), "RFS_MAX_DISK");
        assert_eq!(parse_limit(LimitKind::Memory, "64M"), Ok(64 << 20));
        assert_eq!(parse_limit(LimitKind::Cpus, "1.5"), Ok(1500));
        assert!(parse_limit(LimitKind::Pids, "lots").is_err());
    }
}
