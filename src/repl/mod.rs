//! `rfs repl`: explore the run's live sandbox interactively. Every input is
//! evaluated in one persistent scope against one run (one sandbox, one
//! bound source, one journal).
//!
//! - [`line_meaning`]: meta-command or script; open input continues on the next
//!   line (decided by Rhai's parser).
//! - [`complete`]: tab completion.
//! - [`meta`]: `:help`, `:sandbox`, `:journal`, `:screen`, `:save`, `:quit`.
//! - [`pretty`]: how values are shown.
//! - [`transcript`]: the inputs that succeeded, as a replayable script.
//!
//! Input typed or pasted while a step runs is never lost: rustyline keeps
//! bytes it read past the end of a line for the next prompt (its
//! `buffer-redux` feature), and the terminal holds what arrives while no
//! prompt is reading. Ctrl-C interrupts the current evaluation (killing a
//! running step, ending a wait) without ending the session; Ctrl-D or
//! `:quit` ends it, and the sandbox is destroyed and verified gone as for
//! `rfs run` (or kept with `--keep`). SIGTERM, SIGHUP and SIGQUIT (a
//! supervisor, a closed terminal) end the session wherever it is: the
//! running input is interrupted, the run ends `interrupted` with the same
//! verified cleanup, and rfs exits 130.

pub(crate) mod complete;
pub(crate) mod line_meaning;
pub(crate) mod meta;
pub(crate) mod pretty;
pub(crate) mod transcript;
mod tty;

use rfs_evidence::outcome::RunOutcome;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rhai::{Dynamic, Engine, Scope, AST};
use rustyline::error::ReadlineError;
use rustyline::history::FileHistory;

use crate::runtime::Run;
use crate::script::{self, Script, ScriptSource};
use crate::settings::RunSettings;
use line_meaning::Parsed;
use rfs_evidence::error::Error;
use rfs_evidence::events::Reporter;
use rfs_evidence::exit_code;

const PROMPT: &str = "rfs> ";
const CONTINUE: &str = "...> ";

/// The line editor of the prompt.
type Editor = rustyline::Editor<complete::Helper, FileHistory>;

/// Run an interactive session; returns the process exit code.
pub(crate) fn run(settings: RunSettings, reporter: Arc<dyn Reporter>) -> Result<i32, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let signals = crate::lifecycle::Signals::install(&rt);
    // What the session shows (values, screens) has the secrets of rfs's
    // own environment redacted: the lifecycle's start learns them.
    let run = crate::lifecycle::start(
        &settings,
        rt.handle().clone(),
        crate::lifecycle::Start {
            provider: None,
            script_path: settings.script.clone(),
            reporter,
            bundle: None,
            key: None,
            replay_of: None,
            link: Default::default(),
        },
    )
    .map_err(|not| not.into_error())?;
    let engine = repl_engine(&run, &settings)?;
    // Ctrl-C while an evaluation runs (the terminal is not in raw mode
    // then) interrupts it; the other signals end the session.
    let ending = Ending::new();
    if let Some(signals) = signals {
        watch_signals(&rt, signals, &run, &ending);
    }
    let mut session = Session {
        helper_scope: Default::default(),
        run: run.clone(),
        scope: Scope::new(),
        functions: AST::empty(),
        imports: String::new(),
        transcript: Default::default(),
        cwd: settings.invocation_dir.clone(),
        known: script::lint::Known::new(&engine),
    };
    let helper = complete::Helper::new(&engine);
    session.helper_scope = helper.scope.clone();
    let mut ed = editor(helper)?;
    let _ = std::fs::create_dir_all(&settings.state_dir);
    let history = settings.state_dir.join("repl-history");
    let _ = ed.load_history(&history);
    errln!(
        "{}\nrun {} on provider `{}`; evidence in {}",
        meta::help(),
        settings.run_id,
        settings.provider.name,
        settings.out_dir.display()
    );
    let unfinished = read_eval_loop(&mut ed, &engine, &mut session, &ending);
    save_history(&mut ed, &history);
    // A signal that ends the session owns the cleanup from here.
    let _busy = ending.busy();
    if ending.by_signal.load(Ordering::SeqCst) {
        loop {
            std::thread::park();
        }
    }
    let code = conclude(&run, unfinished.as_deref());
    drop(session);
    drop(run);
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(code)
}

