//! The rows of a [`super::RunSummary`]: steps, pins, resyncs, terminal
//! recordings, assertions, bisect results, the cleanup, bundled files and
//! moved artifacts.

use super::{AssertionOutcome, StepOutcome};

/// One step of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepRecord {
    pub name: String,
    pub command: String,
    /// Relative to the synced root, `""` for the root.
    pub cwd: String,
    pub allow_failure: bool,
    /// The last attempt's exit code.
    pub exit: Option<i32>,
    pub timed_out: bool,
    pub attempts: u32,
    pub duration_ms: u64,
    /// The commit the step ran under.
    pub commit: Option<String>,
    /// Log files (relative to the bundle), in attempt order.
    pub logs: Vec<String>,
    /// The digest of the last attempt's stdout (`None`: no attempt ran;
    /// an attempt that printed nothing has the empty text's digest).
    pub stdout_sha256: Option<String>,
    /// The last provider error (cleared by a later attempt that ran).
    pub provider_error: Option<String>,
    /// The source workdir (the synced root) when the step started.
    pub workdir: Option<String>,
    /// What the last attempt printed last.
    pub output_tail: Option<crate::events::OutputTail>,
    /// What of the last attempt's output was past the run's log bound.
    pub output_cut: Option<crate::events::OutputCut>,
    /// What the step used (memory peak, processes, disk), where the
    /// provider says.
    pub usage: Option<crate::events::sandbox_facts::Usage>,
    pub outcome: StepOutcome,
}

impl StepRecord {
    /// A step that has not run any attempt.
    pub(super) fn new(name: &str, cwd: &str, outcome: StepOutcome) -> StepRecord {
        StepRecord {
            name: name.to_owned(),
            command: String::new(),
            cwd: cwd.to_owned(),
            allow_failure: false,
            exit: None,
            timed_out: false,
            attempts: 0,
            duration_ms: 0,
            commit: None,
            logs: vec![],
            stdout_sha256: None,
            provider_error: None,
            workdir: None,
            output_tail: None,
            output_cut: None,
            usage: None,
            outcome,
        }
    }
}

/// The SHA-256 of no bytes: the stdout digest of an attempt that printed
/// nothing.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// One binding of the source (`source.pin`; a re-sync adds one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    pub commit: String,
    pub tree_digest: String,
    pub archive_sha256: String,
    pub files: usize,
    pub workdir: String,
}

/// `rfs bisect`'s record: the range, each commit tested, the finding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bisect {
    pub good: String,
    pub bad: String,
    pub commits: usize,
    /// `--trust-ends`: the ends' results are the person's word, not
    /// tested.
    pub ends_trusted: bool,
    /// (commit, result, reason) in the order tested.
    pub tested: Vec<(String, crate::events::BisectResult, Option<String>)>,
    pub first_changed: Option<String>,
    /// Set when skipped commits hide the change.
    pub candidates: Vec<String>,
    pub ended: bool,
    /// The results at `good` and `bad` (set at the end).
    pub ends: Option<(crate::events::BisectResult, crate::events::BisectResult)>,
    /// The commit found, described.
    pub found: Option<crate::events::BisectFoundCommit>,
    /// Every commit with a result at the end (all lanes'), oldest first.
    pub results: Vec<crate::events::BisectTested>,
}

/// A re-sync: from commit, to commit, files shipped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resync {
    pub from_commit: String,
    pub commit: String,
    pub shipped: usize,
}

/// A terminal session's recording.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recording {
    pub session: u32,
    pub command: String,
    pub path: String,
    /// How the session ended (`attach.end`'s `how`), and its exit code.
    pub ended: Option<(String, Option<i32>)>,
    /// The recording as closed (`attach.end`'s digested file): what a
    /// view may read, since `rfs verify` checked it.
    pub closed: Option<String>,
}

/// One `assert_screen`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assertion {
    pub session: u32,
    /// 1-based, per session.
    pub assert: u32,
    /// What was expected (redacted).
    pub pattern: String,
    pub outcome: AssertionOutcome,
    pub elapsed_ms: u64,
    /// The digest of the screen it saw.
    pub screen_digest: String,
    /// The screen's text snapshot file, if written.
    pub snapshot: Option<String>,
}

/// The most `print()` lines a summary keeps (the journal keeps them all).
pub const MAX_PRINTS: usize = 200;

/// How the run's sandbox was cleaned up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cleanup {
    NoSandbox,
    Kept {
        sandbox_id: String,
        /// `--keep`, or why rfs kept it beyond the run (a Daytona fork's
        /// parent, destroyed after its checkpoint).
        reason: String,
    },
    Verified {
        sandbox_id: String,
        why: String,
        inventory_count: usize,
        polls: u32,
        elapsed_ms: u64,
        /// `false`: it was already gone (rfs claims no destroy).
        destroyed_by_rfs: bool,
    },
    NotVerified {
        sandbox_id: String,
        error: String,
    },
}

/// A file of the bundle the run executed (script, static or run-time
/// module).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BundledFile {
    pub path: String,
    pub sha256: String,
}

/// Why a `collect()` that found nothing mattered (or did not), with
/// `code` quoting a step's name as the view quotes code.
pub fn absent_why(optional: bool, step: Option<&str>, code: impl Fn(&str) -> String) -> String {
    match (optional, step) {
        (true, _) => "optional: the run went on".to_owned(),
        (false, Some(st)) => format!("it failed step {}", code(st)),
        (false, None) => "it failed the run".to_owned(),
    }
}

/// What `collect()` or `put()` moved (`artifact.*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArtifactRow {
    Collected {
        path: String,
        files: Vec<crate::events::FileDigest>,
        links: Vec<crate::events::ArtifactLink>,
        skipped: Vec<String>,
        bytes: u64,
        /// Set for a JUnit report (`collect(path, #{ junit: true })`).
        junit: Option<crate::events::JunitCounts>,
    },
    /// `collect()` found nothing there (`artifact.absent`).
    Absent {
        path: String,
        optional: bool,
        /// The step it failed (not optional).
        step: Option<String>,
    },
    Put {
        local: String,
        path: String,
        sha256: String,
        bytes: u64,
        bundled: Option<String>,
    },
}
