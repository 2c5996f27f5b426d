//! `rfs verify OUT`: check a run's output directory as a whole — the
//! journal's chain, that the run ended, that `EVIDENCE.md` is exactly the
//! rendering of the journal, and that every file the journal names
//! (step logs, terminal recordings, screen snapshots) still has the
//! digest journaled when it was closed, and no other such file exists.
//!
//! Checks run in order and stop at the first failure. Each is one entry
//! of [`CHECKS`]; a new check (signatures, attestations) is one more entry.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::events::{Event, FileDigest};
use crate::journal;
use crate::text::{bounded, clip, quote};

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

/// A view this rfs cannot compare (`made_by` another rfs): refused, or
/// with [`Views::AllowUnchecked`] named as not checked.
fn unchecked_view(
    s: &Subject,
    file: &'static str,
    made_by: String,
    this: &'static str,
    remedy: &str,
) -> Result<Established, Failure> {
    match s.views {
        Views::MustMatch => Err(Failure::UncheckedView {
            file,
            made_by,
            this,
        }),
        Views::AllowUnchecked => Ok(Established::Unchecked(format!(
            "NOT CHECKED: made by another rfs ({made_by}; this rfs makes {this}), so nothing vouches for what it says (allowed by --allow-unchecked-views); {remedy}"
        ))),
    }
}

fn check_evidence(s: &Subject) -> Result<Established, Failure> {
    let expected = journal::evidence::render_journal(&s.journal)?;
    let actual =
        crate::out_dir::read_regular(&s.out, "EVIDENCE.md", crate::out_dir::MAX_RECORD_BYTES)
            .map_err(|error| Failure::Unreadable {
                path: "EVIDENCE.md".into(),
                error,
            })?;
    if actual == expected.as_bytes() {
        return Ok(Established::Checked(format!(
            "equals the rendering of the journal ({} bytes)",
            actual.len()
        )));
    }
    let actual = String::from_utf8_lossy(&actual);
    // A file another rfs laid out is not this rfs's rendering to compare
    // with, and what it says is then vouched for by nobody (a failed
    // run's rewritten to "completed" would read as verified): refused
    // unless the person running verify allows it.
    let layout = journal::evidence::format_of(&actual);
    if layout != Some(journal::evidence::FORMAT) {
        return unchecked_view(
            s,
            "EVIDENCE.md",
            layout.map_or("an earlier layout, which names none".to_owned(), |l| {
                format!("layout {}", quote(l))
            }),
            journal::evidence::FORMAT,
            "`rfs report OUT --format markdown` shows this rfs's view of the journal",
        );
    }
    let mut a = actual.lines();
    let mut e = expected.lines();
    let mut n = 0;
    loop {
        n += 1;
        match (a.next(), e.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                return Err(Failure::EvidenceDiffers {
                    line: n,
                    file: x.unwrap_or("(end of file)").to_owned(),
                    journal: y.unwrap_or("(end of file)").to_owned(),
                })
            }
        }
    }
}

/// `report.html`, when the bundle has one (bundles of earlier versions
/// do not), is exactly the rendering of the bundle: a view, like
/// EVIDENCE.md, that nobody edited.
fn check_report(s: &Subject) -> Result<Established, Failure> {
    let file = crate::report::HTML_FILE;
    if std::fs::symlink_metadata(s.out.join(file)).is_err() {
        return Ok(Established::Checked(
            "none in this bundle (it is a view: `rfs report` makes one)".into(),
        ));
    }
    let actual = crate::out_dir::read_regular(&s.out, file, crate::out_dir::MAX_RECORD_BYTES)
        .map_err(|error| Failure::Unreadable {
            path: file.into(),
            error,
        })?;
    // A report drawn by another rfs (another page format) is not this
    // rfs's rendering to compare with: a browser would run its script
    // and show what it says, vouched for by nobody.
    let made_by = crate::report::html::generator_of(&actual);
    if made_by.as_deref() != Some(crate::report::html::GENERATOR) {
        return unchecked_view(
            s,
            "report.html",
            made_by.map_or("a page naming no generator".to_owned(), |g| {
                format!("generator {}", quote(&g))
            }),
            crate::report::html::GENERATOR,
            "do not open it: `rfs report OUT` makes it again from the journal",
        );
    }
    // The journal verify already read, not a second read of the file.
    let bundle = crate::report::FinishedRun::of_journal(&s.journal)
        .map_err(|e| Failure::Report(e.to_string()))?;
    let expected = crate::report::page_of(&s.out, &bundle);
    if actual == expected.as_bytes() {
        return Ok(Established::Checked(format!(
            "equals the rendering of the bundle ({} bytes)",
            actual.len()
        )));
    }
    let actual = String::from_utf8_lossy(&actual);
    let line = actual
        .lines()
        .zip(expected.lines())
        .position(|(a, e)| a != e)
        .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()))
        + 1;
    Err(Failure::ReportDiffers { line })
}

