//! What a suite's proofs add up to, read from their bundles at the end:
//! the commit(s) they ran, the project's test counts (every JUnit report
//! a proof collected, `collect(path, #{ junit: true })`) and the network
//! (each policy, connections and refusals). `index.json`, `index.md` and
//! `index.html` show them.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Serialize;

use super::events::ProofResult;
use rfs_evidence::journal::fold::{ArtifactRow, RunSummary};

/// The totals of a suite's proofs (their last attempts).
#[derive(Debug, Default, Clone, Serialize)]
pub(crate) struct Totals {
    /// Every commit a proof's source was pinned at, with how many proofs
    /// ran it (one commit, unless the tree changed between proofs).
    pub(crate) commits: BTreeMap<String, usize>,
    /// The project's tests, summed over every JUnit report collected.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) tests: Option<TestTotals>,
    /// The network of every proof with a recorded policy.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) network: Option<NetworkTotals>,
}

/// JUnit totals across the proofs.
#[derive(Debug, Default, Clone, Copy, Serialize, PartialEq, Eq)]
pub(crate) struct TestTotals {
    /// JUnit reports collected.
    pub(crate) reports: u64,
    pub(crate) tests: u64,
    pub(crate) failures: u64,
    pub(crate) errors: u64,
    pub(crate) skipped: u64,
}

/// The network across the proofs.
#[derive(Debug, Default, Clone, Serialize, PartialEq, Eq)]
pub(crate) struct NetworkTotals {
    /// Each policy in force, with how many proofs ran under it.
    pub(crate) policies: BTreeMap<String, usize>,
    /// Connection attempts through rfs's proxy, and how many refused.
    pub(crate) connections: u64,
    pub(crate) refused: u64,
    /// Proofs whose sandbox reached the network without rfs (nothing of
    /// their connections is recorded).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(crate) unfiltered: Vec<String>,
}

impl Totals {
    /// The totals of `proofs`, each read from its last attempt's bundle
    /// (a proof refused before it ran has none and adds nothing).
    pub(crate) fn of(proofs: &[ProofResult]) -> Totals {
        let mut t = Totals::default();
        for p in proofs {
            let Some(a) = p.last().filter(|a| !a.out_dir.is_empty()) else {
                continue;
            };
            let Ok(b) = rfs_evidence::report::FinishedRun::read(Path::new(&a.out_dir)) else {
                continue;
            };
            t.add(&p.name, &b.summary);
        }
        t
    }

    fn add(&mut self, name: &str, r: &RunSummary) {
        if let Some(pin) = r.pin() {
            *self.commits.entry(pin.commit.clone()).or_default() += 1;
        }
        for a in &r.artifacts {
            if let ArtifactRow::Collected { junit: Some(j), .. } = a {
                let t = self.tests.get_or_insert_with(TestTotals::default);
                t.reports += 1;
                t.tests += j.tests;
                t.failures += j.failures;
                t.errors += j.errors;
                t.skipped += j.skipped;
            }
        }
        let n = &r.network;
        if n.policy.is_none() && n.connections.is_empty() {
            return;
        }
        let net = self.network.get_or_insert_with(NetworkTotals::default);
        let policy = n
            .policy
            .as_ref()
            .map_or_else(|| "not recorded".to_owned(), |p| p.describe());
        *net.policies.entry(policy).or_default() += 1;
        net.connections += n.connections.iter().map(|c| c.attempts()).sum::<u64>();
        net.refused += n.refused().map(|c| c.attempts()).sum::<u64>();
        if n.policy.as_ref().is_some_and(|p| p.unfiltered) {
            net.unfiltered.push(name.to_owned());
        }
    }

    /// The commit line: `commit c0ffee…` or each commit with its count.
    pub(crate) fn commit_text(&self) -> Option<String> {
        match self.commits.len() {
            0 => None,
            1 => self.commits.keys().next().cloned(),
            _ => Some(
                self.commits
                    .iter()
                    .map(|(c, n)| format!("{c} ({n} proofs)"))
                    .collect::<Vec<_>>()
                    .join(", "),
            ),
        }
    }

    /// `297 test cases in 8 JUnit reports: 1 failed, 0 errors, 2 skipped`.
    pub(crate) fn tests_text(&self) -> Option<String> {
        self.tests.map(|t| {
            format!(
                "{} test case(s) in {} JUnit report(s): {} failed, {} error(s), {} skipped",
                t.tests, t.reports, t.failures, t.errors, t.skipped
            )
        })
    }

    /// `12 connections through rfs's proxy, 1 refused; policy …`.
    pub(crate) fn network_text(&self) -> Option<String> {
        self.network.as_ref().map(|n| {
            let policies = n
                .policies
                .iter()
                .map(|(p, k)| format!("{p} ({k} proofs)"))
                .collect::<Vec<_>>()
                .join("; ");
            let mut s = format!(
                "{} connection(s) through rfs's proxy, {} refused; policy: {policies}",
                n.connections, n.refused
            );
            if !n.unfiltered.is_empty() {
                s.push_str(&format!(
                    "; UNFILTERED (not recorded): {}",
                    n.unfiltered.join(", ")
                ));
            }
            s
        })
    }
}
