//! Whether namespaces can be used here (probed once per process), what
//! `rfs doctor` says of them, and the isolation decision for a sandbox.

use std::sync::OnceLock;

use super::{errors::*, mount_plan::*, namespace_init::*, sys::*};
use crate::network::NetworkPolicy;

/// Why namespaces can or cannot be used here; probed once per process.
pub fn availability() -> Result<(), SetupError> {
    static PROBE: OnceLock<Result<(), SetupError>> = OnceLock::new();
    PROBE.get_or_init(probe).clone()
}

/// For `rfs doctor`: what `local` would isolate with in `mode`
/// (`RFS_LOCAL_ISOLATION` when `None`), or why it would refuse to run.
pub fn doctor_line(
    mode: Option<crate::provider::isolation::IsolationMode>,
) -> Result<String, DoctorRefusal> {
    use crate::provider::isolation::{IsolationRequest, ISOLATION_ENV};
    let req = match mode {
        Some(m) => IsolationRequest {
            mode: m,
            source: "argument".into(),
            ..IsolationRequest::default()
        },
        None => IsolationRequest::from_settings(None, std::env::var(ISOLATION_ENV).ok().as_deref())
            .map_err(DoctorRefusal::Setting)?,
    };
    decide(&req)
        .map(|f| format!("isolation {}", f.describe()))
        .map_err(DoctorRefusal::Refused)
}

/// Why `rfs doctor`'s local line fails.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DoctorRefusal {
    /// `RFS_LOCAL_ISOLATION` is malformed.
    #[error(transparent)]
    Setting(crate::provider::isolation::IsolationError),
    /// The mode asked for would refuse to run.
    #[error("isolation refused: {0}")]
    Refused(crate::provider::isolation::IsolationError),
}

/// What enforces a network policy in a sandbox with namespaces.
fn in_namespaces(policy: &NetworkPolicy) -> Option<&'static str> {
    match policy {
        NetworkPolicy::Off => Some("the sandbox's own network namespace (only its loopback)"),
        NetworkPolicy::Public | NetworkPolicy::Allow(_) => Some(
            "rfs's egress proxy: the sandbox's own network namespace has only its loopback and the proxy at 127.0.0.1:3128",
        ),
        NetworkPolicy::Host => None,
    }
}

/// What `local` has in force for `req`, or why it refuses.
pub(super) fn decide(
    req: &crate::provider::isolation::IsolationRequest,
) -> Result<crate::provider::isolation::IsolationInForce, crate::provider::isolation::IsolationError>
{
    use crate::provider::isolation::{IsolationError, IsolationInForce, IsolationMode};
    req.check_host_reach()?;
    let by = &req.source;
    let net =
        |enforced: Option<&str>| crate::network::fact(&req.network, &req.network_by, enforced);
    let ns = |reason: String| IsolationInForce {
        mode: "namespaces".into(),
        reason,
        network: net(in_namespaces(&req.network)),
    };
    // Without namespaces commands share the host's network: only the
    // policies that do not narrow it can be honoured there.
    let on_host = |reason: String, why: Option<String>| match &req.network {
        NetworkPolicy::Off => Err(match &why {
            None => IsolationError::NetworkNeedsNamespaces { by: by.clone() },
            Some(w) => IsolationError::NetworkWithoutNamespaces { why: w.clone() },
        }),
        NetworkPolicy::Allow(_) => Err(IsolationError::NetworkPolicyUnsupported {
            provider: "local".into(),
            policy: req.network.to_string(),
            why: match &why {
                None => format!("it needs namespaces, but isolation `none` was requested by {by}"),
                Some(w) => format!("it needs namespaces, which are not available: {w}"),
            },
        }),
        NetworkPolicy::Public | NetworkPolicy::Host => Ok(IsolationInForce {
            mode: "none".into(),
            reason,
            network: net(None),
        }),
    };
    match req.mode {
        IsolationMode::None => {
            on_host(format!("requested by {by}: commands run on the host"), None)
        }
        IsolationMode::Namespaces => match availability() {
            Ok(()) => Ok(ns(format!("requested by {by}"))),
            Err(why) => Err(IsolationError::NamespacesUnavailable {
                by: by.clone(),
                why: why.to_string(),
            }),
        },
        IsolationMode::Gvisor => super::gvisor::decide(req, net(in_namespaces(&req.network))),
        IsolationMode::Auto => match availability() {
            Ok(()) => Ok(ns(format!(
                "auto ({by}): the kernel permits unprivileged user namespaces"
            ))),
            Err(why) => on_host(
                format!("auto ({by}): namespaces not available ({why}); commands run on the host"),
                Some(why.to_string()),
            ),
        },
    }
}

/// Try what an isolated sandbox needs (user, mount, PID and IPC
/// namespaces, a `/proc` of its own) in a throwaway init.
pub(super) fn probe() -> Result<(), SetupError> {
    let plan = Plan {
        ops: vec![
            Op::private_root(),
            Op::Mount {
                src: Some(cs("proc")),
                target: cs("/proc"),
                fstype: Some(cs("proc")),
                flags: libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                data: None,
            },
        ],
        network: true,
    };
    match Init::start(&plan) {
        Ok(init) => {
            drop(init);
            Ok(())
        }
        Err(e) => Err(explain(e)),
    }
}

/// A failure, with the kernel settings that usually explain it.
pub(super) fn explain(e: SetupError) -> SetupError {
    let read = |p: &str| std::fs::read_to_string(p).ok().map(|s| s.trim().to_owned());
    let mut why = vec![];
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        why.push("sysctl user.max_user_namespaces is 0".into());
    }
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        why.push("sysctl kernel.unprivileged_userns_clone is 0".into());
    }
    if read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        why.push("AppArmor restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns = 1)".into());
    }
    SetupError::Unavailable {
        cause: Box::new(e),
        hints: why,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decide_refuses_network_off_without_namespaces() {
        use crate::provider::isolation::*;
        let req = IsolationRequest {
            mode: IsolationMode::None,
            source: "test".into(),
            network: NetworkPolicy::Off,
            ..IsolationRequest::default()
        };
        assert_eq!(
            decide(&req).unwrap_err(),
            IsolationError::NetworkNeedsNamespaces { by: "test".into() }
        );
        let allow = IsolationRequest {
            network: NetworkPolicy::allow(&["10.1.2.3".into()]).unwrap(),
            ..req.clone()
        };
        let e = decide(&allow).unwrap_err().to_string();
        assert!(e.contains("needs namespaces"), "{e}");
        let public = IsolationRequest {
            network: NetworkPolicy::Public,
            ..req
        };
        assert!(decide(&public).unwrap().network.unfiltered);
    }
}
