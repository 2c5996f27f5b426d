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
pub(crate) const STDLIB: &[(&str, &str)] = &[
    ("rfs/assert", include_str!("../../stdlib/assert.rhai")),
    ("rfs/proof", include_str!("../../stdlib/proof.rhai")),
    ("rfs/poll", include_str!("../../stdlib/poll.rhai")),
];

/// Why an import (or the stdlib itself) is unusable.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ImportError {
    /// A stdlib module shipped in the binary does not compile (an rfs bug).
    #[error("stdlib module {name} does not compile: {reason}")]
    StdlibCompile {
        name: &'static str,
        reason: rhai::ParseError,
    },
    /// A stdlib module fails when evaluated (an rfs bug).
    #[error("stdlib module {name}: {reason}")]
    StdlibEval {
        name: &'static str,
        reason: Box<EvalAltResult>,
    },
    /// `import "rfs/..."` of a module the stdlib does not have.
    #[error("import \"{path}\": no such stdlib module")]
    NoSuchStdlib { path: String },
    /// The import path leads outside the script's directory, or nowhere.
    #[error("import \"{path}\" refused: {why}")]
    Refused { path: String, why: ImportRefusal },
    #[error("import \"{path}\": cannot read: {reason}")]
    Unreadable {
        path: String,
        reason: std::io::Error,
    },
    #[error("import \"{path}\" does not compile: {reason}")]
    DoesNotCompile {
        path: String,
        reason: rhai::ParseError,
    },
}

/// Why [`Resolver::locate`] refuses an import path.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ImportRefusal {
    #[error("absolute import paths are not allowed")]
    Absolute,
    #[error("imports may not leave the script's directory")]
    LeavesDirectory,
    #[error("{} does not exist", .0.display())]
    Missing(PathBuf),
    #[error("it resolves outside the script's directory")]
    ResolvesOutside,
    #[error("{} is a symlink: modules are regular files, never read through a link", .0.display())]
    Symlink(PathBuf),
    #[error("{} is not a regular file", .0.display())]
    NotRegular(PathBuf),
}

/// Told of every module file loaded while the script runs (import path,
/// resolved file, the exact text that will run); an error refuses the
/// import.
pub(crate) type LoadHook = Box<dyn Fn(&str, &Path, &str) -> Result<(), String> + Send + Sync>;

/// The contained resolver.
pub(crate) struct Resolver {
    stdlib: StaticModuleResolver,
    script_dir: PathBuf,
    cache: Mutex<HashMap<PathBuf, SharedModule>>,
    on_load: Option<LoadHook>,
}

impl Resolver {
    /// Compile the stdlib with `engine` (which must not use this resolver yet).
    pub(crate) fn new(engine: &Engine, script_dir: &Path) -> Result<Self, ImportError> {
        let mut stdlib = StaticModuleResolver::new();
        for (name, src) in STDLIB {
            let mut ast = engine
                .compile(*src)
                .map_err(|reason| ImportError::StdlibCompile { name, reason })?;
            ast.set_source(*name);
            let m = Module::eval_ast_as_new(Scope::new(), &ast, engine)
                .map_err(|reason| ImportError::StdlibEval { name, reason })?;
            stdlib.insert(*name, m);
        }
        Ok(Resolver {
            stdlib,
            script_dir: script_dir
                .canonicalize()
                .unwrap_or_else(|_| script_dir.to_path_buf()),
            cache: Mutex::new(HashMap::new()),
            on_load: None,
        })
    }

    /// Call `hook` for every module file loaded at run time.
    pub(crate) fn on_load(mut self, hook: LoadHook) -> Self {
        self.on_load = Some(hook);
        self
    }

    /// The script's directory (canonical), which imports stay inside.
    pub(crate) fn script_dir(&self) -> &Path {
        &self.script_dir
    }
}

/// The text of every module file loaded, by the source name its functions
/// carry (its resolved path): error diagnostics show the module's line.
fn module_texts() -> &'static Mutex<HashMap<String, Shared<str>>> {
    static TEXTS: std::sync::OnceLock<Mutex<HashMap<String, Shared<str>>>> =
        std::sync::OnceLock::new();
    TEXTS.get_or_init(Default::default)
}

/// The text of the module file whose functions carry `source`, if one
/// was loaded (never a stdlib module: a failure there is the caller's).
pub(crate) fn module_text(source: &str) -> Option<Shared<str>> {
    module_texts()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(source)
        .cloned()
}

