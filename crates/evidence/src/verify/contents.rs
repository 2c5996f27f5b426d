//! Every entry of an output directory is one rfs wrote or the journal
//! names.

use std::collections::BTreeSet;

use super::{Failure, Subject};
use crate::events::Event;

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
pub(super) fn check_contents(s: &Subject) -> Result<String, Failure> {
    let bundled = bundled_paths(&s.events);
    let collected = collected_paths(&s.events);
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
                    && [
                        "steps",
                        "terminal",
                        crate::bundle::DIR,
                        crate::checkpoint_link::SETUP_DIR,
                    ]
                    .contains(&name.as_str());
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
            } else if path.starts_with(&format!("{}/", crate::checkpoint_link::SETUP_DIR)) {
                crate::checkpoint_link::SETUP_FILES.contains(&path.as_str())
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

/// Every path of `bundle/` the journal names: the script, its modules,
/// the files `put()` bundled and their folders.
fn bundled_paths(events: &[Event]) -> BTreeSet<String> {
    let mut bundled: BTreeSet<String> = BTreeSet::new();
    if let Some(Event::RunStart {
        bundle: Some(b), ..
    }) = events.first()
    {
        bundled.extend(
            std::iter::once(&b.script)
                .chain(&b.modules)
                .map(|f| f.path.clone()),
        );
    }
    for e in events {
        if let Event::BundleModule { path, .. } = e {
            bundled.insert(path.clone());
        }
    }
    for e in events {
        if let Event::ArtifactPut {
            bundled: Some(b), ..
        } = e
        {
            bundled.insert(b.clone());
            dirs_of(b, &mut bundled);
        }
    }
    bundled
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
