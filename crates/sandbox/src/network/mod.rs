//! The network as a boundary (#34): a sandbox's network policy, the
//! decision for each destination, rfs's egress proxy and the record of
//! every connection it carried or refused.

mod counted;
mod idle;
pub mod policy;
pub mod proxy;
pub mod ranges;
pub mod record;

pub use policy::{decide, AllowRule, Decision, NetworkPolicy, PolicyError};
pub use record::EgressLog;
pub use rfs_evidence::events::network_facts::{Connection, NetworkFact};

/// The port of rfs's egress proxy inside a sandbox's network namespace.
pub const PROXY_PORT: u16 = 3128;

/// The proxy variables of every command in a sandbox behind rfs's proxy,
/// in both spellings; `no_proxy` keeps the sandbox's own loopback direct.
pub fn proxy_env() -> Vec<(String, String)> {
    proxy_env_at(&format!("http://127.0.0.1:{PROXY_PORT}"))
}

/// The proxy variables with the proxy at `url`.
fn proxy_env_at(url: &str) -> Vec<(String, String)> {
    let mut env = vec![];
    for k in ["http_proxy", "https_proxy", "all_proxy"] {
        env.push((k.to_owned(), url.to_owned()));
        env.push((k.to_ascii_uppercase(), url.to_owned()));
    }
    for k in ["no_proxy", "NO_PROXY"] {
        env.push((k.to_owned(), "localhost,127.0.0.1,::1".to_owned()));
    }
    env
}

/// [`proxy_env`] with proxy user name `user` (from
/// [`EgressLog::opener`]): a program sends it with every request, so the
/// proxy can say which command started the process that opened a
/// connection. Put before the command's own variables (which may
/// override them).
pub fn proxy_env_for(user: &str) -> Vec<(String, String)> {
    proxy_env_at(&format!("http://{user}:rfs@127.0.0.1:{PROXY_PORT}"))
}

/// The env var that lets scripts ask for `network: "host"` (like
/// `--allow-host-network`).
pub const ALLOW_HOST_NETWORK_ENV: &str = "RFS_ALLOW_HOST_NETWORK";
/// The person's network for a run (`--network`): `off`, `public`, `host` or an
/// allow list.
pub const NETWORK_ENV: &str = "RFS_NETWORK";

/// The network fact for `policy` set by `by`, enforced by `enforced_by`
/// (`None`: nothing enforces it, the sandbox has the network unfiltered).
pub fn fact(policy: &NetworkPolicy, by: &str, enforced_by: Option<&str>) -> NetworkFact {
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
