//! The Rhai side: a contained engine (raw engine + chosen packages, limits,
//! no host file access beyond the stdlib and the script's directory), the
//! bindings, and running a script on its own thread.

pub(crate) mod bindings;
pub(crate) mod collect;
pub(crate) mod diagnostics;
pub(crate) mod lint;
#[cfg(test)]
mod lint_coverage;
pub(crate) mod network_option;
pub(crate) mod options;
pub(crate) mod primitives;
mod problem;
pub(crate) mod resolver;
pub(crate) mod service_bindings;
pub(crate) mod spawn_bindings;
pub(crate) mod terminal_bindings;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rhai::packages::{Package, StandardPackage};
use rhai::{Engine, AST};

use crate::runtime::Run;
pub(crate) use diagnostics::ScriptSource;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;

/// A loaded script.
#[derive(Clone)]
pub(crate) struct Script {
    pub path: PathBuf,
    /// The directory imports resolve in.
    pub dir: PathBuf,
    pub source: ScriptSource,
}

impl Script {
    /// Read a script file.
    pub(crate) fn load(path: &Path) -> Result<Script> {
        if path == Path::new(STDIN) {
            return Self::from_stdin();
        }
        let text = read_script(path)?;
        let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
        let dir = abs.parent().map(Path::to_path_buf).unwrap_or_default();
        Ok(Script {
            path: abs,
            dir,
            source: ScriptSource {
                name: path.display().to_string(),
                text,
            },
        })
    }
}

