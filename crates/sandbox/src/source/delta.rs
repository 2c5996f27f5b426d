//! Re-sync: pinning a new commit in the sandbox that holds an earlier one,
//! shipping only what differs.
//!
//! The rule for the synced root after a re-sync: every path the new commit
//! tracks is exactly the new commit (content, type, executable bit, symlink
//! target); paths the old commit tracked and the new one does not are
//! removed (a directory only when nothing untracked is left in it); paths
//! neither commit tracks (build outputs, caches, logs that steps wrote) are
//! kept, unless the new commit needs the path itself.
//!
//! - [`next_tree`] derives the new commit's manifest from the bound one and
//!   a git tree-to-tree diff (unchanged blobs keep their verified digests).
//! - [`plan`] compares the new manifest with what the sandbox reports
//!   ([`Listing`]) and decides what to remove and what to ship: changed
//!   paths, paths whose type or mode differs, and tracked files whose
//!   content differs from the commit. Which files may differ, the
//!   modification time says (written since the last sync:
//!   [`candidates`]); whether they do, their hash in the sandbox. A file
//!   the previous re-sync shipped is newer than the time stamp too, and is
//!   not shipped again unless something changed it since.
//! - [`check`] compares the sandbox's report after the change with the new
//!   manifest: the whole file set, types, modes and symlink targets, and the
//!   content of every file written by the re-sync.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use git2::{Delta, DiffOptions, ObjectType, Oid, Repository};

use super::archive::Shipped;
use super::display_path;
use super::manifest::{Entry, Manifest};
use super::SourceError;

/// The new commit's tree as the sandbox must hold it.
#[derive(Debug, Clone)]
pub struct NextTree {
    /// Files changed by the diff have an empty `sha256` until shipped.
    pub manifest: Manifest,
    /// Paths (files and symlinks) the diff added or modified.
    pub changed: BTreeSet<Vec<u8>>,
    pub added: usize,
    pub modified: usize,
    pub deleted: usize,
}

/// Derive the manifest of `new_tree` from `old` (the manifest of
/// `old_tree`) and the diff between the two trees.
pub fn next_tree(
    repo_dir: &Path,
    old_tree: Oid,
    new_tree: Oid,
    old: &Manifest,
) -> Result<NextTree, SourceError> {
    super::archive::bound_git_memory();
    let repo = Repository::open(repo_dir)?;
    let a = repo.find_tree(old_tree)?;
    let b = repo.find_tree(new_tree)?;
    let mut opts = DiffOptions::new();
    opts.include_typechange(false);
    let diff = repo.diff_tree_to_tree(Some(&a), Some(&b), Some(&mut opts))?;
    let mut manifest = old.clone();
    let mut inserts = vec![];
    let (mut added, mut modified, mut deleted) = (0, 0, 0);
    for d in diff.deltas() {
        let (old_f, new_f) = (d.old_file(), d.new_file());
        for f in [&old_f, &new_f] {
            if f.exists() && f.mode() == git2::FileMode::Commit {
                return Err(SourceError::Submodules {
                    paths: vec![f.path_bytes().map(display_path).unwrap_or_default()],
                });
            }
        }
        match d.status() {
            Delta::Added => added += 1,
            Delta::Deleted => deleted += 1,
            _ => modified += 1,
        }
        if old_f.exists() {
            if let Some(p) = old_f.path_bytes() {
                manifest.entries.remove(p);
            }
        }
        if new_f.exists() {
            let p = new_f
                .path_bytes()
                .ok_or_else(|| SourceError::Git("a diff entry without a path".into()))?;
            let mode: i32 = new_f.mode().into();
            let entry = if mode == 0o120000 {
                Entry::Symlink {
                    target: repo.find_blob(new_f.id())?.content().to_vec(),
                }
            } else {
                Entry::File {
                    exec: mode & 0o111 != 0,
                    sha256: String::new(),
                    size: 0,
                }
            };
            inserts.push((p.to_vec(), entry));
        }
    }
    let mut changed = BTreeSet::new();
    for (p, e) in inserts {
        changed.insert(p.clone());
        manifest.entries.insert(p, e);
    }
    // Directories: exactly the ancestors of the remaining entries.
    manifest.entries.retain(|_, e| !matches!(e, Entry::Dir));
    let dirs: BTreeSet<Vec<u8>> = manifest
        .entries
        .keys()
        .flat_map(|p| ancestors(p).map(<[u8]>::to_vec).collect::<Vec<_>>())
        .collect();
    for d in dirs {
        manifest.entries.insert(d, Entry::Dir);
    }
    Ok(NextTree {
        manifest,
        changed,
        added,
        modified,
        deleted,
    })
}

