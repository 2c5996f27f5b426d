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

/// What a check is given: the output directory and its journal, read once.
pub struct Subject {
    pub out: PathBuf,
    /// `journal.jsonl`'s text.
    pub journal: String,
    /// The journal's events, in order.
    pub events: Vec<Event>,
}

/// A check that passed, with what it established.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Passed {
    pub check: &'static str,
    pub detail: String,
}

/// The first check that failed (and those that passed before it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{check}: {reason}")]
pub struct Failed {
    pub check: &'static str,
    pub reason: String,
    pub passed: Vec<Passed>,
}

type CheckFn = fn(&Subject) -> Result<String, String>;

/// The checks, in the order they run.
pub const CHECKS: &[(&str, CheckFn)] = &[
    ("journal chain", check_chain),
    ("run ended", check_ended),
    ("EVIDENCE.md", check_evidence),
    ("files", check_files),
];

/// Verify the output directory `out`.
pub fn verify(out: &Path) -> Result<Vec<Passed>, Failed> {
    let fail = |check, reason: String| Failed {
        check,
        reason,
        passed: vec![],
    };
    let path = out.join("journal.jsonl");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        fail(
            "journal chain",
            format!("cannot read {}: {e}", path.display()),
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
            Err(e) => {
                return Err(fail(
                    "journal chain",
                    format!(
                        "line {} (`{}`) is not an entry this rfs knows: {e}",
                        i + 1,
                        line.kind
                    ),
                ))
            }
        }
    }
    let subject = Subject {
        out: out.to_path_buf(),
        journal: text,
        events,
    };
    let mut passed = vec![];
    for (check, f) in CHECKS {
        match f(&subject) {
            Ok(detail) => passed.push(Passed { check, detail }),
            Err(reason) => {
                return Err(Failed {
                    check,
                    reason,
                    passed,
                })
            }
        }
    }
    Ok(passed)
}

fn check_chain(s: &Subject) -> Result<String, String> {
    let v = journal::verify::verify(&s.out.join("journal.jsonl")).map_err(|e| e.to_string())?;
    Ok(format!("{} lines, head {}", v.lines, v.head))
}

fn check_ended(s: &Subject) -> Result<String, String> {
    match s.events.last() {
        Some(Event::RunEnd { outcome, .. }) => Ok(format!("outcome {outcome}")),
        _ => Err("the journal does not end with run.end (the run was killed before it ended, or lines were cut)".into()),
    }
}

fn check_evidence(s: &Subject) -> Result<String, String> {
    let expected = journal::evidence::render_journal(&s.journal).map_err(|e| e.to_string())?;
    let path = s.out.join("EVIDENCE.md");
    let actual = std::fs::read(&path).map_err(|e| format!("cannot read EVIDENCE.md: {e}"))?;
    if actual == expected.as_bytes() {
        return Ok(format!(
            "equals the rendering of the journal ({} bytes)",
            actual.len()
        ));
    }
    let actual = String::from_utf8_lossy(&actual);
    let mut a = actual.lines();
    let mut e = expected.lines();
    let mut n = 0;
    loop {
        n += 1;
        match (a.next(), e.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                return Err(format!(
                    "differs from the rendering of the journal at line {n}: the file has {:?}, the journal renders {:?} (EVIDENCE.md was edited after the run)",
                    x.unwrap_or("(end of file)"),
                    y.unwrap_or("(end of file)")
                ))
            }
        }
    }
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

fn check_files(s: &Subject) -> Result<String, String> {
    let files = journaled_files(&s.events);
    let mut named = BTreeSet::new();
    for f in &files {
        let rel = Path::new(&f.path);
        let inside = rel.components().all(|c| matches!(c, Component::Normal(_)))
            && ARTIFACT_DIRS.iter().any(|d| rel.starts_with(d));
        if !inside {
            return Err(format!(
                "the journal names {:?}, which is not a file under steps/ or terminal/",
                f.path
            ));
        }
        let now = journal::file_digest(&s.out, &f.path)
            .map_err(|e| format!("{}: cannot read it: {e}", f.path))?;
        if now.sha256 != f.sha256 || now.bytes != f.bytes {
            return Err(format!(
                "{} was changed after it was closed: journaled sha256 {} ({} bytes), now {} ({} bytes)",
                f.path, f.sha256, f.bytes, now.sha256, now.bytes
            ));
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
        if let Some(p) = extra.first() {
            return Err(format!(
                "{p} is in the output directory but not in the journal (added after the run)"
            ));
        }
    }
    Ok(format!(
        "{} step log(s), recording(s) and snapshot(s) match their journaled sha256",
        files.len()
    ))
}
