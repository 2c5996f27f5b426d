//! What a sandbox's (or service's) container may hold beyond its files
//! (#44): as under the namespaces sandbox, no capability can be gained
//! (`no-new-privileges`: a setuid or file-capability program gives
//! nothing), and of the engine's default capabilities uid 0 keeps only
//! those that make it the owner of its container's files and processes.
//! A repository that chooses `provider = "docker"` does not get the
//! engine's defaults (raw sockets, device nodes, file capabilities,
//! chroot) the person's own default sandbox never gives.
//!
//! `no-new-privileges` is set where the container's user is root (most
//! images): under it the engine gives an exec as uid 0 in a container of
//! another user no capability at all, and rfs's own helpers (the home's
//! owner, checkpoints, killing a command's group) run as uid 0. In a
//! container of a non-root user a step has no capability; a setuid
//! program of the image can make it uid 0 with only the kept ones.

use bollard::models::HostConfig;

/// The only capabilities kept, every other dropped.
pub const KEPT_CAPABILITIES: [&str; 7] = [
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "SETGID",
    "SETUID",
];

/// `host` with every capability but [`KEPT_CAPABILITIES`] dropped,
/// never privileged, and `no-new-privileges` when the container's user
/// is root (`as_root`).
pub(super) fn hardened(as_root: bool, host: HostConfig) -> HostConfig {
    HostConfig {
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(KEPT_CAPABILITIES.iter().map(|c| c.to_string()).collect()),
        security_opt: as_root.then(|| vec!["no-new-privileges".into()]),
        privileged: Some(false),
        ..host
    }
}

/// Whether a container `user` (`name`, `uid`, `uid:gid`; `None`: the
/// image's default, root) is root.
pub(super) fn is_root(user: Option<&str>) -> bool {
    match user.map(|u| u.split(':').next().unwrap_or(u).trim()) {
        None | Some("") | Some("0") | Some("root") => true,
        Some(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hardened_container_drops_raw_sockets_and_device_nodes() {
        let h = hardened(true, HostConfig::default());
        assert_eq!(h.cap_drop, Some(vec!["ALL".to_string()]));
        let kept = h.cap_add.unwrap();
        for never in ["NET_RAW", "MKNOD", "SETFCAP", "SYS_CHROOT", "SYS_ADMIN"] {
            assert!(!kept.iter().any(|c| c == never), "{never} kept");
        }
        assert_eq!(h.security_opt, Some(vec!["no-new-privileges".to_string()]));
        assert!(is_root(None) && is_root(Some("0:0")) && is_root(Some("root")));
        assert!(!is_root(Some("1000:1000")) && !is_root(Some("node")));
    }
}