/// `a/b/c` → `a`, `a/b`.
fn ancestors(p: &[u8]) -> impl Iterator<Item = &[u8]> {
    p.iter()
        .enumerate()
        .filter(|(_, b)| **b == b'/')
        .map(move |(i, _)| &p[..i])
}

/// What the sandbox reported about the synced root.
#[derive(Debug, Default, Clone)]
pub struct Listing {
    pub physical_root: String,
    /// Every entry below the root; files without digests.
    pub entries: Manifest,
    /// Files written since the last sync (by modification time).
    pub newer: BTreeSet<Vec<u8>>,
    /// False when the sandbox lost the last sync's time stamp: every file
    /// then counts as written since.
    pub stamp_ok: bool,
    /// sha256 of files the sandbox hashed (after the change: every file
    /// written since just before it).
    pub hashed: BTreeMap<Vec<u8>, String>,
    /// sha256 of the delta archive as the sandbox read it.
    pub archive_sha256: String,
}

/// What a re-sync does in the sandbox.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Plan {
    /// Removed whole (`rm -rf`) before extracting: paths the old commit
    /// tracked and the new one does not, and whatever stands where the new
    /// commit needs another type, or a file it ships.
    pub remove: Vec<Vec<u8>>,
    /// Directories the new commit no longer has, deepest first; removed
    /// only when empty (untracked content keeps them).
    pub rmdir: Vec<Vec<u8>>,
    /// Shipped from the object database, parents before children.
    pub ship: Vec<Vec<u8>>,
    /// Files and symlinks the same in both commits that the sandbox held
    /// otherwise (content, type, mode or target: steps changed or removed
    /// them since the last sync): shipped again.
    pub rewritten: Vec<Vec<u8>>,
    /// Files and symlinks the old commit tracked and the new one does
    /// not, that the sandbox held: removed (directly or with a directory).
    pub deleted: Vec<Vec<u8>>,
}

impl Plan {
    /// The shipped files and symlinks (directories travel uncounted: a
    /// user, like `git diff`, counts files).
    pub fn shipped_files(&self, next: &NextTree) -> Vec<Vec<u8>> {
        self.ship
            .iter()
            .filter(|p| !matches!(next.manifest.entries.get(*p), Some(Entry::Dir) | None))
            .cloned()
            .collect()
    }

    /// The shipped regular files: hashed in the sandbox once extracted.
    pub fn shipped_regular(&self, next: &NextTree) -> Vec<Vec<u8>> {
        self.ship
            .iter()
            .filter(|p| matches!(next.manifest.entries.get(*p), Some(Entry::File { .. })))
            .cloned()
            .collect()
    }
}

/// Whether `p` is the same entry in both commits (its verified digest
/// carried over).
fn unchanged(old: &Manifest, next: &NextTree, p: &[u8]) -> bool {
    !next.changed.contains(p) && old.entries.get(p) == next.manifest.entries.get(p)
}

/// The files whose content decides whether they travel again: tracked,
/// the same in both commits, present with the same mode, and written
/// since the last sync (every one when the time stamp is lost). The
/// sandbox hashes them before the plan: one a step rewrote with the same
/// content, or one the previous re-sync shipped (it is newer than the
/// time stamp too), still is the commit and does not travel.
pub fn candidates(old: &Manifest, next: &NextTree, seen: &Listing) -> Vec<Vec<u8>> {
    next.manifest
        .entries
        .iter()
        .filter(|(p, want)| {
            let Entry::File { exec, .. } = want else {
                return false;
            };
            matches!(seen.entries.entries.get(*p), Some(Entry::File { exec: e2, .. }) if e2 == exec)
                && (!seen.stamp_ok || seen.newer.contains(*p))
                && unchanged(old, next, p)
        })
        .map(|(p, _)| p.clone())
        .collect()
}

