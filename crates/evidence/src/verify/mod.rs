//! `rfs verify OUT`: check a run's output directory as a whole — the
//! journal's chain, that the run ended, that `EVIDENCE.md` is exactly the
//! rendering of the journal, and that every file the journal names
//! (step logs, terminal recordings, screen snapshots) still has the
//! digest journaled when it was closed, and no other such file exists.
//!
//! Checks run in order and stop at the first failure. Each is one entry
//! of [`CHECKS`]; a new check (signatures, attestations) is one more entry.

use std::path::{Path, PathBuf};

use crate::events::Event;
use crate::journal;
use crate::text::{bounded, clip, quote};

mod contents;
mod files;
mod views;

use contents::check_contents;
use files::{check_artifacts, check_bundle, check_files};
use views::{check_evidence, check_report};

/// What a check is given: the output directory and its journal, read once.
pub struct Subject {
    pub out: PathBuf,
    /// `journal.jsonl`'s text.
    pub journal: String,
    /// The journal's events, in order.
    pub events: Vec<Event>,
    /// What the signature is checked against.
    pub trust: Trust,
    /// What a view this rfs cannot compare does to the verdict.
    pub views: Views,
}

/// What `rfs verify` does with a view (EVIDENCE.md, report.html) laid
/// out by another rfs, which it cannot compare with its own rendering.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Views {
    /// The bundle is not verified: nothing vouches for what the view
    /// says (the default).
    #[default]
    MustMatch,
    /// `--allow-unchecked-views`: the view is named as not checked and
    /// everything else must verify.
    AllowUnchecked,
}

/// A check that passed, with what it established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    pub check: &'static str,
    pub detail: String,
    /// The check's file was not checked (a view another rfs made,
    /// allowed by `--allow-unchecked-views`): nothing vouches for it.
    pub unchecked: bool,
}

pub use crate::journal::chain::{verify as verify_journal, ChainError, Verified};
pub use crate::seal::Trust;

