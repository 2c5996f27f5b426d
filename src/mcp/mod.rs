//! `rfs mcp`: rfs for coding agents over the Model Context Protocol
//! (stdio, the official Rust SDK `rmcp`). One session is one run with one
//! live sandbox, as in the REPL: tools sync the source, run steps, drive
//! terminal sessions, read the journal, save what worked as a script,
//! and end the run. Every call is journaled; refusals come back as tool
//! errors with their reasons; secrets are redacted. When the client goes
//! away (or a signal comes) the running step is cancelled and the sandbox
//! is destroyed and verified gone.
//!
//! - [`framing`]: stdin/stdout, one bounded JSON-RPC message a line;
//! - [`client_session`]: the run, started once a client initialized, and its end;
//! - [`tools`]: the tools, as the client sees them;
//! - [`save`]: where `save` may write, and how;
//! - [`terminals`]: one numbering of terminals (the journal's);
//! - [`worker`]: the script thread every call is evaluated on.

pub(crate) mod client_session;
pub(crate) mod framing;
pub(crate) mod save;
pub(crate) mod terminals;
pub(crate) mod tools;
pub(crate) mod worker;

use rmcp::service::ServerInitializeError;
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::ServiceExt as _;

use crate::settings::RunSettings;
use client_session::Session;
use rfs_evidence::error::Error;

/// Serve one session on stdin/stdout; the exit code.
pub(crate) fn run(settings: RunSettings) -> Result<i32, Error> {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let (ready, started) = tokio::sync::watch::channel::<tools::Started>(None);
    let signals = crate::lifecycle::Signals::install(&server_rt);
    // The client initializes first: one that leaves before that (or never
    // speaks MCP) has started nothing, so there is nothing to end or seal.
    let (service, framing) = server_rt.block_on(async {
        let (input, output) = rmcp::transport::stdio_pipes();
        let (from_client, to_client, framing) = framing::start(input, output);
        let transport = AsyncRwTransport::<rmcp::RoleServer, _, _>::new(from_client, to_client)
            .with_max_line_length(framing::MAX_LINE + 2);
        (tools::RfsMcp::new(started).serve(transport).await, framing)
    });
    let service = match service {
        Ok(s) => s,
        Err(ServerInitializeError::ConnectionClosed(_)) => {
            tracing::debug!("rfs mcp: the client left before it initialized a session");
            server_rt.shutdown_timeout(std::time::Duration::from_secs(1));
            return Ok(rfs_evidence::exit_code::SUCCESS);
        }
        Err(e) => {
            server_rt.shutdown_timeout(std::time::Duration::from_secs(1));
            return Err(Error::Usage(format!(
                "rfs mcp: the client did not start an MCP session: {e}"
            )));
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    let state = match Session::start(&settings, rt.handle().clone()) {
        Ok(s) => s,
        Err(e) => {
            // Calls waiting for the session say why it could not start.
            let _ = ready.send(Some(Err(e.to_string())));
            server_rt.block_on(async {
                let _ = service.cancel().await;
            });
            server_rt.shutdown_timeout(std::time::Duration::from_secs(1));
            rt.shutdown_timeout(std::time::Duration::from_secs(2));
            return Err(e);
        }
    };
    let _ = ready.send(Some(Ok(state.clone())));
    let signalled = server_rt.block_on(async {
        match signals {
            Some(mut s) => {
                tokio::select! {
                    _ = service.waiting() => false,
                    _ = s.recv() => true,
                }
            }
            None => {
                let _ = service.waiting().await;
                false
            }
        }
    });
    // The client is gone (or a signal came): cancel what runs, then end
    // the run with its verified cleanup — unless `end` already did.
    let (ending, ended_here) = state.end();
    let by_end = !ended_here;
    if let Some(w) = &ending.teardown_warning {
        errln!("rfs mcp: warning: {w}");
    }
    let code = match &ending.seal_error {
        Some(e) => {
            errln!("rfs mcp: error: the session ended but {e}: its evidence is incomplete");
            rfs_evidence::exit_code::INTERNAL
        }
        // `end` cancelled a call at the client's request: done as asked.
        None if by_end => rfs_evidence::exit_code::SUCCESS,
        None if signalled || ending.cancelled_a_call => rfs_evidence::exit_code::INTERRUPTED,
        None => rfs_evidence::exit_code::SUCCESS,
    };
    drop(state);
    // Every answer written out before the process ends.
    server_rt.block_on(async {
        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), framing).await;
    });
    server_rt.shutdown_timeout(std::time::Duration::from_secs(1));
    rt.shutdown_timeout(std::time::Duration::from_secs(2));
    Ok(code)
}