/// A script file's text: a regular file (never through a symlink: a
/// committed `proof.rhai -> /proc/self/environ` would print rfs's
/// environment in its compile error), not a FIFO or device, bounded.
fn read_script(path: &Path) -> Result<String> {
    let meta = std::fs::symlink_metadata(path)
        .map_err(|e| Error::Usage(format!("cannot read script {}: {e}", path.display())))?;
    if meta.file_type().is_symlink() {
        let to = std::fs::read_link(path)
            .map(|t| t.display().to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(Error::Usage(format!(
            "refused: script {} is a symlink (to {to}): rfs runs only regular files, never through a link (a committed link could read any host file); run the file it points to by its own path if you trust it",
            path.display()
        )));
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bytes =
        rfs_evidence::out_dir::read_regular(dir, &name, rfs_evidence::out_dir::MAX_MODULE_BYTES)
            .map_err(|e| Error::Usage(format!("cannot read script {}: {e}", path.display())))?;
    String::from_utf8(bytes).map_err(|_| {
        Error::Usage(format!(
            "cannot read script {}: it is not UTF-8 text",
            path.display()
        ))
    })
}

/// The script path that means "read the script from standard input".
pub(crate) const STDIN: &str = "-";

impl Script {
    /// The script piped to `rfs run -`: named `<stdin>`, imports resolve
    /// in the current directory.
    fn from_stdin() -> Result<Script> {
        use std::io::Read;
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| Error::Usage(format!("cannot read the script from stdin: {e}")))?;
        let dir = std::env::current_dir()
            .map_err(|e| Error::Usage(format!("cannot read the current directory: {e}")))?;
        Ok(Script {
            path: PathBuf::from("<stdin>"),
            dir,
            source: ScriptSource {
                name: "<stdin>".into(),
                text,
            },
        })
    }
}

/// Rhai reserves the word `spawn` for a feature it does not have; rfs's
/// `spawn(name, command)` is a function like any other, so the word is
/// read as a name.
#[allow(deprecated)] // `on_parse_token` is marked volatile, not deprecated
pub(crate) fn allow_spawn(e: &mut Engine) {
    use rhai::Token;
    e.on_parse_token(|token, _, _| match token {
        Token::Reserved(s) if s.as_str() == "spawn" => Token::Identifier(s),
        other => other,
    });
}

/// The engine without run bindings: packages, limits, resolver.
pub(crate) fn base_engine(script_dir: &Path) -> Result<Engine> {
    let mut e = Engine::new_raw();
    e.register_global_module(StandardPackage::new().as_shared_module());
    e.set_max_operations(2_000_000_000)
        .set_max_call_levels(64)
        .set_max_expr_depths(128, 64)
        .set_max_string_size(256 * 1024 * 1024)
        .set_max_array_size(1_000_000)
        .set_max_map_size(1_000_000)
        .set_max_modules(256)
        .set_max_variables(10_000)
        .set_max_functions(10_000);
    e.disable_symbol("eval");
    allow_spawn(&mut e);
    e.set_fail_on_invalid_map_property(true);
    let resolver = resolver::Resolver::new(&e, script_dir).map_err(Error::internal)?;
    e.set_module_resolver(resolver);
    Ok(e)
}

/// Compile `script` and check that its literal imports resolve and compile
/// (what `rfs check` does; `rfs run` does it before anything runs).
pub(crate) fn compile(engine: &Engine, script: &Script) -> Result<AST> {
    let mut ast = engine
        .compile(&script.source.text)
        .map_err(|e| script.source.parse_error(&e))?;
    resolver::Resolver::new(engine, &script.dir)
        .map_err(Error::internal)?
        .check_imports(engine, &script.source.text)
        .map_err(|m| Error::Usage(format!("{}: {m}", script.source.name)))?;
    let problems = lint::lint(&lint::Known::new(engine), &script.source.text);
    if !problems.is_empty() {
        return Err(script.source.lint_error(&problems));
    }
    ast.set_source(script.source.name.as_str());
    Ok(ast)
}

/// Build the run's engine: base engine + bindings + print/debug routed to
/// the reporter and the journal + Ctrl-C through the progress callback.
pub(crate) fn run_engine(
    run: &Arc<Run>,
    script: &Script,
    vars: std::collections::BTreeMap<String, String>,
) -> Result<Engine> {
    let mut e = base_engine(&script.dir)?;
    // Every module loaded while the script runs is bundled: one imported
    // by a computed name is not seen by the scan before the run.
    let weak = Arc::downgrade(run);
    let resolver = resolver::Resolver::new(&e, &script.dir).map_err(Error::internal)?;
    let dir = resolver.script_dir().to_path_buf();
    e.set_module_resolver(resolver.on_load(Box::new(
        move |import, real, text| match weak.upgrade() {
            Some(run) => run.bundle_module(import, real, &dir, text),
            None => Ok(()),
        },
    )));
    bindings::register(&mut e, run.clone(), vars);
    terminal_bindings::register(&mut e, run.clone());
    spawn_bindings::register(&mut e, run.clone());
    service_bindings::register(&mut e, run.clone());
    let r = run.clone();
    e.on_print(move |text| {
        let text = r.state().redactor.redact_str(text);
        let _ = r.record(Event::Print { text });
    });
    let r = run.clone();
    e.on_debug(move |text, _src, pos| {
        let text = r.state().redactor.redact_str(text);
        let _ = r.record(Event::Debug {
            text,
            line: pos.line(),
        });
    });
    let r = run.clone();
    e.on_progress(move |_| r.is_cancelled().then(|| "interrupted".into()));
    Ok(e)
}

/// Run `ast` (the script as [`compile`] checked it, before anything ran)
/// on the calling thread, which must not be one of the run's tokio
/// runtime's threads: native calls block on that runtime. Returns the
/// classified error.
pub(crate) fn execute(run: &Arc<Run>, script: &Script, engine: Engine, ast: &AST) -> Result<()> {
    if let Some(pos) = services_refusal(run, ast) {
        let refused = run.refuse(crate::runtime::service::unsupported(
            run.cfg.provider.name(),
        ));
        let e = bindings::to_rhai(run, refused, pos);
        return Err(script.source.runtime_error(&e, |m| classify(run, &e, m)));
    }
    match engine.run_ast(ast) {
        Ok(()) => Ok(()),
        Err(e) => {
            // The error reaches the terminal and bug reports: no secrets.
            Err(script.source.runtime_error(&e, |message| {
                let message = run.state().redactor.redact_str(&message);
                classify(run, &e, message)
            }))
        }
    }
}

/// Decide what a script error stands for.
pub(crate) fn classify(run: &Run, e: &rhai::EvalAltResult, message: String) -> Error {
    if run.is_cancelled() {
        return Error::Interrupted;
    }
    let st = run.state();
    if st.fatal.is_some() {
        return Error::Internal(message);
    }
    // A refusal is the value rfs raised (caught and re-thrown is still
    // it); a script that throws the same text raised its own failure.
    let value = match e.unwrap_inner() {
        rhai::EvalAltResult::ErrorRuntime(v, _) => v.read_lock::<rhai::ImmutableString>(),
        _ => None,
    };
    if value.is_some_and(|v| st.refusals.iter().any(|r| r.ptr_eq(&v))) {
        Error::Refused(message)
    } else {
        Error::ScriptFailed(message)
    }
}

/// Where the script calls `service()` when the run's provider cannot
/// start services: refused there before anything runs (a call only an
/// imported module makes is refused when it is made).
pub(crate) fn services_refusal(run: &Run, ast: &AST) -> Option<rhai::Position> {
    if run.cfg.provider.services().is_some()
        || ast
            .iter_functions()
            .any(|f| f.name == "service" && f.params.len() == 2)
    {
        return None;
    }
    let mut at = None;
    ast.walk(&mut |path: &[rhai::ASTNode]| {
        let (call, pos) = match path.last() {
            Some(rhai::ASTNode::Expr(rhai::Expr::FnCall(c, pos))) => (c, *pos),
            Some(rhai::ASTNode::Stmt(rhai::Stmt::FnCall(c, pos))) => (c, *pos),
            _ => return true,
        };
        if call.name == "service" && call.namespace.is_empty() && call.args.len() == 2 {
            at = Some(pos);
            return false;
        }
        true
    });
    at
}