/// A refused import. (Rhai rewrites `ErrorModuleNotFound` without the
/// reason, so the reason travels as a runtime error inside the module error.)
fn refused(path: &str, why: &dyn std::fmt::Display, pos: Position) -> Box<EvalAltResult> {
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
    pub(crate) fn locate(&self, path: &str) -> Result<PathBuf, ImportRefusal> {
        let rel = Path::new(path);
        if rel.is_absolute() {
            return Err(ImportRefusal::Absolute);
        }
        if rel
            .components()
            .any(|c| !matches!(c, Component::Normal(_) | Component::CurDir))
        {
            return Err(ImportRefusal::LeavesDirectory);
        }
        let mut file = self.script_dir.join(rel);
        if file.extension().is_none() {
            file.set_extension("rhai");
        }
        // Every component below the script's directory is reached without
        // following a link, and the module is a regular file (a FIFO would
        // block, /proc would read the host).
        let mut at = self.script_dir.clone();
        for c in Path::new(&file)
            .strip_prefix(&self.script_dir)
            .unwrap_or(rel)
            .components()
        {
            at.push(c);
            let m =
                std::fs::symlink_metadata(&at).map_err(|_| ImportRefusal::Missing(file.clone()))?;
            if m.file_type().is_symlink() {
                return Err(ImportRefusal::Symlink(at));
            }
        }
        let real = file
            .canonicalize()
            .map_err(|_| ImportRefusal::Missing(file.clone()))?;
        if !real.starts_with(&self.script_dir) {
            return Err(ImportRefusal::ResolvesOutside);
        }
        if !std::fs::symlink_metadata(&real).is_ok_and(|m| m.is_file()) {
            return Err(ImportRefusal::NotRegular(real));
        }
        Ok(real)
    }

    /// Check, without running anything, that every literal `import` in
    /// `source` (and in the modules it imports) resolves and compiles.
    pub(crate) fn check_imports(&self, engine: &Engine, source: &str) -> Result<(), ImportError> {
        self.imports(engine, source).map(|_| ())
    }

    /// Like [`Self::check_imports`], returning each imported file once, as
    /// (import path, resolved file), in the order first met.
    pub(crate) fn imports(
        &self,
        engine: &Engine,
        source: &str,
    ) -> Result<Vec<(String, PathBuf)>, ImportError> {
        let mut seen = Vec::new();
        self.check_in(engine, source, &mut seen)?;
        Ok(seen)
    }

    fn check_in(
        &self,
        engine: &Engine,
        source: &str,
        seen: &mut Vec<(String, PathBuf)>,
    ) -> Result<(), ImportError> {
        static RE: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
        let re = RE.get_or_init(|| {
            regex::Regex::new(r#"(?m)^[^/\n]*?\bimport\s+"([^"]+)""#).expect("valid regex")
        });
        for cap in re.captures_iter(source) {
            let path = &cap[1];
            if path.starts_with("rfs/") {
                if !STDLIB.iter().any(|(n, _)| *n == path) {
                    return Err(ImportError::NoSuchStdlib {
                        path: path.to_owned(),
                    });
                }
                continue;
            }
            let file = self.locate(path).map_err(|why| ImportError::Refused {
                path: path.to_owned(),
                why,
            })?;
            if seen.iter().any(|(_, f)| *f == file) {
                continue;
            }
            seen.push((path.to_owned(), file.clone()));
            let text =
                std::fs::read_to_string(&file).map_err(|reason| ImportError::Unreadable {
                    path: path.to_owned(),
                    reason,
                })?;
            engine
                .compile(&text)
                .map_err(|reason| ImportError::DoesNotCompile {
                    path: path.to_owned(),
                    reason,
                })?;
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
        if let Some(hook) = &self.on_load {
            hook(path, &real, &src).map_err(|why| refused(path, &why, pos))?;
        }
        let mut ast = engine.compile(&src).map_err(|e| {
            Box::new(EvalAltResult::ErrorInModule(
                path.to_owned(),
                Box::new(e.into()),
                pos,
            ))
        })?;
        let source = real.to_string_lossy().into_owned();
        ast.set_source(source.as_str());
        module_texts()
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(source, src.as_str().into());
        let m: SharedModule = Module::eval_ast_as_new(Scope::new(), &ast, engine)
            .map_err(|e| Box::new(EvalAltResult::ErrorInModule(path.to_owned(), e, pos)))?
            .into();
        self.cache.lock().expect("cache").insert(real, m.clone());
        Ok(m)
    }
}
