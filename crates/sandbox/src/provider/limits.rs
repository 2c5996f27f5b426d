//! Resource limits of a sandbox: `sandbox(#{ pids, memory, cpus, disk })`,
//! with a process cap and a disk cap that exist even when nobody names one. Sizes read as
//! Docker reads them (`64M` = 64 MiB). What the person running rfs set (the
//! defaults) is the cap: a script may only lower a limit, never raise it.
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
    /// A script asked for more than the person's cap.
    #[error("{} {asked} asked by {by} is above the cap of {cap} set by {set_by}; a script may only lower a limit", .kind.noun(), asked = .kind.show(*.asked), cap = .kind.show(*.cap))]
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

/// The limits a sandbox is asked for, each with who set it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitsRequest {
    pub limits: Vec<Limit>,
}

impl Default for LimitsRequest {
    /// rfs's defaults: a process cap and a disk cap, nothing else.
    fn default() -> Self {
        LimitsRequest {
            limits: vec![
                Limit {
                    kind: LimitKind::Pids,
                    value: DEFAULT_PIDS,
                    by: "default".into(),
                },
                Limit {
                    kind: LimitKind::Disk,
                    value: default_disk(),
                    by: "default".into(),
                },
            ],
        }
    }
}

impl LimitsRequest {
    pub fn get(&self, kind: LimitKind) -> Option<&Limit> {
        self.limits.iter().find(|l| l.kind == kind)
    }

    /// The request with `asked` lowering it, asked by `by` (a script's
    /// `sandbox()` options): a value at or below the cap in force replaces
    /// it; one above is refused (only the person running rfs sets caps).
    pub fn narrowed(&self, asked: &Limits, by: &str) -> Result<Self, LimitsError> {
        let mut out = self.clone();
        for kind in LimitKind::ALL {
            let Some(v) = asked.get(kind) else { continue };
            if let Some(cap) = self.get(kind) {
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
            LimitHit {
                kind: LimitKind::Memory,
                value: 64 << 20
            }
            .describe(),
            "killed: memory limit 64 MiB reached"
        );
    }
}