/// Why a check failed.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    #[error("{}", bounded(&.0.to_string()))]
    Chain(#[from] ChainError),
    #[error("line {line} ({}) is not an entry this rfs knows: {}", quote(.kind), bounded(&.error.to_string()))]
    UnknownEntry {
        line: usize,
        kind: String,
        #[source]
        error: serde_json::Error,
    },
    #[error("the journal does not end with run.end (the run was killed before it ended, or lines were cut)")]
    NotEnded,
    #[error("cannot render the journal: {}", bounded(&.0.to_string()))]
    Unrenderable(#[from] journal::evidence::RenderError),
    #[error("cannot read {}: {error}", clip(.path))]
    Unreadable {
        path: String,
        #[source]
        error: std::io::Error,
    },
    #[error("differs from the rendering of the journal at line {line}: the file has {}, the journal renders {} (EVIDENCE.md was edited after the run)", quote(.file), quote(.journal))]
    EvidenceDiffers {
        line: usize,
        file: String,
        journal: String,
    },
    /// `report.html` is not the rendering of this bundle.
    #[error("differs from the rendering of the bundle at line {line} (report.html was edited after the run)")]
    ReportDiffers { line: usize },
    #[error("cannot render the report: {}", bounded(.0))]
    Report(String),
    /// A view laid out by another rfs: this rfs cannot compare it with
    /// its rendering, so it cannot vouch for what it says.
    #[error("{file} was made by another rfs ({made_by}; this rfs makes {this}): cannot vouch for it, so the bundle is not verified. `rfs report` makes the view again from the journal; `rfs verify --allow-unchecked-views` checks everything else and names the view as unchecked")]
    UncheckedView {
        file: &'static str,
        /// What the file says made it (its untrusted part quoted).
        made_by: String,
        this: &'static str,
    },
    #[error("the journal names {}, which is not a file under steps/, terminal/, artifacts/ or bundle/put/", quote(.path))]
    OutsideArtifacts { path: String },
    #[error("{} was changed after it was closed: journaled sha256 {} ({journaled_bytes} bytes), now {now} ({now_bytes} bytes)", clip(.path), clip(.journaled))]
    Changed {
        path: String,
        journaled: String,
        journaled_bytes: u64,
        now: String,
        now_bytes: u64,
    },
    #[error("{} is in the output directory but not in the journal (added after the run)", clip(.path))]
    Unjournaled { path: String },
    /// Something other than a regular file or directory (a symlink, a
    /// FIFO, a device) in the output directory: never followed or read.
    #[error("{} is {what}: an output directory holds regular files and directories only, and rfs reads nothing through a link", clip(.path))]
    NotRegular { path: String, what: &'static str },
    /// A bundled script or module differs from its journaled digest.
    #[error("{}", bounded(&.0.to_string()))]
    Bundle(#[from] crate::bundle::BundleMismatch),
    /// The link to the setup run whose checkpoint the sandbox started
    /// from does not hold (see [`crate::checkpoint_link`]).
    #[error("{}", bounded(.0))]
    CheckpointLink(String),
    /// `journal.sig` is missing, invalid, or not by an allowed signer.
    #[error("{}", bounded(&.0.to_string()))]
    Signature(#[from] crate::signing::SignatureError),
    /// `attestation.intoto.json` is missing, badly signed, or does not
    /// match the journal.
    #[error("{}", bounded(&.0.to_string()))]
    Attestation(#[from] crate::attestation::AttestationError),
}

/// The first check that failed (and those that passed before it).
#[derive(Debug, thiserror::Error)]
#[error("{check}: {reason}")]
pub struct Failed {
    pub check: &'static str,
    #[source]
    pub reason: Box<Failure>,
    pub passed: Vec<Passed>,
}

/// What a check established: said, or (a view it could not compare,
/// allowed) said as unchecked.
pub enum Established {
    Checked(String),
    Unchecked(String),
}

impl From<String> for Established {
    fn from(detail: String) -> Self {
        Established::Checked(detail)
    }
}

type CheckFn = fn(&Subject) -> Result<Established, Failure>;

/// The checks, in the order they run.
pub const CHECKS: &[(&str, CheckFn)] = &[
    ("journal chain", |s| check_chain(s).map(Into::into)),
    ("run ended", |s| check_ended(s).map(Into::into)),
    ("EVIDENCE.md", check_evidence),
    ("contents", |s| check_contents(s).map(Into::into)),
    ("files", |s| check_files(s).map(Into::into)),
    ("artifacts", |s| check_artifacts(s).map(Into::into)),
    ("bundle", |s| check_bundle(s).map(Into::into)),
    ("signature", |s| check_signature(s).map(Into::into)),
    ("checkpoint link", |s| {
        crate::checkpoint_link::check(&s.out, &s.events, &s.trust)
            .map(Into::into)
            .map_err(Failure::CheckpointLink)
    }),
    ("attestation", |s| check_attestation(s).map(Into::into)),
    // Last: it replays recordings, which only a bundle that passed every
    // other check deserves.
    ("report.html", check_report),
];

/// Verify the output directory `out` (a signature, if any, is checked
/// but not against allowed signers).
pub fn verify(out: &Path) -> Result<Vec<Passed>, Failed> {
    verify_with(out, Trust::default())
}

/// Verify `out`, its signature against `trust`.
pub fn verify_with(out: &Path, trust: Trust) -> Result<Vec<Passed>, Failed> {
    verify_except(out, trust, Views::default(), &[])
}

/// Verify `out`, its signature against `trust`, views another rfs made
/// as `views` says.
pub fn verify_views(out: &Path, trust: Trust, views: Views) -> Result<Vec<Passed>, Failed> {
    verify_except(out, trust, views, &[])
}

/// [`verify_views`] without the checks named in `skip` (`rfs report`
/// skips the report it is about to make again).
pub fn verify_except(
    out: &Path,
    trust: Trust,
    views: Views,
    skip: &[&str],
) -> Result<Vec<Passed>, Failed> {
    let fail = |check, reason: Failure| Failed {
        check,
        reason: Box::new(reason),
        passed: vec![],
    };
    let path = out.join("journal.jsonl");
    let text = crate::out_dir::read_regular(out, "journal.jsonl", crate::out_dir::MAX_RECORD_BYTES)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(|error| {
            fail(
                "journal chain",
                Failure::Unreadable {
                    path: path.display().to_string(),
                    error,
                },
            )
        })?;
    let mut events = vec![];
    for (i, raw) in text.split_terminator('\n').enumerate() {
        // Lines that do not parse are reported by the chain check.
        let Ok(line) = serde_json::from_str::<journal::Line>(raw) else {
            break;
        };
        match Event::from_kind_payload(&line.kind, &line.payload) {
            Ok(e) => events.push(e),
            Err(error) => {
                return Err(fail(
                    "journal chain",
                    Failure::UnknownEntry {
                        line: i + 1,
                        kind: line.kind,
                        error,
                    },
                ))
            }
        }
    }
    let subject = Subject {
        out: out.to_path_buf(),
        journal: text,
        events,
        trust,
        views,
    };
    let mut passed = vec![];
    for (check, f) in CHECKS.iter().filter(|(c, _)| !skip.contains(c)) {
        match f(&subject) {
            Ok(Established::Checked(detail)) => passed.push(Passed {
                check,
                detail,
                unchecked: false,
            }),
            Ok(Established::Unchecked(detail)) => passed.push(Passed {
                check,
                detail,
                unchecked: true,
            }),
            Err(reason) => {
                return Err(Failed {
                    check,
                    reason: Box::new(reason),
                    passed,
                })
            }
        }
    }
    Ok(passed)
}

fn check_chain(s: &Subject) -> Result<String, Failure> {
    let v = journal::chain::verify(&s.out.join("journal.jsonl"))?;
    Ok(format!("{} lines, head {}", v.lines, v.head))
}

fn check_ended(s: &Subject) -> Result<String, Failure> {
    match s.events.last() {
        Some(Event::RunEnd { outcome, .. }) => Ok(format!("outcome {outcome}")),
        _ => Err(Failure::NotEnded),
    }
}

fn check_signature(s: &Subject) -> Result<String, Failure> {
    let announced = match s.events.first() {
        Some(Event::RunStart { signing_key, .. }) => signing_key.as_deref(),
        _ => None,
    };
    crate::seal::check_signature(&s.out, s.journal.as_bytes(), announced, &s.trust)
        .map_err(Failure::Signature)
}

fn check_attestation(s: &Subject) -> Result<String, Failure> {
    crate::seal::check_attestation(&s.out, s.journal.as_bytes()).map_err(Failure::Attestation)
}