/// Every file digest the journal holds.
fn journaled_files(events: &[Event]) -> Vec<&FileDigest> {
    let mut files = vec![];
    for e in events {
        match e {
            Event::StepAttempt {
                stdout_log,
                stderr_log,
                ..
            }
            | Event::StepProviderError {
                stdout_log,
                stderr_log,
                ..
            }
            | Event::SpawnEnd {
                stdout_log,
                stderr_log,
                ..
            }
            | Event::ServiceEnd {
                stdout_log,
                stderr_log,
                ..
            } => files.extend([stdout_log, stderr_log].into_iter().flatten()),
            Event::AttachAssert {
                snapshot: Some(f), ..
            } => files.push(f),
            Event::AttachEnd {
                recording: Some(f), ..
            } => files.push(f),
            _ => {}
        }
    }
    files
}

/// The directories whose every file must be journaled.
const ARTIFACT_DIRS: [&str; 2] = ["steps", "terminal"];

fn check_files(s: &Subject) -> Result<String, Failure> {
    let files = journaled_files(&s.events);
    let mut named = BTreeSet::new();
    for f in &files {
        let rel = Path::new(&f.path);
        let inside = rel.components().all(|c| matches!(c, Component::Normal(_)))
            && ARTIFACT_DIRS.iter().any(|d| rel.starts_with(d));
        if !inside {
            return Err(Failure::OutsideArtifacts {
                path: f.path.clone(),
            });
        }
        // Refused unread when not a regular file inside the bundle, or
        // larger than journaled: no byte outside it is hashed or sized.
        let now = journal::file_digest_at_most(&s.out, &f.path, f.bytes).map_err(|error| {
            Failure::Unreadable {
                path: f.path.clone(),
                error,
            }
        })?;
        if now.sha256 != f.sha256 || now.bytes != f.bytes {
            return Err(Failure::Changed {
                path: f.path.clone(),
                journaled: f.sha256.clone(),
                journaled_bytes: f.bytes,
                now: now.sha256,
                now_bytes: now.bytes,
            });
        }
        named.insert(f.path.clone());
    }
    for dir in ARTIFACT_DIRS {
        let Ok(entries) = std::fs::read_dir(s.out.join(dir)) else {
            continue;
        };
        let mut extra: Vec<String> = entries
            .filter_map(|e| e.ok())
            .map(|e| format!("{dir}/{}", e.file_name().to_string_lossy()))
            .filter(|p| !named.contains(p))
            .collect();
        extra.sort();
        if let Some(path) = extra.into_iter().next() {
            return Err(Failure::Unjournaled { path });
        }
    }
    Ok(format!(
        "{} step log(s), recording(s) and snapshot(s) match their journaled sha256",
        files.len()
    ))
}

/// The files rfs itself writes at the top of an output directory.
const TOP_FILES: [&str; 7] = [
    "journal.jsonl",
    crate::report::HTML_FILE,
    crate::journal::head::FILE,
    "EVIDENCE.md",
    ".gitignore",
    crate::attestation::FILE,
    crate::signing::SIG_FILE,
];

/// Every entry of the output directory is rfs's: a regular file or
/// directory (no link, FIFO or device anywhere), at the top only the
/// files rfs writes and its three folders, and in `bundle/` only the
/// files the journal names. (`steps/` and `terminal/` are matched
/// against the journal by the files check.)
fn check_contents(s: &Subject) -> Result<String, Failure> {
    let mut bundled: BTreeSet<String> = BTreeSet::new();
    if let Some(Event::RunStart {
        bundle: Some(b), ..
    }) = s.events.first()
    {
        bundled.extend(
            std::iter::once(&b.script)
                .chain(&b.modules)
                .map(|f| f.path.clone()),
        );
    }
    for e in &s.events {
        if let Event::BundleModule { path, .. } = e {
            bundled.insert(path.clone());
        }
    }
    let collected = collected_paths(&s.events);
    for e in &s.events {
        if let Event::ArtifactPut {
            bundled: Some(b), ..
        } = e
        {
            bundled.insert(b.clone());
            dirs_of(b, &mut bundled);
        }
    }
    let mut stack = vec![String::new()];
    let mut n = 0;
    while let Some(rel) = stack.pop() {
        let dir = if rel.is_empty() {
            s.out.clone()
        } else {
            s.out.join(&rel)
        };
        let entries = std::fs::read_dir(&dir).map_err(|error| Failure::Unreadable {
            path: if rel.is_empty() {
                ".".into()
            } else {
                rel.clone()
            },
            error,
        })?;
        for e in entries {
            let e = e.map_err(|error| Failure::Unreadable {
                path: rel.clone(),
                error,
            })?;
            let name = e.file_name().to_string_lossy().into_owned();
            let path = if rel.is_empty() {
                name.clone()
            } else {
                format!("{rel}/{name}")
            };
            let kind = e.file_type().map_err(|error| Failure::Unreadable {
                path: path.clone(),
                error,
            })?;
            n += 1;
            if kind.is_symlink() {
                return Err(Failure::NotRegular {
                    path,
                    what: "a symlink",
                });
            }
            if kind.is_dir() {
                let top_dir = rel.is_empty()
                    && ["steps", "terminal", crate::bundle::DIR].contains(&name.as_str());
                let artifacts_dir =
                    path == crate::out_dir::ARTIFACTS_DIR || collected.contains(&path);
                if !top_dir
                    && !artifacts_dir
                    && !path.starts_with(&format!("{}/", crate::bundle::DIR))
                {
                    return Err(Failure::Unjournaled { path });
                }
                stack.push(path);
                continue;
            }
            if !kind.is_file() {
                return Err(Failure::NotRegular {
                    path,
                    what: "not a regular file (a FIFO, socket or device)",
                });
            }
            let known = if rel.is_empty() {
                TOP_FILES.contains(&name.as_str())
            } else if path.starts_with(&format!("{}/", crate::bundle::DIR)) {
                bundled.contains(&path)
            } else if path.starts_with(&format!("{}/", crate::out_dir::ARTIFACTS_DIR)) {
                collected.contains(&path)
            } else {
                true
            };
            if !known {
                return Err(Failure::Unjournaled { path });
            }
        }
    }
    Ok(format!(
        "{n} entries, each a regular file or directory rfs wrote"
    ))
}

