//! What a tree digest ([`super::digest_with`]) read of each file, kept
//! between runs so a large folder that did not change (a 1.4 GB rustup
//! toolchain) is not read again: a file whose device, inode, size,
//! modification and change times are those it had when it was read keeps
//! its sha256. The change time (`ctime`) moves with every write and
//! every `utimes`, and no unprivileged call sets it back, so a file
//! rewritten with its old modification time is read again.
//!
//! Kept as a small binary file ([`Memo::load`], [`Memo::save`]); one
//! that cannot be read is an empty memo (everything is read).

use std::collections::HashMap;
use std::io::{Read as _, Write as _};
use std::path::Path;

/// What identifies a file's content without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Key([i64; 7]);

impl Key {
    pub(super) fn of(st: &rustix::fs::Stat) -> Key {
        Key([
            st.st_dev as i64,
            st.st_ino as i64,
            st.st_size,
            st.st_mtime,
            st.st_mtime_nsec as i64,
            st.st_ctime,
            st.st_ctime_nsec as i64,
        ])
    }
}

/// The digests of one tree's files, by path below its root.
#[derive(Debug, Default)]
pub struct Memo {
    old: HashMap<Vec<u8>, (Key, u64, [u8; 32])>,
    now: HashMap<Vec<u8>, (Key, u64, [u8; 32])>,
    /// Files read (not known) by the last digest.
    pub files_read: u64,
    /// Files whose digest was known.
    pub files_known: u64,
    /// Whether the last digest found a file read or gone (the memo kept
    /// on disk no longer says what the tree holds).
    pub changed: bool,
}

/// The file's first bytes.
const MAGIC: &[u8; 16] = b"rfs-digest-memo1";

impl Memo {
    pub(super) fn begin(&mut self) {
        self.old.extend(std::mem::take(&mut self.now));
        self.files_read = 0;
        self.files_known = 0;
        self.changed = false;
    }

    pub(super) fn end(&mut self) {
        // What is left was not found again: gone from the tree.
        self.changed |= !self.old.is_empty();
        self.old.clear();
    }

    /// The size and sha256 of the file at `path` if it is as it was read.
    pub(super) fn get(&mut self, path: &[u8], key: &Key) -> Option<(u64, [u8; 32])> {
        let (k, size, sha) = self.old.remove(path)?;
        if k != *key {
            return None;
        }
        self.files_known += 1;
        self.now.insert(path.to_vec(), (k, size, sha));
        Some((size, sha))
    }

    pub(super) fn read(&mut self, path: &[u8], key: Key, size: u64, sha: [u8; 32]) {
        self.files_read += 1;
        self.changed = true;
        self.now.insert(path.to_vec(), (key, size, sha));
    }

    /// The memo kept at `file` (empty where there is none or it cannot
    /// be read).
    pub fn load(file: &Path) -> Memo {
        let mut m = Memo::default();
        let Ok(mut f) = std::fs::File::open(file) else {
            return m;
        };
        let mut all = vec![];
        if f.read_to_end(&mut all).is_err() || !all.starts_with(MAGIC) {
            return m;
        }
        let mut at = &all[MAGIC.len()..];
        let mut take = |n: usize| -> Option<Vec<u8>> {
            let (a, b) = at.split_at_checked(n)?;
            at = b;
            Some(a.to_vec())
        };
        let num = |b: Vec<u8>| i64::from_le_bytes(b.try_into().unwrap_or_default());
        while let Some(len) = take(8) {
            let Some(path) = take(num(len) as usize) else {
                return Memo::default();
            };
            let mut key = [0i64; 7];
            for k in key.iter_mut() {
                let Some(b) = take(8) else {
                    return Memo::default();
                };
                *k = num(b);
            }
            let (Some(size), Some(sha)) = (take(8), take(32)) else {
                return Memo::default();
            };
            let sha: [u8; 32] = sha.try_into().unwrap_or_default();
            m.now.insert(path, (Key(key), num(size) as u64, sha));
        }
        m
    }

    /// Keep the memo at `file` (written beside it, then renamed).
    pub fn save(&self, file: &Path) -> std::io::Result<()> {
        let mut out = MAGIC.to_vec();
        for (path, (key, size, sha)) in &self.now {
            out.extend_from_slice(&(path.len() as i64).to_le_bytes());
            out.extend_from_slice(path);
            for k in key.0 {
                out.extend_from_slice(&k.to_le_bytes());
            }
            out.extend_from_slice(&(*size as i64).to_le_bytes());
            out.extend_from_slice(sha);
        }
        // Runs of one suite digest at once: each writes its own file.
        static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let tmp = file.with_extension(format!("tmp.{}.{seq}", std::process::id()));
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(&out)?;
        f.sync_all()?;
        std::fs::rename(tmp, file)
    }
}

#[cfg(test)]
mod tests {
    use super::super::digest_with;
    use super::*;

    #[test]
    fn an_unchanged_tree_is_not_read_again_and_a_changed_file_is() {
        let d = tempfile::tempdir().unwrap();
        let t = d.path().join("t");
        std::fs::create_dir_all(t.join("a")).unwrap();
        std::fs::write(t.join("a/x"), "one").unwrap();
        std::fs::write(t.join("y"), "two").unwrap();
        let mut m = Memo::default();
        let first = digest_with(&t, &mut m).unwrap();
        assert_eq!((m.files_read, m.files_known), (2, 0));
        let file = d.path().join("memo");
        m.save(&file).unwrap();
        let mut m = Memo::load(&file);
        let again = digest_with(&t, &mut m).unwrap();
        assert_eq!(again, first);
        assert_eq!((m.files_read, m.files_known), (0, 2));
        assert!(!m.changed, "nothing to keep again");
        std::fs::write(t.join("y"), "TWO").unwrap();
        let changed = digest_with(&t, &mut m).unwrap();
        assert_ne!(changed.sha256, first.sha256);
        assert_eq!((m.files_read, m.files_known), (1, 1));
        assert_eq!(changed, super::super::digest(&t).unwrap());
        std::fs::write(&file, "garbage").unwrap();
        assert_eq!(Memo::load(&file).now.len(), 0);
    }
}
