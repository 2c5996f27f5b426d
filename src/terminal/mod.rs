//! The terminal layer: drive interactive programs under a PTY and assert on
//! what a user would see.
//!
//! - [`screen`]: [`Screen`], an immutable text snapshot (0-based rows/cols).
//! - [`emulator`]: the [`Emulator`] seam and [`AlacrittyEmulator`].
//! - [`keys`]: tmux-style key names to bytes.
//! - [`pattern`]: [`Pattern`] screen assertions and their matching.
//! - [`asciicast`]: asciicast v2 recording.
//! - [`session`]: [`TerminalSession`], which ties a provider's
//!   [`PtyChannel`](crate::provider::PtyChannel) to all of the above.

pub mod asciicast;
pub mod emulator;
pub mod keys;
pub mod pattern;
pub(crate) mod replay;
pub mod screen;
pub(crate) mod screen_redact;
pub mod session;
pub(crate) mod styled;
pub(crate) mod svg;

use std::time::Duration;

pub use emulator::{AlacrittyEmulator, Emulator};
pub use keys::KeyMode;
pub use pattern::{Match, Matcher, Pattern, PatternSpec, Region};
pub use screen::Screen;
pub use session::{FailureKind, Outcome, SessionOptions, TerminalSession, WaitFailure};

/// The largest terminal width or height rfs emulates, in a session
/// (`attach`, `resize`) or a recording it replays: a script or a bundle
/// must not make the emulator allocate a giant grid.
pub const MAX_SIDE: u16 = 1000;

/// Errors of the terminal layer (wait failures are [`WaitFailure`]).
#[derive(Debug, thiserror::Error)]
pub enum TerminalError {
    #[error("unknown key {0:?}")]
    UnknownKey(String),
    #[error("invalid pattern: {0}")]
    Pattern(String),
    #[error("invalid terminal size {cols}x{rows}: both must be at least 1")]
    Size { cols: u16, rows: u16 },
    #[error("cannot {0}: the terminal session has ended")]
    Closed(&'static str),
    #[error("recording {path}: {message}")]
    Recording { path: String, message: String },
    #[error("program did not exit within {timeout:?}\n{screen}")]
    ExitTimeout { timeout: Duration, screen: String },
    #[error("cancelled")]
    Cancelled,
}