/// The session's script engine: the run's, for a script named `<repl>`
/// in the invocation directory.
fn repl_engine(run: &Arc<Run>, settings: &RunSettings) -> Result<Engine, Error> {
    let here = Script {
        path: settings.invocation_dir.join("<repl>"),
        dir: settings.invocation_dir.clone(),
        source: ScriptSource {
            name: "<repl>".into(),
            text: String::new(),
        },
    };
    script::run_engine(run, &here, settings.vars.clone())
}

/// Every signal interrupts the running input; one other than SIGINT
/// also ends the session (see [`Ending`]).
fn watch_signals(
    rt: &tokio::runtime::Runtime,
    mut signals: crate::lifecycle::Signals,
    run: &Arc<Run>,
    ending: &Ending,
) {
    let r = run.clone();
    let ending = ending.clone();
    rt.spawn(async move {
        loop {
            let sig = signals.recv().await;
            r.interrupt();
            if sig != "SIGINT" {
                let (r, ending) = (r.clone(), ending.clone());
                // Teardown blocks on the runtime: not on one of its threads.
                std::thread::spawn(move || ending.end_by_signal(&r, sig));
                return;
            }
        }
    });
}

/// The line editor, completing with `helper`.
fn editor(helper: complete::Helper) -> Result<Editor, Error> {
    let config = rustyline::Config::builder()
        .auto_add_history(false)
        .completion_type(rustyline::CompletionType::List)
        .max_history_size(10_000)
        .map_err(Error::internal)?
        .build();
    let mut ed = Editor::with_config(config).map_err(Error::internal)?;
    ed.set_helper(Some(helper));
    Ok(ed)
}

/// Read and evaluate inputs until Ctrl-D, `:quit` or a read error;
/// returns the input that ended (piped stdin) inside an unfinished
/// statement, if any.
fn read_eval_loop(
    ed: &mut Editor,
    engine: &Engine,
    session: &mut Session,
    ending: &Ending,
) -> Option<String> {
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { PROMPT } else { CONTINUE };
        let line = match ed.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                if !buf.is_empty() {
                    errln!("(input abandoned)");
                }
                buf.clear();
                continue;
            }
            Err(ReadlineError::Eof) => {
                if !buf.trim().is_empty() {
                    return Some(std::mem::take(&mut buf));
                }
                return None;
            }
            Err(e) => {
                errln!("rfs: cannot read input: {e}");
                return None;
            }
        };
        if session.line(ed, engine, ending, &mut buf, &line) == Flow::Quit {
            return None;
        }
    }
}

/// Save the history; the file keeps no secret the process learnt (typed
/// values that became known as secrets after they were typed included).
fn save_history(ed: &mut Editor, history: &std::path::Path) {
    let entries: Vec<String> = ed
        .history()
        .iter()
        .map(|e| {
            String::from_utf8_lossy(&rfs_evidence::secrets::redact_known(e.as_bytes())).into_owned()
        })
        .collect();
    let _ = ed.clear_history();
    for e in entries {
        let _ = ed.add_history_entry(e);
    }
    let _ = ed.save_history(history);
}

/// End the run once the session is over: failed if the input ended inside
/// an unfinished statement (which was not run), completed otherwise;
/// returns the exit code.
fn conclude(run: &Run, unfinished: Option<&str>) -> i32 {
    if let Some(text) = unfinished {
        let text = run.state().redactor.redact_str(text);
        let why = format!(
            "the input ended inside an unfinished statement, which was not run:\n{}",
            text.trim_end()
        );
        errln!("rfs: {why}");
        return sealed(
            crate::lifecycle::end_run(run, RunOutcome::Failed, Some(&why), None),
            exit_code::SCRIPT_FAILED,
        );
    }
    // A teardown problem is reported (and journaled) but does not turn a
    // completed session into a failed one, as for `rfs run`.
    let ended = crate::lifecycle::end_run(run, RunOutcome::Completed, None, None);
    if run.cfg.keep {
        let st = run.state();
        if let (Some(sb), false) = (&st.sandbox, st.destroyed) {
            errln!(
                "rfs: sandbox {} was kept (--keep); once this session has ended, remove it with `rfs gc --provider {}`",
                sb.id,
                run.cfg.choice.name
            );
        }
    }
    sealed(ended, exit_code::SUCCESS)
}

