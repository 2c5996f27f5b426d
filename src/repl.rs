//! `rfs repl`: explore the run's live sandbox interactively. Every input is
//! evaluated in one persistent scope against one run (one sandbox, one
//! bound source, one journal); Ctrl-C interrupts the current evaluation
//! (killing a running step) without ending the session; Ctrl-D or `:quit`
//! ends it, and the sandbox is destroyed and verified gone as for `rfs run`.

use std::sync::Arc;

use rhai::{Dynamic, Scope, AST};
use rustyline::error::ReadlineError;

use crate::error::{Error, FailureKind};
use crate::events::Reporter;
use crate::exit_code;
use crate::runtime::Run;
use crate::script::{self, Script, ScriptSource};
use crate::settings::RunSettings;

const HELP: &str = "rfs repl — Rhai with sandbox(), sync_source(), step() and friends.
  :help      this text
  :sandbox   the run's sandbox and bound source
  :quit      end the session (also Ctrl-D); the sandbox is destroyed and verified gone
End a line with \\ to continue on the next one. Ctrl-C interrupts a running step.";

/// Run an interactive session; returns the process exit code.
pub fn run(settings: RunSettings, reporter: Arc<dyn Reporter>) -> Result<i32, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let signals = crate::runner::Signals::install(&rt);
    let cfg = crate::runner::config(&settings, None, settings.script.clone());
    let run = Run::start(cfg, rt.handle().clone(), reporter, &settings.vars)?;
    let here = Script {
        path: settings.invocation_dir.join("<repl>"),
        dir: settings.invocation_dir.clone(),
        source: ScriptSource {
            name: "<repl>".into(),
            text: String::new(),
        },
    };
    let engine = script::run_engine(&run, &here, settings.vars.clone())?;
    // Ctrl-C while an evaluation runs (the terminal is not in raw mode then).
    if let Some(mut signals) = signals {
        let r = run.clone();
        rt.spawn(async move {
            loop {
                signals.recv().await;
                r.interrupt();
            }
        });
    }
    let mut ed = rustyline::DefaultEditor::new().map_err(Error::internal)?;
    let history = settings.state_dir.join("repl-history");
    let _ = ed.load_history(&history);
    eprintln!(
        "{HELP}\nrun {} on provider `{}`; evidence in {}",
        settings.run_id,
        settings.provider.name,
        settings.out_dir.display()
    );
    let mut scope = Scope::new();
    let mut main_ast = AST::empty();
    let mut buf = String::new();
    loop {
        let prompt = if buf.is_empty() { "rfs> " } else { "...> " };
        let line = match ed.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                buf.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => {
                eprintln!("rfs: cannot read input: {e}");
                break;
            }
        };
        if let Some(cont) = line.strip_suffix('\\') {
            buf.push_str(cont);
            buf.push('\n');
            continue;
        }
        buf.push_str(&line);
        let input = std::mem::take(&mut buf);
        let _ = ed.add_history_entry(input.as_str());
        match input.trim() {
            "" => continue,
            ":quit" | ":exit" | ":q" => break,
            ":help" => {
                eprintln!("{HELP}");
                continue;
            }
            ":sandbox" => {
                describe(&run);
                continue;
            }
            _ => {}
        }
        let src = ScriptSource {
            name: "<repl>".into(),
            text: input.clone(),
        };
        let ast = match engine.compile_with_scope(&scope, &input) {
            Ok(a) => a,
            Err(e) => {
                eprintln!("{:?}", miette::Report::new(src.parse_error(&e)));
                continue;
            }
        };
        main_ast += ast;
        match engine.eval_ast_with_scope::<Dynamic>(&mut scope, &main_ast) {
            Ok(v) if !v.is_unit() => println!("{v}"),
            Ok(_) => {}
            Err(e) => {
                let kind = if run.is_cancelled() {
                    FailureKind::Interrupted
                } else {
                    FailureKind::Failed
                };
                eprintln!("{:?}", miette::Report::new(src.runtime_error(&e, kind)));
            }
        }
        main_ast.clear_statements();
        if run.is_cancelled() {
            run.renew_cancel();
        }
    }
    let _ = ed.save_history(&history);
    // A teardown problem is reported (and journaled) but does not turn a
    // completed session into a failed one, as for `rfs run`.
    run.finish("completed");
    Ok(exit_code::SUCCESS)
}

fn describe(run: &Run) {
    let st = run.state();
    match &st.sandbox {
        Some(s) => eprintln!(
            "sandbox {} ({}), home {}",
            s.id,
            run.cfg.provider.name(),
            s.home
        ),
        None => eprintln!("no sandbox yet (provisioned on first use)"),
    }
    if let Some(b) = &st.source {
        eprintln!(
            "source: commit {} tree {} ({} files) at {}",
            b.pin.commit, b.pin.tree_digest, b.pin.files, b.pin.workdir
        );
    }
}
