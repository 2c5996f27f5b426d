//! One run lifecycle for every entry point: **start → body → end**.
//!
//! - [`start`]: validated settings become a run — the provider built (or
//!   injected), the output directory and the journal opened, the secrets
//!   of rfs's own environment learned, and the provider's preflight (a
//!   provider that cannot work at all refuses before anything else, and
//!   that refusal is ended and sealed like any run).
//! - the body is the entry point's own: a script ([`crate::runner`]), a
//!   suite's proof, a bisect lane, a `--watch` pass, a replay (all through
//!   [`crate::runner::run_with_body`]), the REPL loop ([`crate::repl`]), an
//!   MCP session ([`crate::mcp`]).
//! - [`end`]: open terminals closed, the sandbox torn down and verified
//!   gone, `run.end` journaled, the bundle sealed and its report drawn.
//!
//! [`signals`] turns SIGINT/SIGTERM/SIGHUP/SIGQUIT into an orderly
//! interrupt of whichever body runs.

pub(crate) mod end;
pub(crate) mod signals;
pub(crate) mod start;

pub(crate) use end::{end_run, Ended};
pub use signals::INTERRUPT_SIGNALS;
pub(crate) use signals::{cancel_on_signals, wait_signal, Signals};
pub(crate) use start::{start, SetupLink, Start};
