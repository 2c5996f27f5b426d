//! `import` resolution: `rfs/...` names the stdlib shipped in the binary;
//! anything else is a `.rhai` file inside the script's own directory.
//! Absolute paths, `..` and symlinks leading out of that directory are
//! refused: scripts get no other host file access.

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use rhai::module_resolvers::StaticModuleResolver;
use rhai::{Engine, EvalAltResult, Module, ModuleResolver, Position, Scope, Shared};

type SharedModule = Shared<Module>;

/// The stdlib modules: (import name, source).
pub const STDLIB: &[(&str, &str)] = &[
    ("rfs/assert", include_str!("../../stdlib/assert.rhai")),
    ("rfs/proof", include_str!("../../stdlib/proof.rhai")),
    ("rfs/poll", include_str!("../../stdlib/poll.rhai")),
];

/// The contained resolver.
pub struct Resolver {
    stdlib: StaticModuleResolver,
    script_dir: PathBuf,
    cache: Mutex<HashMap<PathBuf, SharedModule>>,
}

impl Resolver {
    /// Compile the stdlib with `engine` (which must not use this resolver yet).
    pub fn new(engine: &Engine, script_dir: &Path) -> Result<Self, String> {
        let mut stdlib = StaticModuleResolver::new();
        for (name, src) in STDLIB {
            let mut ast = engine
                .compile(*src)
                .map_err(|e| format!("stdlib module {name} does not compile: {e}"))?;
            ast.set_source(*name);
            let m = Module::eval_ast_as_new(Scope::new(), &ast, engine)
                .map_err(|e| format!("stdlib module {name}: {e}"))?;
            stdlib.insert(*name, m);
        }
        Ok(Resolver {
            stdlib,
            script_dir: script_dir
                .canonicalize()
                .unwrap_or_else(|_| script_dir.to_path_buf()),
            cache: Mutex::new(HashMap::new()),
        })
    }
}

/// A refused import. (Rhai rewrites `ErrorModuleNotFound` without the
/// reason, so the reason travels as a runtime error inside the module error.)
fn refused(path: &str, why: &str, pos: Position) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorInModule(
        path.to_owned(),
        Box::new(EvalAltResult::ErrorRuntime(
            format!("import \"{path}\" refused: {why}").into(),
            pos,
        )),
        pos,
    ))
}

impl Resolver {
    /// The file an import path names, or why it is refused.
    pub fn locate(&self, path: &str) -> Result<PathBuf, String> {
        let rel = Path::new(path);
        if rel.is_absolute() {
            return Err("absolute import paths are not allowed".into());
        }
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err("imports may not leave the script's directory".into());
        }
        let mut file = self.script_dir.join(rel);
        if file.extension().is_none() {
            file.set_extension("rhai");
        }
        let real = file
            .canonicalize()
            .map_err(|_| format!("{} does not exist", file.display()))?;
        if !real.starts_with(&self.script_dir) {
            return Err("it resolves outside the script's directory".into());
        }
        Ok(real)
    }

    /// Check, without running anything, that every literal `import` in
    /// `source` (and in the modules it imports) resolves and compiles.
    pub fn check_imports(&self, engine: &Engine, source: &str) -> Result<(), String> {
        self.imports(engine, source).map(|_| ())
    }

    /// Like [`Self::check_imports`], returning each imported file once, as
    /// (import path, resolved file), in the order first met.
    pub fn imports(&self, engine: &Engine, source: &str) -> Result<Vec<(String, PathBuf)>, String> {
        let mut seen = Vec::new();
        self.check_in(engine, source, &mut seen)?;
        Ok(seen)
    }

    fn check_in(
        &self,
        engine: &Engine,
        source: &str,
        seen: &mut Vec<(String, PathBuf)>,
    ) -> Result<(), String> {
        static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        let re = RE.get_or_init(|| {
            regex::Regex::new(r#"(?m)^[^/\n]*?\bimport\s+"([^"]+)""#).expect("valid regex")
        });
        for cap in re.captures_iter(source) {
            let path = &cap[1];
            if path.starts_with("rfs/") {
                if !STDLIB.iter().any(|(n, _)| *n == path) {
                    return Err(format!("import \"{path}\": no such stdlib module"));
                }
                continue;
            }
            let file = self
                .locate(path)
                .map_err(|why| format!("import \"{path}\" refused: {why}"))?;
            if seen.iter().any(|(_, f)| *f == file) {
                continue;
            }
            seen.push((path.to_owned(), file.clone()));
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("import \"{path}\": cannot read: {e}"))?;
            engine
                .compile(&text)
                .map_err(|e| format!("import \"{path}\" does not compile: {e}"))?;
            self.check_in(engine, &text, seen)?;
        }
        Ok(())
    }
}

impl ModuleResolver for Resolver {
    fn resolve(
        &self,
        engine: &Engine,
        _source: Option<&str>,
        path: &str,
        pos: Position,
    ) -> Result<SharedModule, Box<EvalAltResult>> {
        if path.starts_with("rfs/") {
            return self.stdlib.resolve(engine, None, path, pos).map_err(|_| {
                let known: Vec<_> = STDLIB.iter().map(|(n, _)| *n).collect();
                refused(
                    path,
                    &format!("no such stdlib module; known: {}", known.join(", ")),
                    pos,
                )
            });
        }
        let real = self.locate(path).map_err(|why| refused(path, &why, pos))?;
        if let Some(m) = self.cache.lock().expect("cache").get(&real) {
            return Ok(m.clone());
        }
        let src = std::fs::read_to_string(&real)
            .map_err(|e| refused(path, &format!("cannot read: {e}"), pos))?;
        let mut ast = engine.compile(&src).map_err(|e| {
            Box::new(EvalAltResult::ErrorInModule(
                path.to_owned(),
                Box::new(e.into()),
                pos,
            ))
        })?;
        ast.set_source(real.to_string_lossy().as_ref());
        let m: SharedModule = Module::eval_ast_as_new(Scope::new(), &ast, engine)
            .map_err(|e| Box::new(EvalAltResult::ErrorInModule(path.to_owned(), e, pos)))?
            .into();
        self.cache.lock().expect("cache").insert(real, m.clone());
        Ok(m)
    }
}
