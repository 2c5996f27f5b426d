//! While an input is evaluated the terminal is in its ordinary (cooked)
//! mode, so what the user types ahead waits in the terminal for the next
//! prompt. Ctrl-D is the one key the terminal itself would swallow there
//! (as end-of-file of the line being typed); [`TypeaheadGuard`] turns that
//! off for the evaluation so a Ctrl-D typed ahead reaches the prompt and
//! ends the session as it would at the prompt. Ctrl-C still interrupts.
//!
//! [`Saved`] keeps the terminal's settings from before the session, so a
//! session ended by a signal (while the prompt holds the terminal in raw
//! mode) gives the terminal back as it found it.

use std::os::fd::AsFd;

use nix::sys::termios::{self, SetArg, SpecialCharacterIndices, Termios};

/// Restores the terminal's end-of-file key when dropped.
pub(super) struct TypeaheadGuard {
    saved: Option<Termios>,
}

impl TypeaheadGuard {
    /// Keep Ctrl-D as input until dropped (no-op when stdin is no terminal).
    pub(super) fn new() -> Self {
        let stdin = std::io::stdin();
        let Ok(saved) = termios::tcgetattr(stdin.as_fd()) else {
            return TypeaheadGuard { saved: None };
        };
        let mut t = saved.clone();
        // _POSIX_VDISABLE: no character is end-of-file.
        t.control_chars[SpecialCharacterIndices::VEOF as usize] = 0;
        if termios::tcsetattr(stdin.as_fd(), SetArg::TCSADRAIN, &t).is_err() {
            return TypeaheadGuard { saved: None };
        }
        TypeaheadGuard { saved: Some(saved) }
    }
}

impl Drop for TypeaheadGuard {
    fn drop(&mut self) {
        if let Some(t) = &self.saved {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSADRAIN, t);
        }
    }
}

/// The terminal's settings when the session began.
pub(super) struct Saved(std::sync::Mutex<Option<Termios>>);

impl Saved {
    /// Remember the settings (nothing when stdin is no terminal).
    pub(super) fn now() -> Saved {
        Saved(std::sync::Mutex::new(
            termios::tcgetattr(std::io::stdin().as_fd()).ok(),
        ))
    }

    /// Put them back.
    pub(super) fn restore(&self) {
        let saved = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(t) = saved.as_ref() {
            let _ = termios::tcsetattr(std::io::stdin().as_fd(), SetArg::TCSANOW, t);
        }
    }
}
