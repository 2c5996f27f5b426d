//! Mapping a step's cwd into the synced root, by path components.
//!
//! An explicit cwd is relative to the synced root; the default is the
//! invoking directory relative to the repository root. `..`, absolute
//! paths and symlinks (as committed) that leave the synced root are refused
//! here, before anything executes; symlinks created at run time are caught
//! by the in-sandbox check of the step wrapper.

use std::collections::VecDeque;
use std::path::Path;

use rfs_evidence::validate::shown;
use rfs_sandbox::source::manifest::{Entry, Manifest};

/// The longest chain of symlinks followed.
const MAX_LINKS: usize = 40;

/// Why a step's cwd is refused before anything runs. `input` is the cwd
/// as given; paths are shown through [`shown`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CwdError {
    #[error(
        "cwd {} is absolute; a step cwd is relative to the synced source root",
        shown(.input)
    )]
    Absolute { input: String },
    #[error("cwd {} escapes the synced source root", shown(.input))]
    Escapes { input: String },
    #[error("cwd {}: too many levels of symlinks", shown(.input))]
    TooManyLinks { input: String },
    /// A committed symlink on the way points at an absolute path.
    #[error(
        "cwd {} goes through symlink {} -> {}, which leaves the synced source root",
        shown(.input),
        shown(.link),
        shown(.target)
    )]
    LeavesRoot {
        input: String,
        link: String,
        target: String,
    },
    #[error("cwd {}: {} is a file, not a directory", shown(.input), shown(.file))]
    NotADirectory { input: String, file: String },
    /// The default cwd (the invoking directory) is outside the synced
    /// subdirectory.
    #[error(
        "rfs was started in `{}`, which is outside the synced subdirectory `{subdir}`; pass an explicit cwd",
        if .invoked.is_empty() { "." } else { .invoked }
    )]
    OutsideSubdir { invoked: String, subdir: String },
}

/// Resolve `input` (relative to the synced root) to a normalised relative
/// path inside it ("" is the root itself).
pub fn resolve(input: &str, m: &Manifest) -> Result<String, CwdError> {
    let input_owned = || input.to_owned();
    if input.starts_with('/') {
        return Err(CwdError::Absolute {
            input: input_owned(),
        });
    }
    let mut pending: VecDeque<Vec<u8>> = split(input.as_bytes());
    let mut cur: Vec<Vec<u8>> = vec![];
    let mut hops = 0;
    while let Some(c) = pending.pop_front() {
        match c.as_slice() {
            b"" | b"." => {}
            b".." => {
                if cur.pop().is_none() {
                    return Err(CwdError::Escapes {
                        input: input_owned(),
                    });
                }
            }
            _ => {
                cur.push(c);
                let key = cur.join(&b'/');
                match m.entries.get(&key) {
                    Some(Entry::Symlink { target }) => {
                        hops += 1;
                        if hops > MAX_LINKS {
                            return Err(CwdError::TooManyLinks {
                                input: input_owned(),
                            });
                        }
                        if target.starts_with(b"/") {
                            return Err(CwdError::LeavesRoot {
                                input: input_owned(),
                                link: String::from_utf8_lossy(&key).into_owned(),
                                target: String::from_utf8_lossy(target).into_owned(),
                            });
                        }
                        cur.pop();
                        for t in split(target).into_iter().rev() {
                            pending.push_front(t);
                        }
                    }
                    Some(Entry::File { .. }) => {
                        return Err(CwdError::NotADirectory {
                            input: input_owned(),
                            file: String::from_utf8_lossy(&key).into_owned(),
                        })
                    }
                    Some(Entry::Dir) | None => {}
                }
            }
        }
    }
    Ok(String::from_utf8_lossy(&cur.join(&b'/')).into_owned())
}

fn split(p: &[u8]) -> VecDeque<Vec<u8>> {
    p.split(|b| *b == b'/').map(<[u8]>::to_vec).collect()
}

/// Where the default cwd maps: the invoking directory relative to the
/// repository root (and to the synced subdirectory, if any). `Ok(None)`
/// when rfs was started outside the repository (the synced root is used).
pub(crate) fn default_relative(
    invocation: &Path,
    repo_root: &Path,
    subdir: Option<&str>,
) -> Result<Option<String>, CwdError> {
    let inv = invocation
        .canonicalize()
        .unwrap_or_else(|_| invocation.to_path_buf());
    let root = repo_root
        .canonicalize()
        .unwrap_or_else(|_| repo_root.to_path_buf());
    let Ok(rel) = inv.strip_prefix(&root) else {
        return Ok(None);
    };
    let rel = rel.to_string_lossy().into_owned();
    match subdir {
        None => Ok(Some(rel)),
        Some(sub) => {
            let sub = Path::new(sub);
            match Path::new(&rel).strip_prefix(sub) {
                Ok(r) => Ok(Some(r.to_string_lossy().into_owned())),
                Err(_) => Err(CwdError::OutsideSubdir {
                    invoked: rel,
                    subdir: sub.display().to_string(),
                }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(entries: &[(&str, Entry)]) -> Manifest {
        let mut m = Manifest::default();
        for (p, e) in entries {
            m.entries.insert(p.as_bytes().to_vec(), e.clone());
        }
        m
    }

    #[test]
    fn components_not_prefixes() {
        let man = m(&[("..cache", Entry::Dir), ("a", Entry::Dir)]);
        assert_eq!(resolve("..cache", &man).unwrap(), "..cache");
        assert_eq!(resolve("./a/../a/", &man).unwrap(), "a");
        assert_eq!(resolve("", &man).unwrap(), "");
        let escapes = |input: &str| CwdError::Escapes {
            input: input.into(),
        };
        assert_eq!(resolve("..", &man), Err(escapes("..")));
        assert_eq!(resolve("a/../..", &man), Err(escapes("a/../..")));
        assert!(matches!(
            resolve("/etc", &man),
            Err(CwdError::Absolute { .. })
        ));
        assert!(resolve("/etc", &man)
            .unwrap_err()
            .to_string()
            .contains("absolute"));
    }

    #[test]
    fn symlinks_resolved_inside_the_tree() {
        let man = m(&[
            ("real", Entry::Dir),
            (
                "in",
                Entry::Symlink {
                    target: b"real".to_vec(),
                },
            ),
            (
                "up",
                Entry::Symlink {
                    target: b"../..".to_vec(),
                },
            ),
            (
                "etc",
                Entry::Symlink {
                    target: b"/etc".to_vec(),
                },
            ),
            (
                "f",
                Entry::File {
                    exec: false,
                    sha256: String::new(),
                    size: 0,
                },
            ),
        ]);
        assert_eq!(resolve("in", &man).unwrap(), "real");
        assert!(matches!(resolve("up", &man), Err(CwdError::Escapes { .. })));
        assert_eq!(
            resolve("etc/x", &man),
            Err(CwdError::LeavesRoot {
                input: "etc/x".into(),
                link: "etc".into(),
                target: "/etc".into()
            })
        );
        assert!(resolve("f", &man)
            .unwrap_err()
            .to_string()
            .contains("`f` is a file, not a directory"));
    }
}
