//! Which proofs a suite runs: the paths given (files, or folders walked
//! for `*.rhai`), else `rfs.toml`'s `proofs` folder, else `proofs/`;
//! then the name filters. In a folder, a file whose name starts with `_`
//! is a module the proofs import, not a proof.

use std::path::{Path, PathBuf};

/// One proof of the suite.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Proof {
    /// Its path as given or found, relative to where rfs started when it
    /// lies below it (the name the console, the index and filters use).
    pub(crate) name: String,
    pub(crate) path: PathBuf,
    /// Its bundle's folder name in the suite's folder.
    pub(crate) slug: String,
}

/// The folder a suite runs when no path is given and `rfs.toml` names none.
pub(crate) const DEFAULT_FOLDER: &str = "proofs";

/// Why no suite could be planned.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanError {
    #[error("{0} does not exist")]
    Missing(String),
    #[error("{0} is neither a file nor a folder")]
    NotAFileOrFolder(String),
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("no proofs (*.rhai) in {0}")]
    Empty(String),
    #[error("no proof name matches the filters (of {0} found)")]
    Filtered(usize),
    #[error("refused: {0} is a symlink: proofs are regular files, never run through a link (a committed link could read any host file)")]
    Symlink(String),
    #[error("refused: {0} is not a regular file (a FIFO, device or socket)")]
    NotRegular(String),
}

/// The name filters: a proof runs when its name contains one of
/// `include` (any, when empty) and none of `skip`.
#[derive(Debug, Clone, Default)]
pub(crate) struct Filters {
    pub(crate) include: Vec<String>,
    pub(crate) skip: Vec<String>,
}

impl Filters {
    pub(crate) fn admits(&self, name: &str) -> bool {
        (self.include.is_empty() || self.include.iter().any(|f| name.contains(f.as_str())))
            && !self.skip.iter().any(|f| name.contains(f.as_str()))
    }
}

/// The proofs under `paths` (or `configured`, or [`DEFAULT_FOLDER`]),
/// relative names taken from `base`, in name order, filtered.
pub(crate) fn plan(
    paths: &[PathBuf],
    configured: Option<&Path>,
    base: &Path,
    filters: &Filters,
) -> Result<Vec<Proof>, PlanError> {
    let default = [configured
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_FOLDER))];
    let roots = if paths.is_empty() {
        &default[..]
    } else {
        paths
    };
    let mut files = vec![];
    for root in roots {
        let meta = std::fs::symlink_metadata(root)
            .map_err(|_| PlanError::Missing(root.display().to_string()))?;
        if meta.file_type().is_symlink() {
            return Err(PlanError::Symlink(root.display().to_string()));
        }
        if meta.is_file() {
            files.push(root.clone());
        } else if meta.is_dir() {
            let before = files.len();
            walk(root, &mut files)?;
            if files.len() == before {
                return Err(PlanError::Empty(root.display().to_string()));
            }
        } else {
            return Err(PlanError::NotAFileOrFolder(root.display().to_string()));
        }
    }
    let mut proofs: Vec<Proof> = files
        .into_iter()
        .map(|path| Proof {
            name: name_of(&path, base),
            slug: String::new(),
            path,
        })
        .collect();
    proofs.sort_by(|a, b| a.name.cmp(&b.name));
    proofs.dedup_by(|a, b| a.name == b.name);
    let found = proofs.len();
    proofs.retain(|p| filters.admits(&p.name));
    if proofs.is_empty() {
        return Err(PlanError::Filtered(found));
    }
    let mut taken = std::collections::BTreeSet::new();
    for p in &mut proofs {
        let base = slug(&p.name);
        let mut s = base.clone();
        let mut n = 2;
        while !taken.insert(s.clone()) {
            s = format!("{base}-{n}");
            n += 1;
        }
        p.slug = s;
    }
    Ok(proofs)
}

/// Every `*.rhai` below `dir` that is not a module (`_name.rhai`); hidden
/// folders and links to folders are not entered.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), PlanError> {
    let read = |e: std::io::Error| PlanError::Read {
        path: dir.display().to_string(),
        source: e,
    };
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .map_err(read)?
        .collect::<Result<_, _>>()
        .map_err(read)?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with('.') {
            continue;
        }
        let kind = e.file_type().map_err(read)?;
        if kind.is_dir() {
            walk(&e.path(), out)?;
        } else if name.ends_with(".rhai") && kind.is_symlink() {
            // A proof or a module: never read through a link.
            return Err(PlanError::Symlink(e.path().display().to_string()));
        } else if name.ends_with(".rhai") && !kind.is_file() {
            return Err(PlanError::NotRegular(e.path().display().to_string()));
        } else if name.ends_with(".rhai") && !name.starts_with('_') {
            out.push(e.path());
        }
    }
    Ok(())
}