/// Decide what to remove and ship so that the sandbox holds `next`;
/// `hashed` holds the sandbox's digests of the [`candidates`].
pub fn plan(
    old: &Manifest,
    next: &NextTree,
    seen: &Listing,
    hashed: &BTreeMap<Vec<u8>, String>,
) -> Plan {
    let mut plan = Plan::default();
    let mut removed: BTreeSet<&[u8]> = BTreeSet::new();
    for (p, want) in &next.manifest.entries {
        let have = seen.entries.entries.get(p);
        let (ship, replace) = match (want, have) {
            (_, None) => (true, false),
            (Entry::Dir, Some(Entry::Dir)) => (false, false),
            (Entry::Symlink { target: a }, Some(Entry::Symlink { target: b })) => (a != b, a != b),
            (Entry::File { exec, sha256, .. }, Some(Entry::File { exec: e2, .. })) => {
                let written = (!seen.stamp_ok || seen.newer.contains(p))
                    && hashed.get(p).is_none_or(|h| h != sha256);
                let ship = !unchanged(old, next, p) || written || exec != e2;
                (ship, ship)
            }
            _ => (true, true),
        };
        if ship && !matches!(want, Entry::Dir) && unchanged(old, next, p) {
            plan.rewritten.push(p.clone());
        }
        if replace {
            plan.remove.push(p.clone());
            removed.insert(p);
        }
        if ship {
            plan.ship.push(p.clone());
        }
    }
    for (p, have) in &seen.entries.entries {
        if next.manifest.entries.contains_key(p)
            || removed.contains(p.as_slice())
            || ancestors(p).any(|a| removed.contains(a))
        {
            continue;
        }
        match old.entries.get(p) {
            Some(Entry::Dir) if matches!(have, Entry::Dir) => plan.rmdir.push(p.clone()),
            Some(_) => {
                plan.remove.push(p.clone());
                removed.insert(p);
            }
            None => {} // untracked: kept
        }
    }
    for (p, e) in &old.entries {
        let tracked_still = !matches!(next.manifest.entries.get(p), Some(Entry::Dir) | None);
        if !matches!(e, Entry::Dir) && !tracked_still && seen.entries.entries.contains_key(p) {
            plan.deleted.push(p.clone());
        }
    }
    plan.rmdir.sort_by(|a, b| b.cmp(a));
    plan
}

/// The new tree's entries to ship, looked up in the commit's tree.
pub fn shipped_entries(
    repo_dir: &Path,
    tree: Oid,
    paths: &[Vec<u8>],
) -> Result<Vec<Shipped>, SourceError> {
    let repo = Repository::open(repo_dir)?;
    let tree = repo.find_tree(tree)?;
    paths
        .iter()
        .map(|p| {
            let e = tree
                .get_path(Path::new(std::ffi::OsStr::from_bytes(p)))
                .map_err(|_| {
                    SourceError::Git(format!("{} is not in the new tree", display_path(p)))
                })?;
            Ok(Shipped {
                path: p.clone(),
                id: e.id(),
                filemode: e.filemode(),
                kind: e.kind().unwrap_or(ObjectType::Any),
            })
        })
        .collect()
}

use std::os::unix::ffi::OsStrExt as _;

/// Fill the digests of the files the diff changed from what was shipped;
/// every changed file is shipped, so none stays empty.
pub fn fill_digests(next: &mut Manifest, shipped: &Manifest) -> Result<(), SourceError> {
    for (p, e) in next.entries.iter_mut() {
        if let Entry::File { sha256, size, .. } = e {
            if let Some(Entry::File {
                sha256: s, size: n, ..
            }) = shipped.entries.get(p)
            {
                *sha256 = s.clone();
                *size = *n;
            } else if sha256.is_empty() {
                return Err(SourceError::NotShipped {
                    path: display_path(p),
                });
            }
        }
    }
    Ok(())
}

/// What the check established.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Checked {
    /// Entries of the new tree found as expected.
    pub entries_compared: usize,
    /// Files hashed in the sandbox and compared.
    pub contents_compared: usize,
    /// Untracked files and symlinks kept in the synced root.
    pub kept_untracked: usize,
}

