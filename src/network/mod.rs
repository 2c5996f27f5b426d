//! The network as a boundary (#34): a sandbox's network policy, the
//! decision for each destination, rfs's egress proxy and the record of
//! every connection it carried or refused.

pub mod policy;
pub mod proxy;
pub mod ranges;
pub mod record;

pub use policy::{decide, AllowRule, Decision, NetworkPolicy, PolicyError};
pub use record::{Connection, EgressLog};

use serde::{Deserialize, Serialize};

/// The port of rfs's egress proxy inside a sandbox's network namespace.
pub const PROXY_PORT: u16 = 3128;

/// The proxy variables of every command in a sandbox behind rfs's proxy,
/// in both spellings; `no_proxy` keeps the sandbox's own loopback direct.
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut env = vec![];
    for k in ["http_proxy", "https_proxy", "all_proxy"] {
        env.push((k.to_owned(), url.clone()));
        env.push((k.to_ascii_uppercase(), url.clone()));
    }
    for k in ["no_proxy", "NO_PROXY"] {
        env.push((k.to_owned(), "localhost,127.0.0.1,::1".to_owned()));
    }
    env
}

/// The env var that lets scripts ask for `network: "host"` (like
/// `--allow-host-network`).
pub const ALLOW_HOST_NETWORK_ENV: &str = "RFS_ALLOW_HOST_NETWORK";

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
    /// The fact for `policy` set by `by`, enforced by `enforced_by`
    /// (`None`: nothing enforces it, the sandbox has the network
    /// unfiltered).
    pub fn of(policy: &NetworkPolicy, by: &str, enforced_by: Option<&str>) -> NetworkFact {
        NetworkFact {
            policy: policy.kind().to_owned(),
            allow: policy.entries(),
            requested_by: by.to_owned(),
            enforced_by: enforced_by
                .unwrap_or("nothing: the network is not filtered")
                .to_owned(),
            unfiltered: enforced_by.is_none() && policy.has_route(),
        }
    }

    /// One line for EVIDENCE.md, report.html and messages.
    pub fn describe(&self) -> String {
        let what = match self.policy.as_str() {
            "off" => "off (own loopback only)".to_owned(),
            "public" => "public internet only (loopback, link-local, private ranges and the host's own addresses refused)".to_owned(),
            "allow" => format!("only {}", self.allow.join(", ")),
            "host" => "host network".to_owned(),
            other => other.to_owned(),
        };
        let unf = if self.unfiltered { "; UNFILTERED" } else { "" };
        format!(
            "{what} (requested by {}; enforced by {}{unf})",
            self.requested_by, self.enforced_by
        )
    }
}