/// The session's exit code once its run ended: `code`, unless its
/// evidence could not be sealed (then said, and an internal error).
fn sealed(ended: crate::lifecycle::Ended, code: i32) -> i32 {
    match ended.seal_error {
        Some((what, e)) => {
            errln!("rfs: the session ended but {what} failed: {e}");
            exit_code::INTERNAL
        }
        None => code,
    }
}

/// How the session ends when a terminating signal arrives: the input
/// being evaluated holds [`Ending::busy`]; the signal's thread waits for
/// it (bounded), then owns the cleanup and exits.
#[derive(Clone)]
struct Ending {
    busy: Arc<Mutex<()>>,
    by_signal: Arc<AtomicBool>,
    /// The terminal as the session found it.
    terminal: Arc<tty::Saved>,
}

/// How long a terminating signal waits for the interrupted input to stop.
const ENDING_GRACE: Duration = Duration::from_secs(10);

impl Ending {
    fn new() -> Ending {
        Ending {
            busy: Arc::default(),
            by_signal: Arc::default(),
            terminal: Arc::new(tty::Saved::now()),
        }
    }

    fn busy(&self) -> MutexGuard<'_, ()> {
        self.busy.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn end_by_signal(&self, run: &Run, sig: &str) -> ! {
        let deadline = Instant::now() + ENDING_GRACE;
        let _guard = loop {
            match self.busy.try_lock() {
                Ok(g) => break Some(g),
                Err(std::sync::TryLockError::Poisoned(p)) => break Some(p.into_inner()),
                Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(std::sync::TryLockError::WouldBlock) => break None,
            }
        };
        self.by_signal.store(true, Ordering::SeqCst);
        // The prompt may hold the terminal in raw mode: give it back first.
        self.terminal.restore();
        errln!("\r\nrfs: {sig}: ending the session");
        let ended = crate::lifecycle::end_run(
            run,
            RunOutcome::Interrupted,
            Some(&format!("{sig} received")),
            None,
        );
        std::process::exit(sealed(ended, exit_code::INTERRUPTED));
    }
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

/// One interactive session's state across inputs.
struct Session {
    run: Arc<Run>,
    scope: Scope<'static>,
    /// Functions defined so far.
    functions: AST,
    /// `import … as …;` statements that succeeded (modules are re-imported
    /// for every input: Rhai keeps imports for one evaluation only).
    imports: String,
    transcript: transcript::Transcript,
    helper_scope: Arc<std::sync::Mutex<complete::ScopeView>>,
    cwd: std::path::PathBuf,
    /// What functions exist, for the static checks of each input.
    known: script::lint::Known,
}

impl Session {
    fn meta(&mut self, name: &str, args: &str) -> Flow {
        let shown = match name {
            "quit" | "q" | "exit" => return Flow::Quit,
            "help" | "h" => Ok(meta::help()),
            "sandbox" => Ok(meta::sandbox(&self.run)),
            "journal" => meta::journal(&self.run, args),
            "screen" => meta::screen(&self.run, args),
            "save" | "save!" => meta::save(
                &self.transcript,
                &self.run,
                args,
                name == "save!",
                &self.cwd,
            ),
            other => Err(meta::MetaError::Unknown(other.to_owned())),
        };
        match shown {
            Ok(s) => outln!("{s}"),
            Err(e) => errln!("rfs: {e}"),
        }
        Flow::Continue
    }

