//! The host environment a `local` step sees, as a fingerprint: the kernel
//! release, the distribution (`/etc/os-release`) and a digest of the
//! installed packages (`dpkg-query -W`, where the host has dpkg). `rfs
//! replay` compares it with the original's and warns on a difference: a
//! local sandbox shares the host's system directories, so this is what
//! its steps ran on.

use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::events::HostFingerprint;

/// This host's fingerprint (read once per process).
pub(super) fn host() -> HostFingerprint {
    static HOST: OnceLock<HostFingerprint> = OnceLock::new();
    HOST.get_or_init(|| HostFingerprint {
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_owned())
            .unwrap_or_else(|_| "unknown".into()),
        os: ["/etc/os-release", "/usr/lib/os-release"]
            .iter()
            .find_map(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| os_of(&t)),
        packages_sha256: packages_sha256(),
    })
    .clone()
}

/// `ID VERSION_ID` of an os-release file (`ID` alone when it has no
/// version, as on rolling distributions).
fn os_of(text: &str) -> Option<String> {
    let field = |key: &str| {
        text.lines().find_map(|l| {
            let v = l.strip_prefix(key)?.strip_prefix('=')?;
            Some(v.trim().trim_matches('"').to_owned()).filter(|v| !v.is_empty())
        })
    };
    let id = field("ID")?;
    Some(match field("VERSION_ID") {
        Some(v) => format!("{id} {v}"),
        None => id,
    })
}

/// sha256 of `dpkg-query -W`'s output, when it runs and succeeds.
fn packages_sha256() -> Option<String> {
    let out = std::process::Command::new("dpkg-query")
        .arg("-W")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| hex::encode(Sha256::digest(&out.stdout)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_gives_id_and_version() {
        let debian =
            "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nVERSION_ID=\"12\"\nID=debian\n";
        assert_eq!(os_of(debian).as_deref(), Some("debian 12"));
        assert_eq!(os_of("ID=arch\n").as_deref(), Some("arch"));
        assert_eq!(os_of("NAME=x\n"), None);
        // `ID_LIKE` is not `ID`.
        assert_eq!(os_of("ID_LIKE=debian\n"), None);
    }
}
