//! What background processes (`spawn.*`) and services (`service.*`) share
//! in the views: finding a row by name, the logs an end names, and the
//! lines under each in EVIDENCE.md (when it was ready, how it ended).

use std::fmt::Write as _;

use super::inert_markdown::{code, esc};
use crate::events::FileDigest;

/// The last of `rows` named `name` (a name is unique within a run).
pub(super) fn last_named<'a, T>(
    rows: &'a mut [T],
    name: &str,
    name_of: fn(&T) -> &str,
) -> Option<&'a mut T> {
    rows.iter_mut().rev().find(|r| name_of(r) == name)
}

/// The paths of the logs an end names (stdout, then stderr).
pub(super) fn log_paths(stdout: &Option<FileDigest>, stderr: &Option<FileDigest>) -> Vec<String> {
    [stdout, stderr]
        .into_iter()
        .flatten()
        .map(|f| f.path.clone())
        .collect()
}

/// `; the provider said: …`, when it said something.
pub(super) fn provider_said(error: &Option<String>) -> String {
    error
        .as_ref()
        .map(|m| format!("; the provider said: {m}"))
        .unwrap_or_default()
}

/// `; output cut at …`, when its output was past the run's log bound.
pub(super) fn cut_said(cut: &Option<crate::events::OutputCut>) -> String {
    cut.as_ref()
        .map(|c| format!("; {}", c.describe()))
        .unwrap_or_default()
}

/// What a readiness wait saw and how it ended, as an entry's sub-items
/// of EVIDENCE.md; `wait`: the option's name (`wait_for`, `ready`).
pub(super) struct Details<'a> {
    pub wait: &'a str,
    pub ready: &'a [(String, String, u64)],
    pub wait_failed: &'a [(String, String, String)],
    /// How it ended in words, and its logs (`None`: still running).
    pub end: Option<(String, &'a [String])>,
}

impl Details<'_> {
    pub(super) fn write(&self, s: &mut String) {
        for (on, target, ms) in self.ready {
            let _ = writeln!(s, "  - ready: {on} {} after {ms} ms", code(target));
        }
        for (on, target, why) in self.wait_failed {
            let _ = writeln!(
                s,
                "  - {} {on} {} FAILED: {}",
                self.wait,
                code(target),
                esc(why)
            );
        }
        match &self.end {
            Some((ended, logs)) => {
                let _ = writeln!(s, "  - {}", esc(ended));
                for l in logs.iter() {
                    let _ = writeln!(s, "  - log: {}", code(l));
                }
            }
            None => {
                let _ = writeln!(s, "  - (still running)");
            }
        }
    }
}