    /// Handle one line read at the prompt: a meta-command, more of an
    /// open input, or the end of an input, which is then evaluated.
    fn line(
        &mut self,
        ed: &mut Editor,
        engine: &Engine,
        ending: &Ending,
        buf: &mut String,
        line: &str,
    ) -> Flow {
        if buf.is_empty() {
            if let Some((name, args)) = line_meaning::meta(line) {
                let _ = ed.add_history_entry(line.trim());
                let _typeahead = tty::TypeaheadGuard::new();
                return self.meta(name, args);
            }
        }
        // A trailing backslash still forces a continuation.
        if let Some(cont) = line.strip_suffix('\\') {
            buf.push_str(cont);
            buf.push('\n');
            return Flow::Continue;
        }
        buf.push_str(line);
        if line_meaning::classify(engine, buf) == Parsed::Incomplete {
            buf.push('\n');
            return Flow::Continue;
        }
        let input = std::mem::take(buf);
        if input.trim().is_empty() {
            return Flow::Continue;
        }
        let _ = ed.add_history_entry(input.as_str());
        let _typeahead = tty::TypeaheadGuard::new();
        let _busy = ending.busy();
        self.eval(engine, &input);
        Flow::Continue
    }

    fn eval(&mut self, engine: &Engine, input: &str) {
        let src = ScriptSource {
            name: "<repl>".into(),
            text: input.to_owned(),
        };
        let ast = match engine.compile_with_scope(&self.scope, input) {
            Ok(a) => a,
            Err(e) => {
                errln!("{:?}", miette::Report::new(src.parse_error(&e)));
                return;
            }
        };
        // The static checks of `rfs check`, with the session so far as
        // what this input follows.
        let problems = script::lint::lint_after(&self.known, &self.transcript.body(), input);
        if !problems.is_empty() {
            errln!("{:?}", miette::Report::new(src.lint_error(&problems)));
            return;
        }
        let imports = match engine.compile(&self.imports) {
            Ok(a) => a,
            Err(_) => AST::empty(),
        };
        let whole = imports.merge(&self.functions).merge(&ast);
        if self.run.is_cancelled() {
            self.run.renew_cancel();
        }
        let steps_before = self.run.state().step_seq;
        match engine.eval_ast_with_scope::<Dynamic>(&mut self.scope, &whole) {
            Ok(v) => {
                if !v.is_unit() {
                    // A step that ran in this input streamed its output
                    // already: its value does not show it again.
                    let streamed = self.run.state().step_seq != steps_before;
                    let shown = pretty::render(&v, streamed);
                    outln!("{}", meta::redacted(&self.run, &shown));
                }
                self.transcript.push(input);
                self.functions += ast.clone_functions_only();
                for stmt in import_statements(input) {
                    self.imports.push_str(&stmt);
                    self.imports.push('\n');
                }
            }
            Err(e) => {
                let err = src.runtime_error(&e, |message| {
                    if self.run.is_cancelled() {
                        Error::Interrupted
                    } else {
                        Error::ScriptFailed(self.run.state().redactor.redact_str(&message))
                    }
                });
                errln!("{:?}", miette::Report::new(err));
            }
        }
        if self.run.is_cancelled() {
            self.run.renew_cancel();
        }
        self.refresh_view();
    }

    /// Tell the completer what is in scope now.
    fn refresh_view(&self) {
        let mut v = self.helper_scope.lock().unwrap_or_else(|p| p.into_inner());
        v.vars = self
            .scope
            .iter_raw()
            .map(|(name, _, value)| (name.to_owned(), complete::Kind::of(value)))
            .collect();
        v.fns = self
            .functions
            .iter_functions()
            .map(|f| f.name.to_owned())
            .collect();
        v.modules = import_aliases(&self.imports);
    }
}

fn import_re() -> regex::Regex {
    regex::Regex::new(r#"(?m)^\s*import\s+("[^"\n]*")\s+as\s+([A-Za-z_][A-Za-z0-9_]*)\s*;?"#)
        .expect("valid regex")
}

/// Top-level `import "…" as name;` statements of an input.
fn import_statements(input: &str) -> Vec<String> {
    import_re()
        .captures_iter(input)
        .map(|c| format!("import {} as {};", &c[1], &c[2]))
        .collect()
}

fn import_aliases(imports: &str) -> Vec<String> {
    import_re()
        .captures_iter(imports)
        .map(|c| c[2].to_owned())
        .collect()
}
