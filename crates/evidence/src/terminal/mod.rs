//! What a terminal showed: the emulator, screens, patterns, keys and
//! recordings — everything of the terminal layer that needs no PTY, so the
//! views of a finished run can re-emulate a recording (the PTY sessions
//! themselves are `rfs::terminal::session`).
//!
//! - [`screen`]: [`Screen`], an immutable text snapshot (0-based rows/cols).
//! - [`emulator`]: the [`Emulator`] seam and [`AlacrittyEmulator`].
//! - [`keys`]: tmux-style key names to bytes.
//! - [`pattern`]: [`Pattern`] screen assertions and their matching.
//! - [`asciicast`]: asciicast v2 recording.

pub mod asciicast;
pub mod emulator;
pub mod keys;
pub mod pattern;
pub mod playback;
pub mod screen;
pub mod screen_redact;
pub mod styled;
pub mod svg;

use std::time::Duration;

pub use emulator::{AlacrittyEmulator, Emulator};
pub use keys::KeyMode;
pub use pattern::{Match, Matcher, Pattern, PatternSpec, Region};
pub use screen::Screen;

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
