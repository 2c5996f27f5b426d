//! What a run's network was, as journaled: the policy in force (with the
//! placement) and each connection attempt through rfs's egress proxy
//! (`net.connect`). The policy itself, its decisions and the proxy are
//! the sandbox layer's (`rfs::network`).

use serde::{Deserialize, Serialize};

/// The network policy in force, as journaled with the placement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetworkFact {
    /// `off`, `public`, `allow` or `host`.
    pub policy: String,
    /// The allow list's entries as written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
    /// Who set it (`default`, `the script's sandbox() option`).
    pub requested_by: String,
    /// What enforces it (`rfs egress proxy (own network namespace)`,
    /// `Daytona networkAllowList`, `nothing: the host's network`).
    pub enforced_by: String,
    /// Whether the sandbox reaches the network unfiltered.
    pub unfiltered: bool,
}

impl NetworkFact {
    /// One line for EVIDENCE.md, report.html and messages.
    pub fn describe(&self) -> String {
        let what = match self.policy.as_str() {
            "off" => "off (own loopback only)".to_owned(),
            "public" => "public internet only (loopback, link-local, private ranges and the host's own addresses refused)".to_owned(),
            "allow" => format!("only {}", self.allow.join(", ")),
            "host" => "host network".to_owned(),
            other => other.to_owned(),
        };
        if self.unfiltered {
            // Nothing is refused: never describe what was asked for as
            // if something held it (#44).
            let asked = if self.policy == "host" {
                String::new()
            } else {
                format!(
                    "; `{}` was asked for, which nothing here enforces",
                    self.policy
                )
            };
            return format!(
                "UNFILTERED: the sandbox's own network, nothing refused (requested by {}; enforced by {}{asked})",
                self.requested_by, self.enforced_by
            );
        }
        format!(
            "{what} (requested by {}; enforced by {})",
            self.requested_by, self.enforced_by
        )
    }
}

/// One connection attempt through rfs's egress proxy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Connection {
    /// The name the program asked for (absent: it gave an address).
    pub name: Option<String>,
    /// The address connected to, or the first one refused (absent: the
    /// name did not resolve).
    pub address: Option<String>,
    pub port: u16,
    pub allowed: bool,
    /// The rule that decided (`default: public address`, `allow
    /// `pypi.org``, `default: loopback (127.0.0.0/8)`, ...).
    pub rule: String,
    /// `connect` (HTTP CONNECT) or `http` (a plain HTTP request).
    pub via: String,
    /// Bytes from the sandbox to the destination, and back.
    pub bytes_up: u64,
    pub bytes_down: u64,
    pub duration_ms: u64,
    /// The step it belongs to: the step whose command started the
    /// process that opened it, when its proxy credentials say so
    /// (`opened_by`), else the step running when it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// Who started the process that opened it, as the proxy credentials
    /// rfs gave that command say (`step `build``, `spawn `server``,
    /// `service `db``, `attach `…``); absent: the program sent none. A
    /// process in the sandbox could claim another command of the same
    /// run, never anything else.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opened_by: Option<String>,
    /// Why an allowed connection failed (connect error), if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How many more attempts just like this one (refused, to the same
    /// destination, by the same rule, in the same step) were made: a
    /// flood of refusals is counted, not recorded one by one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repeated: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Connection {
    /// How many attempts this record stands for.
    pub fn attempts(&self) -> u64 {
        1 + self.repeated
    }

    /// `name (address):port`, or `address:port`.
    pub fn destination(&self) -> String {
        match (&self.name, &self.address) {
            (Some(n), Some(a)) if n != a => format!("{n} ({a}):{}", self.port),
            (Some(n), _) => format!("{n}:{}", self.port),
            (None, Some(a)) => format!("{a}:{}", self.port),
            (None, None) => format!("?:{}", self.port),
        }
    }
}
