//! `index.json`: a suite's results, as the files, the page and tools
//! read them.

use serde::Serialize;

use super::events::{Counts, ProofResult};

/// `index.json`.
#[derive(Debug, Default, Serialize)]
pub(super) struct Index {
    pub(super) suite_id: String,
    pub(super) provider: String,
    pub(super) jobs: usize,
    pub(super) rfs_version: &'static str,
    pub(super) exit_code: i32,
    pub(super) duration_ms: u64,
    pub(super) counts: Counts,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) stopped: Option<String>,
    /// The suite's setup run, when it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) setup: Option<super::setup::SetupResult>,
    pub(super) proofs: Vec<ProofResult>,
    pub(super) not_run: Vec<String>,
    /// Some proof shipped a working tree (`--allow-dirty`).
    pub(super) reproducible: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) not_reproducible: Vec<String>,
    /// The commit(s), the project's JUnit totals and the network, read
    /// from the proofs' bundles (`commits`, `tests`, `network`).
    #[serde(flatten)]
    pub(super) totals: super::totals::Totals,
}
