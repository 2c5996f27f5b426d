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

/// What makes the run not reproducible from its commit alone through
/// caches, one sentence each (plain text; each view escapes it): the
/// caches it mounted itself ([`NOT_REPRODUCIBLE`]), and those the setup
/// run whose checkpoint its sandbox started from had mounted before it
/// (the fork inherits what they did).
pub fn not_reproducible(
    rows: &[CacheRow],
    forked: Option<&crate::events::checkpoint_facts::Forked>,
) -> Vec<String> {
    let mut said = vec![];
    if !rows.is_empty() {
        said.push(NOT_REPRODUCIBLE.to_owned());
    }
    if let Some(f) = forked.filter(|f| !f.setup_caches.is_empty()) {
        said.push(format!(
            "NOT REPRODUCIBLE from the commit alone: this run's sandbox started from checkpoint {} of setup run {}, which had used {} kept by rfs between runs; the fork inherits what it did (named by digest, not shipped in this bundle)",
            f.checkpoint_id,
            f.setup_run_id,
            setup_caches_text(&f.setup_caches)
        ));
    }
    said
}

/// `the cache pip at ~/.cache/pip (sha256 …)`, for every cache a setup
/// had mounted.
pub fn setup_caches_text(caches: &[crate::events::checkpoint_facts::SetupCache]) -> String {
    let each: Vec<String> = caches
        .iter()
        .map(|c| format!("{} at {} (sha256 {} at mount)", c.name, c.path, c.sha256))
        .collect();
    format!(
        "{} {}",
        if caches.len() == 1 {
            "the cache"
        } else {
            "the caches"
        },
        each.join(", ")
    )
}

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
