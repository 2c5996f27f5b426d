//! `host.mount`: a folder of this machine the person running rfs showed
//! read-only in the sandbox (`--mount-ro HOST_DIR:SANDBOX_PATH`), named
//! by the digest of what it held when the sandbox was created.

use serde::{Deserialize, Serialize};

/// `host.mount`: host folder `host_dir` at `path` in the sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostMounted {
    /// The folder on this machine (symbolic links resolved).
    pub host_dir: String,
    /// Where the sandbox sees it, read-only.
    pub path: String,
    /// Who asked for it (`--mount-ro flag`: nobody else can).
    pub by: String,
    /// The tree digest of what it held before the sandbox was created
    /// (sha256 over every entry's path, kind, mode and, for a file, its
    /// size and sha256; links not followed).
    pub sha256: String,
    pub files: u64,
    pub bytes: u64,
    pub entries: u64,
    /// Files read to digest it this time; the others' digests were kept
    /// from an earlier run (same device, inode, size, modification and
    /// change times).
    pub files_read: u64,
    pub digest_ms: u64,
}

impl HostMounted {
    /// One line for the views.
    pub fn describe(&self) -> String {
        format!(
            "{} at {} (read-only, by the {}): {} file(s), {} bytes, sha256 {}",
            self.host_dir, self.path, self.by, self.files, self.bytes, self.sha256
        )
    }
}

#[cfg(test)]
pub fn samples() -> Vec<super::Event> {
    vec![super::Event::HostMount(HostMounted {
        host_dir: "/root/.rustup/toolchains/stable-x86_64-unknown-linux-gnu".into(),
        path: "/toolchains/rust".into(),
        by: "--mount-ro flag".into(),
        sha256: "3".repeat(64),
        files: 52073,
        bytes: 1_400_000_000,
        entries: 53530,
        files_read: 0,
        digest_ms: 310,
    })]
}
