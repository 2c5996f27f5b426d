//! Caches (`cache.*`) as EVIDENCE.md shows them: what each held when it
//! was mounted and at the end, and that a run which used one is not
//! reproducible from its commit alone.

use std::fmt::Write as _;

use super::inert_markdown::code;
use crate::events::Event;

/// One cache the run mounted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheRow {
    pub name: String,
    pub path: String,
    pub at_mount: (String, u64, u64),
    pub waited_ms: u64,
    /// sha256, files, bytes, changed, emptied.
    pub at_end: Option<(String, u64, u64, bool, bool)>,
}

/// Fold a `cache.*` fact into `rows`.
pub fn apply(rows: &mut Vec<CacheRow>, e: &Event) {
    match e {
        Event::CacheMount {
            name,
            path,
            sha256,
            files,
            bytes,
            waited_ms,
            ..
        } => rows.push(CacheRow {
            name: name.clone(),
            path: path.clone(),
            at_mount: (sha256.clone(), *files, *bytes),
            waited_ms: *waited_ms,
            at_end: None,
        }),
        Event::CacheEnd {
            name,
            sha256,
            files,
            bytes,
            changed,
            emptied,
            ..
        } => {
            if let Some(r) = rows.iter_mut().rev().find(|r| r.name == *name) {
                r.at_end = Some((sha256.clone(), *files, *bytes, *changed, *emptied));
            }
        }
        _ => {}
    }
}

/// The line said at the top of EVIDENCE.md when the run used a cache.
pub const NOT_REPRODUCIBLE: &str = "NOT REPRODUCIBLE from the commit alone: this run used a cache kept by rfs between runs (its content is named by digest below, not shipped in this bundle)";

/// EVIDENCE.md's section on caches.
pub fn evidence(s: &mut String, rows: &[CacheRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Caches\n");
    let _ = writeln!(
        s,
        "This run mounted caches that rfs keeps between runs of this repository on this provider. What a cache held came from earlier runs, not from the commit: **the run is not reproducible from the commit alone**. Each cache was held exclusively by this run (a flock, from before the sandbox was created until after it was destroyed).\n"
    );
    for r in rows {
        let (sha, files, bytes) = &r.at_mount;
        let _ = writeln!(
            s,
            "- {} at {}: at mount {files} file(s), {bytes} bytes, sha256 {}{}",
            code(&r.name),
            code(&r.path),
            code(sha),
            if r.waited_ms > 0 {
                format!(" (waited {} ms for another run)", r.waited_ms)
            } else {
                String::new()
            }
        );
        match &r.at_end {
            Some((sha, files, bytes, changed, emptied)) => {
                let _ = writeln!(
                    s,
                    "  - at the end: {files} file(s), {bytes} bytes, sha256 {}{}{}",
                    code(sha),
                    if *changed {
                        " (changed by this run)"
                    } else {
                        " (unchanged)"
                    },
                    if *emptied {
                        "; over its size cap, so emptied"
                    } else {
                        ""
                    }
                );
            }
            None => {
                let _ = writeln!(s, "  - (not yet released)");
            }
        }
    }
}
