//! What a sandbox's (or service's) container may hold beyond its files
//! (#44): as under the namespaces sandbox, no capability can be gained
//! (`no-new-privileges`: a setuid or file-capability program gives
//! nothing), and of the engine's default capabilities uid 0 keeps only
//! those that make it the owner of its container's files and processes.
//! A repository that chooses `provider = "docker"` does not get the
//! engine's defaults (raw sockets, device nodes, file capabilities,
//! chroot) the person's own default sandbox never gives.

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
/// `no-new-privileges` and never privileged.
pub(super) fn hardened(host: HostConfig) -> HostConfig {
    HostConfig {
        cap_drop: Some(vec!["ALL".into()]),
        cap_add: Some(KEPT_CAPABILITIES.iter().map(|c| c.to_string()).collect()),
        security_opt: Some(vec!["no-new-privileges".into()]),
        privileged: Some(false),
        ..host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hardened_container_drops_raw_sockets_and_device_nodes() {
        let h = hardened(HostConfig::default());
        assert_eq!(h.cap_drop, Some(vec!["ALL".to_string()]));
        let kept = h.cap_add.unwrap();
        for never in ["NET_RAW", "MKNOD", "SETFCAP", "SYS_CHROOT", "SYS_ADMIN"] {
            assert!(!kept.iter().any(|c| c == never), "{never} kept");
        }
        assert_eq!(h.security_opt, Some(vec!["no-new-privileges".to_string()]));
    }
}
