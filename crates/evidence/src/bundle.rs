//! The self-contained bundle: the script and every module it imports are
//! copied into the run's output directory (`bundle/`, same relative
//! layout, so the copy runs as it is) and their sha256 digests go into the
//! journal's first fact. A reviewer (and `rfs replay`) needs nothing from
//! the author's machine but the repository's commit.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::events::BundleManifest;

/// The bundle's directory inside the output directory.
pub const DIR: &str = "bundle";

/// One bundled file.
#[derive(Debug, Clone)]
pub struct BundledFile {
    /// The `import` path that named it (`None` for the script).
    pub import: Option<String>,
    /// Path relative to the script's directory.
    pub rel: PathBuf,
    pub bytes: Vec<u8>,
    pub sha256: String,
}

impl BundledFile {
    fn new(import: Option<String>, rel: PathBuf, bytes: Vec<u8>) -> Self {
        let sha256 = hex::encode(Sha256::digest(&bytes));
        BundledFile {
            import,
            rel,
            bytes,
            sha256,
        }
    }

    /// Its path inside the output directory (`bundle/…`, `/`-separated).
    pub fn out_path(&self) -> String {
        let rel: Vec<_> = self
            .rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        format!("{DIR}/{}", rel.join("/"))
    }
}

/// A script and its imports, read once.
#[derive(Debug, Clone)]
pub struct ScriptBundle {
    pub script: BundledFile,
    pub modules: Vec<BundledFile>,
}

impl ScriptBundle {
    /// The bundle of the script `name` (its file name) with `text` (what
    /// was compiled), in `dir`, and the files its imports resolve to
    /// (`(import, file)`, from the script layer's resolver).
    pub fn of(
        name: PathBuf,
        text: &str,
        dir: &Path,
        imports: Vec<(String, PathBuf)>,
    ) -> Result<ScriptBundle> {
        let dir = dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
        let mut modules = Vec::new();
        for (import, file) in imports {
            let rel = file
                .strip_prefix(&dir)
                .map_err(|_| {
                    Error::Internal(format!(
                        "import \"{import}\" resolved outside the script's directory"
                    ))
                })?
                .to_path_buf();
            let bytes = std::fs::read(&file).map_err(|e| {
                Error::Usage(format!(
                    "import \"{import}\": cannot read {}: {e}",
                    file.display()
                ))
            })?;
            if rel == name {
                continue; // the script importing itself
            }
            modules.push(BundledFile::new(Some(import), rel, bytes));
        }
        Ok(ScriptBundle {
            script: BundledFile::new(None, name, text.as_bytes().to_vec()),
            modules,
        })
    }

    /// Copy every file into `out_dir/bundle/`.
    pub fn write(&self, out_dir: &Path) -> std::io::Result<()> {
        for f in std::iter::once(&self.script).chain(&self.modules) {
            let to = out_dir.join(DIR).join(&f.rel);
            // Each directory on the way is rfs's own (made now, or
            // earlier in this loop), never a link.
            let mut dir = out_dir.to_path_buf();
            for c in Path::new(DIR)
                .join(&f.rel)
                .parent()
                .into_iter()
                .flat_map(Path::components)
            {
                dir.push(c);
                crate::out_dir::ensure_dir(&dir)?;
            }
            crate::out_dir::write_new(&to, &f.bytes)?;
        }
        Ok(())
    }

    /// What the journal's first fact records.
    pub fn manifest(&self) -> BundleManifest {
        let entry = |f: &BundledFile| crate::events::BundledFile {
            path: f.out_path(),
            sha256: f.sha256.clone(),
            import: f.import.clone(),
        };
        BundleManifest {
            script: entry(&self.script),
            modules: self.modules.iter().map(entry).collect(),
        }
    }
}

/// A bundled file that does not match the journal's manifest.
#[derive(Debug, thiserror::Error)]
pub enum BundleMismatch {
    #[error("the bundle manifest names an unsafe path `{0}`")]
    UnsafePath(String),
    #[error("bundled file {path} cannot be read: {source}")]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("bundled file {path} has sha256 {got}, the journal says {want} (it was changed)")]
    Changed {
        path: String,
        got: String,
        want: String,
    },
}

/// Check the bundled files of `out_dir` against the journal's manifest,
/// accepting the redacted digests `redacted` (path, sha256) the journal
/// records for files that held a secret; returns how many files were
/// checked.
pub fn check_redacted(
    out_dir: &Path,
    manifest: &BundleManifest,
    redacted: &[(String, String)],
) -> std::result::Result<usize, BundleMismatch> {
    let mut n = 0;
    for f in std::iter::once(&manifest.script).chain(&manifest.modules) {
        let path = &f.path;
        let want = redacted
            .iter()
            .rev()
            .find(|(p, _)| p == path)
            .map_or(&f.sha256, |(_, d)| d);
        if !path.starts_with(&format!("{DIR}/"))
            || path
                .split('/')
                .any(|c| c == ".." || c == "." || c.is_empty())
        {
            return Err(BundleMismatch::UnsafePath(path.clone()));
        }
        let bytes = crate::out_dir::read_regular(out_dir, path, crate::out_dir::MAX_MODULE_BYTES)
            .map_err(|source| BundleMismatch::Unreadable {
            path: path.clone(),
            source,
        })?;
        let got = hex::encode(Sha256::digest(&bytes));
        if got != *want {
            return Err(BundleMismatch::Changed {
                path: path.clone(),
                got,
                want: want.clone(),
            });
        }
        n += 1;
    }
    Ok(n)
}
