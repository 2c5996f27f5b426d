//! `--allow-dirty`: the working tree as it is, as a commit rfs can ship
//! like any other. As `git stash create` does, the snapshot's blobs,
//! trees and one commit (on top of HEAD) are written to the repository's
//! object database; no ref, no index file and no working-tree file is
//! changed, and nothing points at the commit (git's gc prunes it). The
//! commit has a fixed author and time, so the same working tree on the
//! same HEAD is the same commit id.

use git2::{IndexAddOption, Oid, Repository, Signature, Time};

use super::SourceError;

/// Commit the working tree (tracked changes, deletions, untracked files
/// that are not ignored, but the untracked paths in `leave_out`: rfs's
/// own outputs) on top of `base`, without touching refs or the index
/// file; the snapshot commit's id.
pub fn snapshot(repo: &Repository, base: Oid, leave_out: &[String]) -> Result<Oid, SourceError> {
    if repo.is_bare() {
        return Err(SourceError::Git(
            "a bare repository has no working tree to ship".into(),
        ));
    }
    let parent = repo.find_commit(base)?;
    // The index as read from disk, changed in memory only: its file is
    // never written.
    let mut index = repo.index()?;
    // `add_all` calls back with each path it is about to add; 1 skips it.
    let mut skip = |path: &std::path::Path, _: &[u8]| -> i32 {
        let p = path.to_string_lossy();
        i32::from(leave_out.iter().any(|l| *l == p))
    };
    index.add_all(["*"], IndexAddOption::DEFAULT, Some(&mut skip))?;
    index.update_all(["*"], None)?;
    let tree = repo.find_tree(index.write_tree()?)?;
    // Leave the repository's cached index as the file says.
    index.read(true)?;
    let who = Signature::new("rfs", "rfs@localhost", &Time::new(0, 0))?;
    let message = format!(
        "rfs --allow-dirty: the working tree on top of {base} (not reproducible: it is in no branch)\n"
    );
    let id = repo.commit(None, &who, &who, &message, &tree, &[&parent])?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> (tempfile::TempDir, Repository, Oid) {
        let d = tempfile::tempdir().unwrap();
        let r = Repository::init(d.path()).unwrap();
        std::fs::write(d.path().join("kept"), "1").unwrap();
        std::fs::write(d.path().join("gone"), "2").unwrap();
        std::fs::write(d.path().join(".gitignore"), "ignored\n").unwrap();
        let mut ix = r.index().unwrap();
        ix.add_all(["*"], IndexAddOption::DEFAULT, None).unwrap();
        ix.write().unwrap();
        let tree = r.find_tree(ix.write_tree().unwrap()).unwrap();
        let who = Signature::now("t", "t@t").unwrap();
        let c = r
            .commit(Some("HEAD"), &who, &who, "init", &tree, &[])
            .unwrap();
        drop(tree);
        (d, r, c)
    }

    #[test]
    fn the_snapshot_holds_changes_new_files_and_deletions_and_touches_no_ref_or_index() {
        let (d, r, head) = repo();
        std::fs::write(d.path().join("kept"), "changed").unwrap();
        std::fs::remove_file(d.path().join("gone")).unwrap();
        std::fs::write(d.path().join("new"), "3").unwrap();
        std::fs::write(d.path().join("ignored"), "4").unwrap();
        let index_before = std::fs::read(d.path().join(".git/index")).unwrap();
        let snap = snapshot(&r, head, &[]).unwrap();
        let c = r.find_commit(snap).unwrap();
        assert_eq!(c.parent_id(0).unwrap(), head);
        let t = c.tree().unwrap();
        let blob = |p: &str| {
            t.get_path(std::path::Path::new(p))
                .ok()
                .map(|e| r.find_blob(e.id()).unwrap().content().to_vec())
        };
        assert_eq!(blob("kept").as_deref(), Some(&b"changed"[..]));
        assert_eq!(blob("new").as_deref(), Some(&b"3"[..]));
        assert_eq!(blob("gone"), None);
        assert_eq!(blob("ignored"), None);
        assert_eq!(r.head().unwrap().target(), Some(head));
        assert_eq!(
            std::fs::read(d.path().join(".git/index")).unwrap(),
            index_before
        );
        // Same tree, same HEAD: the same commit.
        assert_eq!(snapshot(&r, head, &[]).unwrap(), snap);
    }

    #[test]
    fn the_snapshot_leaves_out_rfss_own_untracked_outputs() {
        let (d, r, head) = repo();
        std::fs::create_dir(d.path().join("reports")).unwrap();
        std::fs::write(d.path().join("reports/junit.xml"), "<x/>").unwrap();
        std::fs::write(d.path().join("new"), "3").unwrap();
        let snap = snapshot(&r, head, &["reports/junit.xml".into()]).unwrap();
        let t = r.find_commit(snap).unwrap().tree().unwrap();
        assert!(t.get_path(std::path::Path::new("new")).is_ok());
        assert!(t
            .get_path(std::path::Path::new("reports/junit.xml"))
            .is_err());
    }
}
