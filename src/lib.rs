// Checked in the test build (where `fuzzing` makes the forger tests' internals
// public): an item only the crate can reach is `pub(crate)`.
#![cfg_attr(feature = "fuzzing", warn(unreachable_pub))]
//! rfs: fail-closed, provable sandbox workflows scripted in Rhai.
//!
//! Data flows script → runtime → provider:
//! - [`script`]: the Rhai engine, the script-facing functions and the one
//!   declaration of the primitives (`script::primitives`);
//! - [`runtime`]: one run, its shared sandbox, bound source (the transfer
//!   plan), steps, the sandbox watch, teardown;
//! - [`provider`]: the core `Provider` trait and its typed capabilities, the
//!   registry, the command supervisor, and the backends (`local/`,
//!   `docker/`, `daytona/`);
//! - [`source`]: resolving, archiving and verifying the committed tree;
//! - [`terminal`]: PTY sessions, the terminal emulator and screen assertions;
//! - [`journal`]: the hash-chained journal, its one typed fold
//!   (`journal::fold`) and EVIDENCE.md, a view of it;
//! - [`events`]/[`reporter`]: what the runtime reports and how the CLI shows it;
//!   [`outcome`]: how runs and steps end.

/// `println!` that never panics: a write to a closed or hung-up terminal
/// is dropped, so that cleanup (teardown, the journal's `run.end`) goes on.
macro_rules! outln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout(), $($t)*);
    }};
}
/// `print!` that never panics (see [`outln`]).
macro_rules! out {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout(), $($t)*);
    }};
}
/// `eprintln!` that never panics (see [`outln`]).
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub(crate) mod bisect;
pub(crate) mod caches;
pub(crate) mod ci;
pub mod cli;
pub(crate) mod color;
pub(crate) mod doctor;
pub(crate) mod error_render;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
pub(crate) mod gc;
pub(crate) mod lifecycle;
pub mod limit_ceilings;
pub(crate) mod logging;
pub(crate) mod mcp;
pub(crate) mod repl;
pub(crate) mod replay;
pub mod repo_config;
pub mod reporter;
pub(crate) mod rerun;
pub mod runner;
pub(crate) mod runs;
pub(crate) mod runtime;
pub(crate) mod sandboxes;
pub(crate) mod script;
pub mod settings;
pub(crate) mod suite;
pub mod terminal;

// The sandbox crate's modules, under the names the rest of rfs uses.
pub use rfs_sandbox::{network, procfs, provider, source, untrusted_tree};

// The evidence crate's modules, under the names the rest of rfs uses.
pub use rfs_evidence::{
    attestation, bundle, checkpoint_link, error, events, exit_code, journal, out_dir, outcome,
    plural, report, seal, secrets, signing, validate, verify,
};

/// Verified teardown (destroy, then poll get-by-id and the inventory until
/// both say gone), for embedders and tests that provision sandboxes directly.
pub use runtime::teardown::{destroy_verified, GoneProof, NotGone};
