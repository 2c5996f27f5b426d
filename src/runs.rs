//! `rfs runs`: the run bundles under the state directory's `runs/`,
//! newest first, each with its outcome (from its journal, read as
//! `rfs report` reads it: bounded, regular files only).

use std::path::{Path, PathBuf};

use rfs_evidence::journal::fold::RunSummary;

/// One bundle as `rfs runs` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Listed {
    pub(crate) dir: PathBuf,
    pub(crate) run_id: String,
    /// `completed`, `failed`, … or `running` (no `run.end` yet), or why
    /// the journal could not be read.
    pub(crate) outcome: String,
    pub(crate) script: String,
    pub(crate) provider: String,
    pub(crate) steps: usize,
}

/// The bundles in `runs` (the state directory's `runs/`), newest first. Entries that are not
/// folders holding a `journal.jsonl` are left out; links are not
/// followed.
pub(crate) fn list(runs: &Path) -> Vec<Listed> {
    let Ok(entries) = std::fs::read_dir(runs) else {
        return vec![];
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .map(|e| e.path())
        .filter(|d| std::fs::symlink_metadata(d.join("journal.jsonl")).is_ok_and(|m| m.is_file()))
        .collect();
    // Newest first: by when each journal was last written (runs of the
    // same second have ids that do not order by time), then by id.
    let written = |d: &PathBuf| {
        std::fs::symlink_metadata(d.join("journal.jsonl"))
            .and_then(|m| m.modified())
            .ok()
    };
    dirs.sort_by(|a, b| written(b).cmp(&written(a)).then_with(|| b.cmp(a)));
    dirs.into_iter().map(|d| describe(&d)).collect()
}

fn describe(dir: &Path) -> Listed {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match rfs_evidence::report::FinishedRun::read(dir) {
        Ok(b) => {
            let r: &RunSummary = &b.summary;
            Listed {
                dir: dir.to_path_buf(),
                run_id: if r.run_id.is_empty() {
                    name
                } else {
                    r.run_id.clone()
                },
                outcome: r.outcome.map_or("running", |o| o.as_str()).to_owned(),
                script: rfs_evidence::journal::evidence::script_shown(r),
                provider: r.provider.clone(),
                steps: r.steps.len(),
            }
        }
        Err(e) => Listed {
            dir: dir.to_path_buf(),
            run_id: name,
            outcome: format!("unreadable ({e})"),
            script: String::new(),
            provider: String::new(),
            steps: 0,
        },
    }
}

/// A bundle `rfs runs prune` removed (or, with `--dry-run`, would).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pruned {
    pub(crate) dir: PathBuf,
    pub(crate) why: String,
}

/// What `rfs runs prune` removes: the run bundles in `runs/` beyond the
/// newest `keep`, and those (and `suites/`, `bisects/` folders) last
/// written longer ago than `older_than`. A run that has not ended
/// (`running`, it may be live) is never removed.
pub(crate) fn prune(
    state: &Path,
    older_than: Option<std::time::Duration>,
    keep: Option<usize>,
    dry_run: bool,
) -> std::io::Result<Vec<Pruned>> {
    let mut doomed: Vec<Pruned> = vec![];
    let old = |dir: &Path| -> Option<u64> {
        let limit = older_than?;
        let written = std::fs::symlink_metadata(dir)
            .and_then(|m| m.modified())
            .ok()?;
        let age = written.elapsed().ok()?;
        (age > limit).then_some(age.as_secs())
    };
    for (i, r) in list(&state.join("runs")).into_iter().enumerate() {
        if r.outcome == "running" {
            continue;
        }
        let beyond = keep.is_some_and(|k| i >= k);
        let why = match (beyond, old(&r.dir)) {
            (true, _) => format!("{} newer runs are kept", keep.unwrap_or(0)),
            (false, Some(age)) => format!("last written {age} s ago"),
            (false, None) => continue,
        };
        doomed.push(Pruned { dir: r.dir, why });
    }
    for (folder, end) in [("suites", "index.json"), ("bisects", "bisect.json")] {
        let Ok(entries) = std::fs::read_dir(state.join(folder)) else {
            continue;
        };
        for e in entries.flatten() {
            let dir = e.path();
            // Only finished ones, never through a link.
            if !e.file_type().is_ok_and(|t| t.is_dir()) || !dir.join(end).is_file() {
                continue;
            }
            let touched = std::fs::symlink_metadata(dir.join(end))
                .and_then(|m| m.modified())
                .ok();
            let age = touched.and_then(|t| t.elapsed().ok());
            if let (Some(limit), Some(age)) = (older_than, age) {
                if age > limit {
                    doomed.push(Pruned {
                        dir,
                        why: format!("{folder}: finished {} s ago", age.as_secs()),
                    });
                }
            }
        }
    }
    if !dry_run {
        for d in &doomed {
            std::fs::remove_dir_all(&d.dir)?;
        }
    }
    Ok(doomed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_folders_with_a_journal_are_listed_newest_first() {
        let d = tempfile::tempdir().unwrap();
        for id in ["20261201T000000Z-a", "20261203T000000Z-b"] {
            std::fs::create_dir(d.path().join(id)).unwrap();
            std::fs::write(d.path().join(id).join("journal.jsonl"), "").unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        std::fs::create_dir(d.path().join("not-a-run")).unwrap();
        std::fs::write(d.path().join("stray.txt"), "x").unwrap();
        let l = list(d.path());
        let ids: Vec<_> = l.iter().map(|r| r.run_id.as_str()).collect();
        assert_eq!(ids, ["20261203T000000Z-b", "20261201T000000Z-a"]);
        assert_eq!(l[0].outcome, "running");
        assert!(list(&d.path().join("missing")).is_empty());
    }
}
