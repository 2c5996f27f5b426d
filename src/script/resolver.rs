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
pub const STDLIB: &[(&str, &str)] = &[("rfs/assert", include_str!("../../stdlib/assert.rhai"))];

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

fn refused(path: &str, why: &str, pos: Position) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorModuleNotFound(
        format!("{path} ({why})"),
        pos,
    ))
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
        let rel = Path::new(path);
        if rel.is_absolute() {
            return Err(refused(path, "absolute import paths are not allowed", pos));
        }
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(refused(
                path,
                "imports may not leave the script's directory",
                pos,
            ));
        }
        let mut file = self.script_dir.join(rel);
        if file.extension().is_none() {
            file.set_extension("rhai");
        }
        let real = file
            .canonicalize()
            .map_err(|_| refused(path, &format!("{} does not exist", file.display()), pos))?;
        if !real.starts_with(&self.script_dir) {
            return Err(refused(
                path,
                "it resolves outside the script's directory",
                pos,
            ));
        }
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
