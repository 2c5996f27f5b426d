//! Reading the archive a sandbox sends back for `collect()` (see
//! [`super::artifacts`]): every entry under the collected path, names
//! checked, a hard link kept as a file of its own.

use std::io::Read as _;
use std::path::{Component, Path};

use super::Run;
use rfs_evidence::error::{Error, Result};

/// One entry of a collected archive.
pub(super) enum Entry {
    File { rel: String, bytes: Vec<u8> },
    Dir(String),
    Link { rel: String, target: String },
    Skipped(String),
}

/// A path in the archive (`./a/b`) as the `a/b` entries are named by.
fn archive_rel(p: &Path) -> String {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

impl Run {
    /// The entries of the archive the sandbox sent, each under `parts`.
    pub(super) fn read_archive(
        &self,
        what: &str,
        tar: &[u8],
        parts: &[String],
    ) -> Result<Vec<Entry>> {
        let bad = |m: String| Error::Internal(format!("{what}: the sandbox's archive: {m}"));
        let mut a = tar::Archive::new(tar);
        let mut entries: Vec<Entry> = vec![];
        for e in a.entries().map_err(|e| bad(e.to_string()))? {
            let mut e = e.map_err(|e| bad(e.to_string()))?;
            let p = e.path().map_err(|e| bad(e.to_string()))?.into_owned();
            let mut names = vec![];
            for c in p.components() {
                match c {
                    Component::CurDir => {}
                    Component::Normal(n) => names.push(
                        n.to_str()
                            .ok_or_else(|| {
                                self.refuse(format!(
                                    "{what} refused: a name in it is not UTF-8 ({})",
                                    p.display()
                                ))
                            })?
                            .to_owned(),
                    ),
                    _ => return Err(bad(format!("{} leaves the collected path", p.display()))),
                }
            }
            if names.len() < parts.len() || names[..parts.len()] != *parts {
                return Err(bad(format!(
                    "{} is not under the collected path",
                    p.display()
                )));
            }
            let rel = names.join("/");
            if self.state().redactor.holds_secret(&rel) {
                return Err(
                    self.refuse(format!("{what} refused: a file name in it holds a secret"))
                );
            }
            let kind = e.header().entry_type();
            entries.push(if kind.is_file() {
                let mut bytes = vec![];
                e.read_to_end(&mut bytes).map_err(|e| bad(e.to_string()))?;
                Entry::File { rel, bytes }
            } else if kind == tar::EntryType::Link {
                // A hard link names a file earlier in the archive: kept
                // under this name too, as a file of its own.
                let first = e
                    .link_name()
                    .ok()
                    .flatten()
                    .map(|t| archive_rel(&t))
                    .unwrap_or_default();
                match entries.iter().find_map(|x| match x {
                    Entry::File { rel: r, bytes } if *r == first => Some(bytes.clone()),
                    _ => None,
                }) {
                    Some(bytes) => Entry::File { rel, bytes },
                    None => Entry::Skipped(rel),
                }
            } else if kind.is_dir() {
                Entry::Dir(rel)
            } else if kind.is_symlink() {
                let target = e
                    .link_name()
                    .ok()
                    .flatten()
                    .map(|t| t.to_string_lossy().into_owned())
                    .unwrap_or_default();
                Entry::Link {
                    rel,
                    target: self.state().redactor.redact_str(&target),
                }
            } else {
                Entry::Skipped(rel)
            });
        }
        if entries.is_empty() {
            return Err(bad("it is empty".into()));
        }
        Ok(entries)
    }
}
