//! The person's host folders (`--mount-ro`, see
//! [`rfs_sandbox::provider::host_mount`]): each digested and journaled
//! (`host.mount`) before the sandbox that shows it is created. The
//! digest of each file is kept in rfs's state directory between runs
//! ([`rfs_sandbox::untrusted_tree::digest_memo`]), so an unchanged
//! toolchain is only walked, not read again.

use std::time::Instant;

use sha2::Digest as _;

use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::host_mount_facts::HostMounted;
use rfs_evidence::events::Event;
use rfs_sandbox::provider::isolation::IsolationRequest;
use rfs_sandbox::untrusted_tree::{self, digest_memo::Memo};

/// Who mounts host folders: nobody but the person, by this flag.
const BY: &str = "--mount-ro flag";

impl Run {
    /// Digest and journal every host folder of `req`.
    pub(crate) fn digest_host_mounts(&self, req: &IsolationRequest) -> Result<()> {
        if req.host_mounts.is_empty() {
            return Ok(());
        }
        let memos = self.cfg.state_dir.join("host-mounts");
        if let Err(e) = std::fs::create_dir_all(&memos) {
            self.warn(&format!(
                "cannot keep host folders' digests in {}: {e}",
                memos.display()
            ));
        }
        for m in &req.host_mounts {
            let name = hex::encode(sha2::Sha256::digest(
                m.host_dir.as_os_str().as_encoded_bytes(),
            ));
            let file = memos.join(format!("{}.memo", &name[..32]));
            // The proofs of a suite digest the same folder at once: one
            // reads it, the others then find its digests kept.
            let _held = std::fs::File::options()
                .create(true)
                .truncate(false)
                .write(true)
                .open(file.with_extension("lock"))
                .ok()
                .and_then(|f| nix::fcntl::Flock::lock(f, nix::fcntl::FlockArg::LockExclusive).ok());
            let mut memo = Memo::load(&file);
            let started = Instant::now();
            let d = untrusted_tree::digest_with(&m.host_dir, &mut memo).map_err(|e| {
                Error::Refused(format!(
                    "--mount-ro {}:{}: cannot digest the host folder: {e}",
                    m.host_dir.display(),
                    m.target
                ))
            })?;
            let digest_ms = super::ms(started.elapsed().as_millis());
            // Kept again only when the folder changed: an unchanged
            // toolchain's memo is megabytes, and each proof of a suite
            // digests it.
            if let Err(e) = memo.changed.then(|| memo.save(&file)).transpose() {
                self.warn(&format!(
                    "cannot keep the digests of {} in {}: {e}",
                    m.host_dir.display(),
                    file.display()
                ));
            }
            self.record(Event::HostMount(HostMounted {
                host_dir: m.host_dir.display().to_string(),
                path: m.target.clone(),
                by: BY.into(),
                sha256: d.sha256,
                files: d.files,
                bytes: d.bytes,
                entries: d.entries,
                files_read: memo.files_read,
                digest_ms,
            }))?;
        }
        Ok(())
    }
}
