//! rfs's sandboxes: where commands run.
//!
//! - [`provider`]: the core `Provider` trait and its typed capabilities,
//!   the registry, the command supervisor, and the backends (`local/`,
//!   `docker/`, `daytona/`);
//! - [`source`]: resolving, archiving, shipping and verifying the
//!   committed tree a sandbox runs on;
//! - [`procfs`]: what `/proc` says of processes;
//! - [`untrusted_tree`]: host-side work on folders a sandbox wrote, by
//!   descriptor, never following what it planted.
//!
//! It reports through the evidence crate's typed events and knows nothing
//! of scripts, runs or views: those are the `rfs` crate's.

/// `eprintln!` that never panics: a write to a closed or hung-up terminal
/// is dropped, so that cleanup goes on.
macro_rules! errln {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($t)*);
    }};
}

pub mod network;
pub mod procfs;
pub mod provider;
pub mod source;
pub mod untrusted_tree;

// The evidence crate's modules, under the names the sandbox code uses.
pub use rfs_evidence::{events, exit_code, out_dir, secrets, validate};
