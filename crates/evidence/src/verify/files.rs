//! Files the journal names (step logs, recordings, collected and put
//! files, the bundled script and modules) still have their journaled
//! digests.

use std::collections::BTreeSet;
use std::path::{Component, Path};

use super::{Failure, Subject};
use crate::events::{Event, FileDigest};
use crate::journal;

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

pub(super) fn check_files(s: &Subject) -> Result<String, Failure> {
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

/// Every file `collect()` kept and `put()` shipped still has its
/// journaled sha256 and size (extra files are refused by the contents
/// check; a missing one cannot be read here).
pub(super) fn check_artifacts(s: &Subject) -> Result<String, Failure> {
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

pub(super) fn check_bundle(s: &Subject) -> Result<String, Failure> {
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
