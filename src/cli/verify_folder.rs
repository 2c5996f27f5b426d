//! `rfs verify` of a suite's or a bisect's folder (#46): "cannot read
//! …/journal.jsonl" was all it said. Every bundle below the folder is
//! verified, and a suite's `index.json` against them: each bundle it
//! names must be inside the folder, be a bundle, verify, and be the run
//! the index says (its run id), and no bundle may be left out of it.
//! The folder is data someone handed over: nothing is followed through a
//! link, and a path outside it is refused.

use std::path::{Path, PathBuf};

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

/// Whether `dir` is a suite's or a bisect's folder (not a bundle).
pub(super) fn is_folder(dir: &Path) -> bool {
    !dir.join("journal.jsonl").exists()
        && (dir.join("index.json").is_file() || dir.join("bisect.json").is_file())
}

/// Verify every bundle below `dir`, and a suite's index against them.
pub(super) fn verify(
    dir: &Path,
    trust: &rfs_evidence::seal::Trust,
    views: rfs_evidence::verify::Views,
) -> Result<i32, Error> {
    let root = std::fs::canonicalize(dir).map_err(|e| not_verified(dir, format!("{e}")))?;
    let mut found = vec![];
    bundles_under(&root, 0, &mut found);
    found.sort();
    if found.is_empty() {
        return Err(not_verified(dir, "it holds no bundle".into()));
    }
    let mut failures = vec![];
    if root.join("index.json").is_file() {
        failures.extend(index_against(&root, &found));
    }
    for b in &found {
        let shown = b.strip_prefix(&root).unwrap_or(b).display().to_string();
        match rfs_evidence::verify::verify_views(b, trust.clone(), views) {
            Ok(_) => outln!("ok: {shown}: verified"),
            Err(f) => {
                outln!("FAILED: {shown}: {}: {}", f.check, f.reason);
                failures.push(format!("{shown}: {}", f.check));
            }
        }
    }
    if failures.is_empty() {
        outln!("{}: verified ({} bundles)", dir.display(), found.len());
        return Ok(exit_code::SUCCESS);
    }
    Err(not_verified(dir, failures.join("; ")))
}

fn not_verified(dir: &Path, reason: String) -> Error {
    Error::NotVerified {
        out: dir.display().to_string(),
        check: "folder",
        reason,
    }
}

/// The bundles (folders holding `journal.jsonl`) below `dir`, a few
/// levels deep, never through a link.
fn bundles_under(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) {
    if depth > 4 {
        return;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if !e.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let p = e.path();
        if p.join("journal.jsonl").is_file() {
            out.push(p.clone());
        }
        bundles_under(&p, depth + 1, out);
    }
}

/// What a suite's `index.json` says against the bundles found: each
/// failure in words.
fn index_against(root: &Path, found: &[PathBuf]) -> Vec<String> {
    let text = match std::fs::read_to_string(root.join("index.json")) {
        Ok(t) => t,
        Err(e) => return vec![format!("index.json: {e}")],
    };
    let ix: serde_json::Value = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(e) => return vec![format!("index.json: {e}")],
    };
    // (where it says a bundle is, the run id it says it is)
    let mut named: Vec<(String, String)> = vec![];
    let mut name = |v: &serde_json::Value| {
        if let Some(d) = v["out_dir"].as_str().filter(|d| !d.is_empty()) {
            named.push((d.to_owned(), v["run_id"].as_str().unwrap_or("").to_owned()));
        }
    };
    name(&ix["setup"]);
    for p in ix["proofs"].as_array().into_iter().flatten() {
        for a in p["attempts"].as_array().into_iter().flatten() {
            name(a);
        }
    }
    let mut failures = vec![];
    let mut listed = vec![];
    for (d, run_id) in named {
        let Ok(real) = std::fs::canonicalize(&d) else {
            failures.push(format!("index.json names {d}, which is not there"));
            continue;
        };
        if !real.starts_with(root) || !found.contains(&real) {
            failures.push(format!(
                "index.json names {d}, which is not a bundle of this folder"
            ));
            continue;
        }
        let journal_run = rfs_evidence::report::FinishedRun::read(&real)
            .ok()
            .map(|r| r.summary.run_id.clone());
        if !run_id.is_empty() && journal_run.as_deref() != Some(run_id.as_str()) {
            failures.push(format!(
                "index.json says {d} is run {run_id}; its journal says {}",
                journal_run.as_deref().unwrap_or("nothing")
            ));
        }
        listed.push(real);
    }
    for b in found {
        if !listed.contains(b) {
            failures.push(format!(
                "{} is a bundle index.json does not list",
                b.strip_prefix(root).unwrap_or(b).display()
            ));
        }
    }
    for f in &failures {
        outln!("FAILED: index.json: {f}");
    }
    if failures.is_empty() {
        outln!("ok: index.json: names every bundle of the folder, each the run it says");
    }
    failures
}
