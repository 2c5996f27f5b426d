//! The isolation and resource limits a sandbox had, as journaled (in
//! `placement.intent` and `placement`) and as a step's end names a limit
//! it reached. How they are asked for and enforced is the sandbox layer's
//! (`rfs::provider::isolation`, `rfs::provider::limits`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The isolation in force, as journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationFact {
    /// `namespaces`, `none`, `container`, `provider`.
    pub mode: String,
    /// The mode asked for (`auto`, `namespaces`, `none`).
    pub requested: String,
    /// Who asked (`default`, `--isolation flag`, ...).
    pub requested_by: String,
    pub reason: String,
    /// `false`: only the sandbox's own loopback.
    pub network: bool,
    /// The network policy in force (absent in older journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_policy: Option<super::network_facts::NetworkFact>,
    /// The resource limits in force (absent in older journals).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<LimitsFact>,
}

impl IsolationFact {
    /// One line for EVIDENCE.md and messages.
    pub fn describe(&self) -> String {
        let network = match &self.network_policy {
            Some(n) => n.describe(),
            None if self.network => "on".to_owned(),
            None => "off (own loopback only)".to_owned(),
        };
        let line = format!("{} ({}); network {network}", self.mode, self.reason);
        match &self.limits {
            Some(l) => format!("{line}; limits: {}", l.describe()),
            None => line,
        }
    }
}

/// One kind of limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LimitKind {
    Pids,
    Memory,
    Cpus,
    Disk,
}

impl LimitKind {
    pub const ALL: [LimitKind; 4] = [
        LimitKind::Pids,
        LimitKind::Memory,
        LimitKind::Cpus,
        LimitKind::Disk,
    ];

    /// The option's name in `sandbox(#{ … })`.
    pub fn key(self) -> &'static str {
        match self {
            LimitKind::Pids => "pids",
            LimitKind::Memory => "memory",
            LimitKind::Cpus => "cpus",
            LimitKind::Disk => "disk",
        }
    }

    /// What it limits, in words.
    pub fn noun(self) -> &'static str {
        match self {
            LimitKind::Pids => "process limit",
            LimitKind::Memory => "memory limit",
            LimitKind::Cpus => "cpu limit",
            LimitKind::Disk => "disk limit",
        }
    }

    /// The value as people read it: `256`, `512 MiB`, `1.5 cpus`.
    pub fn show(self, value: u64) -> String {
        match self {
            LimitKind::Pids => value.to_string(),
            LimitKind::Memory | LimitKind::Disk => show_bytes(value),
            LimitKind::Cpus => {
                let c = value as f64 / 1000.0;
                format!("{c} cpu{}", if value == 1000 { "" } else { "s" })
            }
        }
    }
}

impl fmt::Display for LimitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// An amount used, rounded as people read it (`40.8 MiB`, `208 KiB`,
/// `1.2 GiB`, `512 bytes`): a limit is shown exactly ([`show_bytes`]), a
/// use to a tenth.
pub fn show_used(b: u64) -> String {
    let tenth = |v: f64, unit: &str| {
        let t = format!("{v:.1}");
        format!("{} {unit}", t.strip_suffix(".0").unwrap_or(&t))
    };
    match b {
        b if b >= 1 << 30 => tenth(b as f64 / (1u64 << 30) as f64, "GiB"),
        b if b >= 1 << 20 => tenth(b as f64 / (1u64 << 20) as f64, "MiB"),
        b if b >= 1 << 10 => format!("{} KiB", (b + 512) >> 10),
        b => format!("{b} bytes"),
    }
}

/// A size in bytes as people read it (`64 MiB`, `2 GiB`, `1000 bytes`).
pub fn show_bytes(b: u64) -> String {
    for (unit, size) in [
        ("TiB", 1u64 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ] {
        if b >= size && b.is_multiple_of(size) {
            return format!("{} {unit}", b / size);
        }
    }
    if b >= 1 << 20 {
        return format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64);
    }
    format!("{b} bytes")
}

/// One limit with who set it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limit {
    pub kind: LimitKind,
    /// In the kind's unit (processes, bytes, thousandths of a cpu).
    pub value: u64,
    /// `default`, `the script's sandbox() option`, ...
    pub by: String,
}

impl Limit {
    /// `memory limit 512 MiB`.
    pub fn describe(&self) -> String {
        format!("{} {}", self.kind.noun(), self.kind.show(self.value))
    }

    /// Whether nobody asked for it (rfs's own default cap).
    pub fn is_default(&self) -> bool {
        self.by == "default"
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct LimitsFact {
    /// Enforced, with who set each: `default` (rfs's own cap), the
    /// person (`--max-pids flag`, `RFS_MAX_PIDS environment variable`),
    /// the repository (`rfs.toml`) or the script (`the script's sandbox()
    /// option`).
    pub enforced: Vec<Limit>,
    /// The run's ceilings, which nothing the repository or a script asked
    /// could exceed: the person's (`--max-pids flag`, ...) and rfs's
    /// default caps (`rfs's default`). Absent in older journals.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ceilings: Vec<Limit>,
    /// How (`cgroup v1`, `container`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    /// rfs's default caps this provider does not enforce, and why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_enforced: Vec<String>,
}

impl LimitsFact {
    /// One line for EVIDENCE.md and messages.
    pub fn describe(&self) -> String {
        let mut parts: Vec<String> = self
            .enforced
            .iter()
            .map(|l| format!("{} {} ({})", l.kind, l.kind.show(l.value), l.by))
            .collect();
        if parts.is_empty() {
            parts.push("none".into());
        }
        let mut s = parts.join(", ");
        if !self.by.is_empty() {
            s = format!("{s} by {}", self.by);
        }
        for n in &self.not_enforced {
            s.push_str(&format!("; not enforced: {n}"));
        }
        s
    }
}

/// What a step used of its sandbox (absent: the provider does not say).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// The most memory in use at once during the step, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_peak: Option<u64>,
    /// The most processes at once in the sandbox up to the step's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_peak: Option<u64>,
    /// Bytes used of the sandbox's disk at the step's end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_used: Option<u64>,
}

impl Usage {
    pub fn is_empty(&self) -> bool {
        *self == Usage::default()
    }

    /// `memory peak 37 MiB · processes 12 · disk 1.2 MiB` (what is known).
    pub fn describe(&self) -> String {
        let mut parts = vec![];
        if let Some(m) = self.memory_peak {
            parts.push(format!("memory peak {}", show_used(m)));
        }
        if let Some(p) = self.pids_peak {
            parts.push(format!("processes {p}"));
        }
        if let Some(d) = self.disk_used {
            parts.push(format!("disk {}", show_used(d)));
        }
        parts.join(" · ")
    }
}

/// A limit a command reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitHit {
    pub kind: LimitKind,
    pub value: u64,
}

impl LimitHit {
    /// `killed: memory limit 64 MiB reached`, `process limit 64 reached`.
    pub fn describe(&self) -> String {
        let what = format!(
            "{} {} reached",
            self.kind.noun(),
            self.kind.show(self.value)
        );
        match self.kind {
            LimitKind::Memory => format!("killed: {what}"),
            LimitKind::Disk => format!("{} {} full", self.kind.noun(), show_bytes(self.value)),
            _ => what,
        }
    }
}