/// Compare the sandbox's report after the change with `next` (digests
/// filled). Differences are returned, at most `max`.
pub fn check(
    old: &Manifest,
    next: &Manifest,
    plan: &Plan,
    after: &Listing,
    max: usize,
) -> Result<Checked, Vec<String>> {
    let mut bad = vec![];
    let shipped: BTreeSet<&[u8]> = plan.ship.iter().map(Vec::as_slice).collect();
    let mut contents = 0;
    for (p, want) in &next.entries {
        let have = after.entries.entries.get(p);
        let ok = match (want, have) {
            (_, None) => {
                bad.push(format!("missing in sandbox: {}", display_path(p)));
                continue;
            }
            (Entry::Dir, Some(Entry::Dir)) => true,
            (Entry::Symlink { target: a }, Some(Entry::Symlink { target: b })) => a == b,
            (Entry::File { exec, sha256, .. }, Some(Entry::File { exec: e2, .. })) => {
                let content = match after.hashed.get(p) {
                    Some(h) => {
                        contents += 1;
                        h == sha256
                    }
                    None => !shipped.contains(p.as_slice()),
                };
                exec == e2 && content
            }
            _ => false,
        };
        if !ok {
            bad.push(format!(
                "differs: {} (expected {})",
                display_path(p),
                super::manifest::describe(want)
            ));
        }
    }
    let mut kept = 0;
    for (p, have) in &after.entries.entries {
        if next.entries.contains_key(p) {
            continue;
        }
        match (old.entries.get(p), have) {
            (Some(Entry::Dir), Entry::Dir) | (None, Entry::Dir) => {}
            (Some(_), _) => bad.push(format!(
                "not removed: {} (the new commit does not track it)",
                display_path(p)
            )),
            (None, _) => kept += 1,
        }
    }
    if bad.is_empty() {
        Ok(Checked {
            entries_compared: next.entries.len(),
            contents_compared: contents,
            kept_untracked: kept,
        })
    } else {
        bad.truncate(max);
        Err(bad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(sha: &str) -> Entry {
        Entry::File {
            exec: false,
            sha256: sha.into(),
            size: 0,
        }
    }

    fn manifest(items: &[(&str, Entry)]) -> Manifest {
        Manifest {
            entries: items
                .iter()
                .map(|(p, e)| (p.as_bytes().to_vec(), e.clone()))
                .collect(),
        }
    }

    fn listing(items: &[(&str, Entry)], newer: &[&str]) -> Listing {
        Listing {
            entries: manifest(items),
            newer: newer.iter().map(|p| p.as_bytes().to_vec()).collect(),
            stamp_ok: true,
            ..Listing::default()
        }
    }

    fn paths(v: &[Vec<u8>]) -> Vec<&str> {
        v.iter().map(|p| std::str::from_utf8(p).unwrap()).collect()
    }

    /// The rule: tracked paths become the new commit, old tracked paths
    /// go, untracked outputs stay, files steps wrote are shipped again.
    #[test]
    fn plan_ships_changes_and_rewritten_files_and_keeps_untracked_outputs() {
        let old = manifest(&[
            ("d", Entry::Dir),
            ("d/a", file("1")),
            ("d/b", file("2")),
            ("gone", file("3")),
            ("old", Entry::Dir),
            ("old/x", file("4")),
        ]);
        let next = NextTree {
            manifest: manifest(&[
                ("d", Entry::Dir),
                ("d/a", file("")),
                ("d/b", file("2")),
                ("new", file("")),
            ]),
            changed: [b"d/a".to_vec(), b"new".to_vec()].into(),
            added: 1,
            modified: 1,
            deleted: 2,
        };
        let seen = listing(
            &[
                ("d", Entry::Dir),
                ("d/a", file("")),
                ("d/b", file("")),
                ("d/out.o", file("")),
                ("gone", file("")),
                ("old", Entry::Dir),
                ("old/x", file("")),
                ("old/log", file("")),
            ],
            &["d/b", "d/out.o"],
        );
        let p = plan(&old, &next, &seen, &BTreeMap::new());
        assert_eq!(paths(&p.ship), ["d/a", "d/b", "new"]);
        assert_eq!(paths(&p.remove), ["d/a", "d/b", "gone", "old/x"]);
        assert_eq!(paths(&p.rmdir), ["old"]);
        assert_eq!(paths(&p.rewritten), ["d/b"]);
        assert_eq!(paths(&p.deleted), ["gone", "old/x"]);
    }

    /// A directory replaced by a symlink (or a file) is removed whole and
    /// shipped again with everything below it.
    #[test]
    fn a_type_change_in_the_sandbox_reships_the_whole_subtree() {
        let old = manifest(&[("d", Entry::Dir), ("d/a", file("1"))]);
        let next = NextTree {
            manifest: old.clone(),
            changed: BTreeSet::new(),
            added: 0,
            modified: 0,
            deleted: 0,
        };
        let seen = listing(
            &[(
                "d",
                Entry::Symlink {
                    target: b"/etc".to_vec(),
                },
            )],
            &[],
        );
        let p = plan(&old, &next, &seen, &BTreeMap::new());
        assert_eq!(paths(&p.remove), ["d"]);
        assert_eq!(paths(&p.ship), ["d", "d/a"]);
        assert_eq!(paths(&p.rewritten), ["d/a"]);
        assert_eq!(paths(&p.shipped_files(&next)), ["d/a"]);
    }

    #[test]
    fn without_the_stamp_every_tracked_file_is_shipped_again() {
        let old = manifest(&[("a", file("1")), ("b", file("2"))]);
        let next = NextTree {
            manifest: old.clone(),
            changed: BTreeSet::new(),
            added: 0,
            modified: 0,
            deleted: 0,
        };
        let mut seen = listing(&[("a", file("")), ("b", file(""))], &[]);
        seen.stamp_ok = false;
        assert_eq!(paths(&candidates(&old, &next, &seen)), ["a", "b"]);
        assert_eq!(
            paths(&plan(&old, &next, &seen, &BTreeMap::new()).ship),
            ["a", "b"]
        );
        // Their content decides: only the one that differs travels.
        let hashed = [(b"a".to_vec(), "1".into()), (b"b".to_vec(), "x".into())].into();
        let p = plan(&old, &next, &seen, &hashed);
        assert_eq!(paths(&p.ship), ["b"]);
        assert_eq!(paths(&p.rewritten), ["b"]);
    }

    /// The bug of issue #32: a file the previous re-sync shipped is newer
    /// than the time stamp, like one a step wrote; its hash says it is
    /// still the commit, so it does not travel again.
    #[test]
    fn a_file_shipped_by_the_previous_resync_is_not_shipped_again() {
        let old = manifest(&[("a", file("1")), ("b", file("2"))]);
        let next = NextTree {
            manifest: manifest(&[("a", file("1")), ("b", file("2")), ("c", file(""))]),
            changed: [b"c".to_vec()].into(),
            added: 1,
            modified: 0,
            deleted: 0,
        };
        let seen = listing(&[("a", file("")), ("b", file(""))], &["a", "b"]);
        assert_eq!(paths(&candidates(&old, &next, &seen)), ["a", "b"]);
        let hashed = [(b"a".to_vec(), "1".into()), (b"b".to_vec(), "2".into())].into();
        let p = plan(&old, &next, &seen, &hashed);
        assert_eq!(paths(&p.ship), ["c"]);
        assert!(p.remove.is_empty() && p.rewritten.is_empty() && p.deleted.is_empty());
    }

    #[test]
    fn check_names_wrong_content_and_leftover_tracked_files() {
        let old = manifest(&[("a", file("1")), ("gone", file("2"))]);
        let next = manifest(&[("a", file("9"))]);
        let p = Plan {
            ship: vec![b"a".to_vec()],
            ..Plan::default()
        };
        let mut after = listing(
            &[("a", file("")), ("gone", file("")), ("out", file(""))],
            &[],
        );
        after.hashed.insert(b"a".to_vec(), "8".into());
        let bad = check(&old, &next, &p, &after, 10).unwrap_err();
        assert!(bad[0].starts_with("differs: a"), "{bad:?}");
        assert!(bad[1].starts_with("not removed: gone"), "{bad:?}");
        after.hashed.insert(b"a".to_vec(), "9".into());
        after.entries.entries.remove(&b"gone"[..]);
        let ok = check(&old, &next, &p, &after, 10).unwrap();
        assert_eq!(ok.kept_untracked, 1);
        assert_eq!(ok.contents_compared, 1);
    }

    #[test]
    fn a_shipped_file_the_sandbox_did_not_hash_is_a_mismatch() {
        let old = manifest(&[("a", file("1"))]);
        let next = manifest(&[("a", file("9"))]);
        let p = Plan {
            ship: vec![b"a".to_vec()],
            ..Plan::default()
        };
        let after = listing(&[("a", file(""))], &[]);
        assert!(check(&old, &next, &p, &after, 10).is_err());
    }
}
