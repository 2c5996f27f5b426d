//! Documented process exit codes of `rfs`.
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success: the script completed (and `journal verify` found the journal intact) |
//! | 1 | the script failed: a step failed, an assertion failed, a script error |
//! | 2 | usage error: bad arguments, unreadable script, script does not compile |
//! | 3 | refused: the fail-closed runtime refused to do something (no repo, dirty tree, cwd escape, failed verification, provider unavailable) |
//! | 4 | the journal is invalid (`rfs journal verify`) |
//! | 5 | internal error: rfs itself failed (journal write, provider bug) |
//! | 130 | interrupted by Ctrl-C / SIGTERM / SIGHUP / SIGQUIT (cleanup still ran) |

pub const SUCCESS: i32 = 0;
pub const SCRIPT_FAILED: i32 = 1;
pub const USAGE: i32 = 2;
pub const REFUSED: i32 = 3;
pub const JOURNAL_INVALID: i32 = 4;
pub const INTERNAL: i32 = 5;
pub const INTERRUPTED: i32 = 130;

/// How a command's end reads in user output: `exit 1`, or `no exit
/// status` — never Rust's `Some(1)` / `None`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitText(pub Option<i32>);

impl std::fmt::Display for ExitText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(c) => write!(f, "exit {c}"),
            None => f.write_str("no exit status"),
        }
    }
}