/// Every folder above `path` (`a`, `a/b` for `a/b/c`) into `set`.
fn dirs_of(path: &str, set: &mut BTreeSet<String>) {
    let mut at = 0;
    while let Some(i) = path[at..].find('/') {
        set.insert(path[..at + i].to_owned());
        at += i + 1;
    }
}

/// Every file and folder `collect()` wrote into `artifacts/`, as the
/// journal names them.
fn collected_paths(events: &[Event]) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for e in events {
        if let Event::ArtifactCollected { files, dirs, .. } = e {
            for f in files {
                set.insert(f.path.clone());
                dirs_of(&f.path, &mut set);
            }
            for d in dirs {
                set.insert(d.clone());
                dirs_of(d, &mut set);
            }
        }
    }
    set
}

/// Every file `collect()` kept and `put()` shipped still has its
/// journaled sha256 and size (extra files are refused by the contents
/// check; a missing one cannot be read here).
fn check_artifacts(s: &Subject) -> Result<String, Failure> {
    let mut n = 0;
    let mut check = |path: &str, sha256: &str, bytes: u64| -> Result<(), Failure> {
        let inside = Path::new(path)
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
            && (path.starts_with(&format!("{}/", crate::out_dir::ARTIFACTS_DIR))
                || path.starts_with(&format!("{}/", crate::out_dir::PUT_DIR)));
        if !inside {
            return Err(Failure::OutsideArtifacts {
                path: path.to_owned(),
            });
        }
        let now = journal::file_digest_at_most(&s.out, path, bytes).map_err(|error| {
            Failure::Unreadable {
                path: path.to_owned(),
                error,
            }
        })?;
        if now.sha256 != sha256 || now.bytes != bytes {
            return Err(Failure::Changed {
                path: path.to_owned(),
                journaled: sha256.to_owned(),
                journaled_bytes: bytes,
                now: now.sha256,
                now_bytes: now.bytes,
            });
        }
        n += 1;
        Ok(())
    };
    for e in &s.events {
        match e {
            Event::ArtifactCollected { files, .. } => {
                for f in files {
                    check(&f.path, &f.sha256, f.bytes)?;
                }
            }
            Event::ArtifactPut {
                bundled: Some(b),
                sha256,
                bytes,
                ..
            } => check(b, sha256, *bytes)?,
            _ => {}
        }
    }
    Ok(format!(
        "{n} collected or put file(s) match their journaled sha256"
    ))
}

fn check_bundle(s: &Subject) -> Result<String, Failure> {
    for e in &s.events {
        if let Event::BundleModule { path, sha256, .. } = e {
            let now = journal::file_digest_at_most(&s.out, path, crate::out_dir::MAX_MODULE_BYTES)
                .map_err(|error| Failure::Unreadable {
                    path: path.clone(),
                    error,
                })?;
            if now.sha256 != *sha256 {
                return Err(Failure::Bundle(crate::bundle::BundleMismatch::Changed {
                    path: path.clone(),
                    got: now.sha256,
                    want: sha256.clone(),
                }));
            }
        }
    }
    match s.events.first() {
        Some(Event::RunStart {
            bundle: Some(b), ..
        }) => crate::bundle::check_redacted(&s.out, b, &redacted(&s.events))
            .map(|n| {
                format!(
                    "the script and {} module(s) match their journaled sha256",
                    n - 1
                )
            })
            .map_err(Failure::Bundle),
        _ => Ok("none (the run had no script file)".into()),
    }
}

/// The bundled files redacted at run end, with their new digests.
fn redacted(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::BundleRedacted { path, sha256 } => Some((path.clone(), sha256.clone())),
            _ => None,
        })
        .collect()
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
