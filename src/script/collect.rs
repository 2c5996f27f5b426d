//! A script's bundle: the script and every module its literal imports
//! resolve to, found with the engine's own resolver (the bundle's data and
//! files are [`rfs_evidence::bundle`]'s, which knows nothing of Rhai).

use std::path::PathBuf;

use super::Script;
use rfs_evidence::bundle::ScriptBundle;
use rfs_evidence::error::{Error, Result};

/// Collect `script` (the text that was compiled) and the files its
/// literal imports resolve to, recursively.
pub(crate) fn bundle(script: &Script) -> Result<ScriptBundle> {
    let engine = super::base_engine(&script.dir)?;
    let resolver = super::resolver::Resolver::new(&engine, &script.dir).map_err(Error::internal)?;
    let imports = resolver
        .imports(&engine, &script.source.text)
        .map_err(|m| Error::Usage(format!("{}: {m}", script.source.name)))?;
    let name = script
        .path
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| "script.rhai".into());
    ScriptBundle::of(name, &script.source.text, &script.dir, imports)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfs_evidence::bundle::{check_redacted, BundleMismatch};

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
        let b = bundle(&s).unwrap();
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
