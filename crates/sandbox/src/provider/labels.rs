//! Label names stamped on every sandbox rfs creates.

use std::collections::BTreeMap;

pub type Labels = BTreeMap<String, String>;

pub const CREATED_BY: &str = "relayflows/created-by";
pub const CREATED_BY_VALUE: &str = "rfs";
pub const RUN_ID: &str = "relayflows/run-id";
pub const SOURCE_COMMIT: &str = "relayflows/source-commit";
pub const TREE_DIGEST: &str = "relayflows/tree-digest";
pub const OWNER_HOST: &str = "relayflows/owner-host";
pub const OWNER_PID: &str = "relayflows/owner-pid";
/// The owner's process start time (kernel ticks since boot), so a reused pid
/// is not mistaken for a live owner.
pub const OWNER_PID_START: &str = "relayflows/owner-pid-start";
pub const STARTED_AT: &str = "relayflows/started-at";
/// The owner's user id on its host (`rfs ps` shows a user's own).
pub const OWNER_USER: &str = "relayflows/owner-uid";

/// Value used for source labels when the sandbox is provisioned before any
/// source is bound.
pub const UNBOUND: &str = "unbound";

/// The selector for every sandbox rfs created.
pub fn rfs_selector() -> Labels {
    let mut l = Labels::new();
    l.insert(CREATED_BY.into(), CREATED_BY_VALUE.into());
    l
}

/// True when `have` carries every label in `want`.
pub fn matches(have: &Labels, want: &Labels) -> bool {
    want.iter().all(|(k, v)| have.get(k) == Some(v))
}
