//! rfs's own outputs are not dirt: the files and folders the person named
//! on this invocation's command line for rfs to write (`--junit FILE`,
//! `--out DIR`) do not make the working tree dirty when they are inside
//! it, so one run's `--junit out.xml` does not refuse the next.
//!
//! What the dirty check protects is that nobody believes an uncommitted
//! edit was tested (the synced tree is the committed tree either way).
//! An output rfs writes for the person is no such edit. So exactly those
//! paths (a folder: everything under it) are exempt, and only while git
//! says they are *untracked*: a tracked file there that was modified, a
//! staged one, or a deletion is still dirt, whoever wrote it. Nothing a
//! repository commits (`rfs.toml`) or a script asks for can name one.

use std::path::{Component, Path, PathBuf};

/// A path the person named for rfs to write, on this command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnOutput {
    /// Absolute.
    pub path: PathBuf,
    /// A folder (`--out`): everything under it too; else exactly the file.
    pub folder: bool,
}

/// Each output inside the work tree `root`, as a repository path
/// (`/`-separated) and whether it is a folder. The longest existing
/// ancestor of an output is resolved (links included), so the path is
/// the one git reports; one that leaves `root` or names `root` itself is
/// left out.
pub fn in_repo(root: &Path, outputs: &[OwnOutput]) -> Vec<(String, bool)> {
    let Ok(root) = root.canonicalize() else {
        return vec![];
    };
    outputs
        .iter()
        .filter_map(|o| {
            let p = resolved(&o.path)?;
            let rel = p.strip_prefix(&root).ok()?;
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_str().map(str::to_owned))
                .collect::<Option<_>>()?;
            (!parts.is_empty()).then(|| (parts.join("/"), o.folder))
        })
        .collect()
}

/// `p` with its longest existing ancestor canonicalized and the rest
/// (which does not exist, so holds no link) appended; `None` when the
/// rest holds `..`.
fn resolved(p: &Path) -> Option<PathBuf> {
    let mut rest = vec![];
    let mut at = p;
    loop {
        if let Ok(c) = at.canonicalize() {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return Some(out);
        }
        match at.components().next_back()? {
            Component::Normal(n) => rest.push(n.to_owned()),
            Component::CurDir => {}
            _ => return None,
        }
        at = at.parent()?;
    }
}

/// Whether the repository path `path`, with git status `st`, is one of
/// `outputs` (from [`in_repo`]) and untracked.
pub fn exempt(st: git2::Status, path: &str, outputs: &[(String, bool)]) -> bool {
    st == git2::Status::WT_NEW
        && outputs.iter().any(|(o, folder)| {
            path == o
                || (*folder
                    && path
                        .strip_prefix(o.as_str())
                        .is_some_and(|r| r.starts_with('/')))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_untracked_files_at_exactly_the_named_paths_are_exempt() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("reports")).unwrap();
        let outs = in_repo(
            d.path(),
            &[
                OwnOutput {
                    path: d.path().join("reports/./out.xml"),
                    folder: false,
                },
                OwnOutput {
                    path: d.path().join("runs/one"),
                    folder: true,
                },
                OwnOutput {
                    path: d.path().join("../elsewhere.xml"),
                    folder: false,
                },
                OwnOutput {
                    path: d.path().to_path_buf(),
                    folder: true,
                },
            ],
        );
        assert_eq!(
            outs,
            vec![("reports/out.xml".into(), false), ("runs/one".into(), true)]
        );
        let new = git2::Status::WT_NEW;
        assert!(exempt(new, "reports/out.xml", &outs));
        assert!(exempt(new, "runs/one/journal.jsonl", &outs));
        assert!(!exempt(new, "reports/out.xml.bak", &outs));
        assert!(!exempt(new, "reports/out.xml/x", &outs));
        assert!(!exempt(new, "runs/onex", &outs));
        assert!(!exempt(git2::Status::WT_MODIFIED, "reports/out.xml", &outs));
        assert!(!exempt(git2::Status::INDEX_NEW, "reports/out.xml", &outs));
    }
}
