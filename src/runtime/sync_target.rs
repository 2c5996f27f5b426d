//! The sandbox a sync writes into and its paths there: the synced root,
//! the uploaded archive, the verifier's scratch directory and the stamp
//! that marks the end of the last sync (written by the first sync,
//! checked by a re-sync).

use std::time::Instant;

use rfs_sandbox::provider::SandboxInfo;

/// The sandbox file whose modification time marks the end of the last sync.
pub(super) fn stamp_path(home: &str, run_id: &str) -> String {
    format!("{}/.rfs-synced-{run_id}", home.trim_end_matches('/'))
}

/// The sandbox a sync writes into, and its paths there.
pub(super) struct SyncTarget<'a> {
    pub(super) sb: &'a SandboxInfo,
    pub(super) commit: &'a str,
    /// The synced root.
    pub(super) dest: String,
    /// Where an uploaded archive is written.
    pub(super) upload: String,
    /// The verifier's scratch directory.
    pub(super) aux: String,
    /// The stamp a later re-sync checks.
    pub(super) stamp: String,
    /// When the sync began (an archive built before provisioning counts
    /// from here).
    pub(super) started: Instant,
}

impl<'a> SyncTarget<'a> {
    pub(super) fn new(
        sb: &'a SandboxInfo,
        commit: &'a str,
        dest: &str,
        run_id: &str,
        started: Instant,
    ) -> Self {
        let home = sb.home.trim_end_matches('/');
        SyncTarget {
            sb,
            commit,
            dest: format!("{home}/{dest}"),
            upload: format!("{home}/.rfs-upload-{run_id}.tar"),
            aux: format!("{home}/.rfs-verify-{run_id}"),
            stamp: stamp_path(home, run_id),
            started,
        }
    }
}