/// The files below the suite's folders that look like a suite setup
/// (`setup.rhai`, `_setup.rhai`, `_setup_python.rhai`…: a name that is
/// `setup` once leading underscores are dropped, or starts with
/// `setup`): said when no setup is used, since a proof that needs one
/// fails without saying why (#46). Named relative to `base`.
pub(crate) fn setup_like(paths: &[PathBuf], configured: Option<&Path>, base: &Path) -> Vec<String> {
    let dirs: Vec<PathBuf> = match (paths.is_empty(), configured) {
        (true, Some(c)) => vec![c.to_path_buf()],
        (true, None) => vec![],
        (false, _) => paths.iter().filter(|p| p.is_dir()).cloned().collect(),
    };
    let mut found = vec![];
    for d in dirs {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".rhai").unwrap_or("");
            let bare = stem.trim_start_matches('_').to_ascii_lowercase();
            if !stem.is_empty()
                && bare.starts_with("setup")
                && e.file_type().is_ok_and(|t| t.is_file())
            {
                found.push(name_of(&e.path(), base));
            }
        }
    }
    found.sort();
    found
}

/// `path` relative to `base` (through `..` when it is not below it),
/// with `/` separators.
fn name_of(path: &Path, base: &Path) -> String {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let (a, b) = (
        rfs_evidence::out_dir::lexical(&abs),
        rfs_evidence::out_dir::lexical(base),
    );
    let common = a
        .components()
        .zip(b.components())
        .take_while(|(x, y)| x == y)
        .count();
    let up = std::iter::repeat_n("..".to_owned(), b.components().count() - common);
    let down = a
        .components()
        .skip(common)
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    up.chain(down).collect::<Vec<_>>().join("/")
}

/// A folder name for a proof's bundle: letters, digits, `-`, `_` and `.`.
fn slug(name: &str) -> String {
    let stem = name.strip_suffix(".rhai").unwrap_or(name);
    let s: String = stem
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(|c| c == '-' || c == '.').to_owned();
    if s.is_empty() {
        "proof".into()
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for f in [
            "proofs/b.rhai",
            "proofs/a.rhai",
            "proofs/_lib.rhai",
            "proofs/sub/c.rhai",
            "proofs/.hidden/d.rhai",
            "proofs/notes.md",
        ] {
            let p = d.path().join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "").unwrap();
        }
        d
    }

    #[test]
    fn a_folder_yields_its_proofs_in_name_order_without_modules_or_hidden_folders() {
        let d = tree();
        let p = plan(
            &[d.path().join("proofs")],
            None,
            d.path(),
            &Filters::default(),
        )
        .unwrap();
        let names: Vec<_> = p.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["proofs/a.rhai", "proofs/b.rhai", "proofs/sub/c.rhai"]
        );
        assert_eq!(p[2].slug, "proofs-sub-c");
    }

    #[test]
    fn a_symlinked_proof_is_refused_naming_it() {
        let d = tree();
        std::os::unix::fs::symlink("/proc/self/environ", d.path().join("proofs/env.rhai")).unwrap();
        let e = plan(
            &[d.path().join("proofs")],
            None,
            d.path(),
            &Filters::default(),
        )
        .unwrap_err();
        assert!(
            matches!(&e, PlanError::Symlink(p) if p.ends_with("proofs/env.rhai")),
            "{e}"
        );
        let e = plan(
            &[d.path().join("proofs/env.rhai")],
            None,
            d.path(),
            &Filters::default(),
        )
        .unwrap_err();
        assert!(matches!(e, PlanError::Symlink(_)), "{e}");
    }

    #[test]
    fn filters_include_any_and_skip_every_match() {
        let d = tree();
        let f = Filters {
            include: vec!["a.".into(), "c".into()],
            skip: vec!["sub/".into()],
        };
        let p = plan(&[d.path().join("proofs")], None, d.path(), &f).unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].name, "proofs/a.rhai");
        let none = Filters {
            include: vec!["zzz".into()],
            skip: vec![],
        };
        assert!(matches!(
            plan(&[d.path().join("proofs")], None, d.path(), &none),
            Err(PlanError::Filtered(3))
        ));
    }

    #[test]
    fn a_missing_or_empty_folder_is_an_error_not_an_empty_green_suite() {
        let d = tree();
        assert!(matches!(
            plan(
                &[d.path().join("nope")],
                None,
                d.path(),
                &Filters::default()
            ),
            Err(PlanError::Missing(_))
        ));
        std::fs::create_dir(d.path().join("empty")).unwrap();
        assert!(matches!(
            plan(
                &[d.path().join("empty")],
                None,
                d.path(),
                &Filters::default()
            ),
            Err(PlanError::Empty(_))
        ));
    }
}
