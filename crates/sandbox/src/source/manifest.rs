//! The expected file set and content of a synced tree, and comparing it with
//! what the sandbox reports.

use std::collections::BTreeMap;

use super::display_path;

/// One entry of a tree, keyed elsewhere by its path (bytes, `/`-separated).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    Dir,
    File {
        exec: bool,
        sha256: String,
        size: u64,
    },
    Symlink {
        target: Vec<u8>,
    },
}

/// Path → entry. Ordering is byte order, independent of any locale.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Manifest {
    pub entries: BTreeMap<Vec<u8>, Entry>,
}

impl Manifest {
    /// Files and symlinks (what a user thinks of as "files").
    pub fn file_count(&self) -> usize {
        self.entries
            .values()
            .filter(|e| !matches!(e, Entry::Dir))
            .count()
    }

    /// Human-readable differences between `self` (expected) and `actual`;
    /// empty when they are equal. At most `max` lines.
    pub fn diff(&self, actual: &Manifest, max: usize) -> Vec<String> {
        let mut out = vec![];
        for (p, want) in &self.entries {
            if out.len() >= max {
                break;
            }
            match actual.entries.get(p) {
                None => out.push(format!("missing in sandbox: {}", display_path(p))),
                Some(have) if have != want => out.push(format!(
                    "differs: {} (expected {}, found {})",
                    display_path(p),
                    describe(want),
                    describe(have)
                )),
                _ => {}
            }
        }
        for p in actual.entries.keys() {
            if out.len() >= max {
                break;
            }
            if !self.entries.contains_key(p) {
                out.push(format!("unexpected in sandbox: {}", display_path(p)));
            }
        }
        out
    }
}

pub fn describe(e: &Entry) -> String {
    match e {
        Entry::Dir => "directory".into(),
        Entry::File { exec, sha256, .. } => format!(
            "{}file sha256 {}",
            if *exec { "executable " } else { "" },
            &sha256[..12.min(sha256.len())]
        ),
        Entry::Symlink { target } => format!("symlink -> {}", display_path(target)),
    }
}
