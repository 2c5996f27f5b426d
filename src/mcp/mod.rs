//! `rfs mcp`: rfs for coding agents over the Model Context Protocol
//! (stdio, the official Rust SDK `rmcp`). One session is one run with one
//! live sandbox, as in the REPL: tools sync the source, run steps, drive
//! terminal sessions, read the journal, save what worked as a script,
//! and end the run. Every call is journaled; refusals come back as tool
//! errors with their reasons; secrets are redacted. When the client goes
//! away (or a signal comes) the running step is cancelled and the sandbox
//! is destroyed and verified gone.
//!
//! - [`tools`]: the tools, as the client sees them;
//! - [`worker`]: the script thread every call is evaluated on.

pub(crate) mod tools;
pub(crate) mod worker;

use std::sync::{Arc, Mutex};

use rmcp::ServiceExt as _;

use crate::error::Error;
use crate::outcome::RunOutcome;
use crate::runtime::Run;
use crate::script::{self, Script, ScriptSource};
use crate::settings::RunSettings;

/// Serve one session on stdin/stdout; the exit code.
pub(crate) fn run(settings: RunSettings) -> Result<i32, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let cfg = crate::runner::config(&settings, None, settings.script.clone());
    // stdout is the protocol: nothing else may be printed there.
    let run = Run::start(
        cfg,
        rt.handle().clone(),
        Arc::new(crate::events::Silent),
        &settings.vars,
    )?;
    if let Err(e) = run.preflight() {
        let _ = run.finish_with(RunOutcome::Refused, Some(&e.to_string()));
        return Err(e);
    }
    let here = Script {
        path: settings.invocation_dir.join("<mcp>"),
        dir: settings.invocation_dir.clone(),
        source: ScriptSource {
            name: "<mcp>".into(),
            text: String::new(),
        },
    };
    let engine = match script::run_engine(&run, &here, settings.vars.clone()) {
        Ok(e) => e,
        Err(e) => {
            let _ = run.finish(RunOutcome::Error);
            return Err(e);
        }
    };
    let (jobs, rx) = std::sync::mpsc::channel::<worker::Job>();
    let transcript = Arc::new(Mutex::new(Vec::new()));
    let (r, t) = (run.clone(), transcript.clone());
    let worker = std::thread::Builder::new()
        .name("rfs-mcp-script".into())
        .stack_size(16 * 1024 * 1024)
        .spawn(move || worker::serve(r, engine, rx, t))
        .map_err(Error::internal)?;
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let state = Arc::new(tools::Session {
        jobs: Mutex::new(Some(jobs)),
        run: run.clone(),
        transcript,
        out_dir: settings.out_dir.clone(),
        invocation_dir: settings.invocation_dir.clone(),
        ended: Default::default(),
        in_flight: Default::default(),
    });
    let signals = crate::runner::Signals::install(&server_rt);
    let served = server_rt.block_on(async {
        let service = tools::RfsMcp::new(state.clone())
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| {
                Error::Internal(format!("rfs mcp: the client did not start a session: {e}"))
            })?;
        match signals {
            Some(mut s) => {
                tokio::select! {
                    _ = service.waiting() => {}
                    _ = s.recv() => {}
                }
            }
            None => {
                let _ = service.waiting().await;
            }
        }
        Ok::<(), Error>(())
    });
    // The client is gone (or a signal came): stop what runs, then end the
    // run with its verified cleanup.
    let busy = state.busy();
    if busy {
        run.interrupt();
    }
    drop(state.jobs.lock().unwrap_or_else(|p| p.into_inner()).take());
    let _ = worker.join();
    let outcome = if busy {
        RunOutcome::Interrupted
    } else {
        RunOutcome::Completed
    };
    let code = match state.conclude(outcome) {
        // `end` ended it.
        None => crate::exit_code::SUCCESS,
        Some(ending) => {
            if let Some(w) = &ending.teardown_warning {
                errln!("rfs mcp: warning: {w}");
            }
            match (&ending.seal_error, busy) {
                (Some(e), _) => {
                    errln!("rfs mcp: error: {e}");
                    crate::exit_code::INTERNAL
                }
                (None, true) => crate::exit_code::INTERRUPTED,
                (None, false) => crate::exit_code::SUCCESS,
            }
        }
    };
    drop(run);
    server_rt.shutdown_timeout(std::time::Duration::from_secs(1));
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    served.map(|()| code)
}
