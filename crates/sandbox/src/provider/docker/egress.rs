//! rfs's egress proxy for docker sandboxes (#34): a container with a
//! filtered network policy runs with network mode `none` (only its
//! loopback), and rfs opens a listener on `127.0.0.1:3128` inside the
//! container's network namespace (a thread of rfs enters it with
//! `setns`) for its egress proxy, the same proxy `local` uses. That needs
//! the daemon on this machine's kernel and rfs allowed to enter the
//! namespace (root); where it is not, the default is Docker's bridge,
//! said as unfiltered, only with `--allow-host-network`, and an explicit
//! policy is refused.

use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::sync::{Arc, Mutex};

use crate::network::proxy::EgressProxy;
use crate::network::{EgressLog, NetworkPolicy};
use crate::provider::isolation::{IsolationError, IsolationRequest};
use crate::provider::{ProviderError, ProviderResult};

/// Why rfs cannot place its proxy in this daemon's containers (`None`:
/// it can).
pub(super) fn unavailable(host: &str) -> Option<String> {
    if !super::stdin_fifo::offered_for(host) {
        return Some(format!(
            "the daemon at {host} is not on a local socket, so rfs cannot enter its containers' network namespaces"
        ));
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some(
            "rfs enters the container's network namespace to place its proxy there, which needs root".into(),
        );
    }
    None
}

/// Whether `req`'s policy goes through rfs's proxy on this daemon, or
/// why it is refused. `Ok(false)` with a route: the bridge, unfiltered.
pub(super) fn proxied(host: &str, req: &IsolationRequest) -> Result<bool, IsolationError> {
    match &req.network {
        NetworkPolicy::Off | NetworkPolicy::Host => Ok(false),
        p => match unavailable(host) {
            None => Ok(true),
            // Nobody asked: Docker's bridge, unfiltered, only when the
            // person running rfs allowed the host's network (#44): a
            // repository choosing `provider = "docker"` must not get a
            // wider network than the person's default.
            Some(_) if req.network_is_default() && req.host_network_allowed_by.is_some() => {
                Ok(false)
            }
            Some(why) if req.network_is_default() => Err(IsolationError::NetworkPolicyUnsupported {
                provider: "docker".into(),
                policy: p.to_string(),
                why: format!(
                    "{why}, so its sandboxes would reach Docker's bridge unfiltered; pass --allow-host-network to allow that, or use `network: false`"
                ),
            }),
            Some(why) => Err(IsolationError::NetworkPolicyUnsupported {
                provider: "docker".into(),
                policy: p.to_string(),
                why: format!(
                    "{why}; use `network: false`, or `network: \"host\"` (Docker's bridge, unfiltered) with --allow-host-network"
                ),
            }),
        },
    }
}

/// The proxies of this process's docker sandboxes, by id.
#[derive(Default)]
pub(super) struct Proxies {
    map: Mutex<HashMap<String, (Arc<EgressLog>, EgressProxy)>>,
}

impl Proxies {
    /// Serve sandbox `id` (its container's main process is `pid`) with
    /// `policy`.
    pub(super) async fn start(
        &self,
        id: &str,
        pid: i64,
        policy: &NetworkPolicy,
    ) -> ProviderResult<()> {
        let listener = tokio::task::spawn_blocking(move || listen_in(pid))
            .await
            .map_err(|e| ProviderError::Io(e.to_string()))?
            .map_err(|e| {
                ProviderError::Provision(format!(
                    "cannot place rfs's egress proxy in sandbox {id}'s network namespace: {e}"
                ))
            })?;
        let log = EgressLog::new();
        let proxy = EgressProxy::start(listener, policy.clone(), log.clone()).map_err(|e| {
            ProviderError::Provision(format!("cannot start rfs's egress proxy: {e}"))
        })?;
        self.lock().insert(id.to_owned(), (log, proxy));
        Ok(())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Arc<EgressLog>, EgressProxy)>> {
        self.map.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sandbox `id`'s record, when it is behind the proxy.
    pub(super) fn log(&self, id: &str) -> Option<Arc<EgressLog>> {
        self.lock().get(id).map(|(l, _)| l.clone())
    }

    /// Stop sandbox `id`'s proxy (its open connections end, recorded).
    pub(super) fn stop(&self, id: &str) {
        let entry = self.lock().remove(id);
        drop(entry);
    }
}

/// A listener on 127.0.0.1:3128 in the network namespace of process
/// `pid`, made by a thread of its own that enters it (a thread's network
/// namespace is its own; the socket stays in the namespace it was made in).
fn listen_in(pid: i64) -> std::io::Result<std::net::TcpListener> {
    let ns = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    std::thread::spawn(move || {
        // SAFETY: setns on a namespace descriptor we opened, in a thread
        // that does nothing else and ends.
        if unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        std::net::TcpListener::bind(("127.0.0.1", crate::network::PROXY_PORT))
    })
    .join()
    .map_err(|_| std::io::Error::other("the thread entering the namespace panicked"))?
}
