//! The self-contained bundle: the script and every module it imports are
//! copied into the run's output directory (`bundle/`, same relative
//! layout, so the copy runs as it is) and their sha256 digests go into the
//! journal's first fact. A reviewer (and `rfs replay`) needs nothing from
//! the author's machine but the repository's commit.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::error::{Error, Result};
use crate::events::BundleManifest;
use crate::script::Script;

/// The bundle's directory inside the output directory.
pub(crate) const DIR: &str = "bundle";

/// One bundled file.
#[derive(Debug, Clone)]
pub(crate) struct BundledFile {
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
    pub(crate) fn out_path(&self) -> String {
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
pub(crate) struct Bundle {
    pub script: BundledFile,
    pub modules: Vec<BundledFile>,
}

impl Bundle {
    /// Collect `script` (the text that was compiled) and the files its
    /// literal imports resolve to, recursively.
    pub(crate) fn collect(script: &Script) -> Result<Bundle> {
        let engine = crate::script::base_engine(&script.dir)?;
        let resolver = crate::script::resolver::Resolver::new(&engine, &script.dir)
            .map_err(Error::internal)?;
        let imports = resolver
            .imports(&engine, &script.source.text)
            .map_err(|m| Error::Usage(format!("{}: {m}", script.source.name)))?;
        let dir = script
            .dir
            .canonicalize()
            .unwrap_or_else(|_| script.dir.clone());
        let name = script
            .path
            .file_name()
            .map(PathBuf::from)
            .unwrap_or_else(|| "script.rhai".into());
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
        Ok(Bundle {
            script: BundledFile::new(None, name, script.source.text.clone().into_bytes()),
            modules,
        })
    }

    /// Copy every file into `out_dir/bundle/`.
    pub(crate) fn write(&self, out_dir: &Path) -> std::io::Result<()> {
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
    pub(crate) fn manifest(&self) -> BundleManifest {
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
pub(crate) fn check_redacted(
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundles_script_and_nested_imports_with_digests() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("lib")).unwrap();
        std::fs::write(d.path().join("main.rhai"), "import \"lib/a\" as a;\n").unwrap();
        std::fs::write(
            d.path().join("lib/a.rhai"),
            "import \"b\" as b;\nfn f() { 1 }\n",
        )
        .unwrap();
        std::fs::write(d.path().join("b.rhai"), "fn g() { 2 }\n").unwrap();
        let s = Script::load(&d.path().join("main.rhai")).unwrap();
        let b = Bundle::collect(&s).unwrap();
        let paths: Vec<_> = b.modules.iter().map(|m| m.out_path()).collect();
        assert_eq!(paths, vec!["bundle/lib/a.rhai", "bundle/b.rhai"]);
        let out = tempfile::tempdir().unwrap();
        b.write(out.path()).unwrap();
        let m = b.manifest();
        assert_eq!(m.script.path, "bundle/main.rhai");
        assert_eq!(m.modules[0].import.as_deref(), Some("lib/a"));
        assert_eq!(check_redacted(out.path(), &m, &[]).unwrap(), 3);
        std::fs::write(out.path().join("bundle/b.rhai"), "fn g() { 3 }\n").unwrap();
        let e = check_redacted(out.path(), &m, &[]).unwrap_err();
        assert!(
            matches!(&e, BundleMismatch::Changed { path, .. } if path == "bundle/b.rhai"),
            "{e}"
        );
    }
}
