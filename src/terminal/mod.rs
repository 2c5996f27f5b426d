//! The terminal layer: drive interactive programs under a PTY and assert on
//! what a user would see.
//!
//! The emulator, screens, patterns, keys and recordings live in the
//! evidence crate ([`rfs_evidence::terminal`]), because the views of a
//! finished run re-emulate recordings; this module adds the live part:
//! - [`session`]: [`TerminalSession`], which ties a provider's
//!   [`PtyChannel`](rfs_sandbox::provider::PtyChannel) to all of the above.

pub use rfs_evidence::terminal::*;

pub mod session;

pub use session::{FailureKind, Outcome, SessionOptions, TerminalSession, WaitFailure};
