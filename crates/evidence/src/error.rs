//! The one error type of rfs, rendered with miette.
//!
//! Fatal errors end a run; reported-and-continue problems (a teardown
//! that could not be verified, a journal line for a warning) are
//! [`crate::events::Event::Warning`]s instead and never become an `Error`.

use miette::{Diagnostic, NamedSource, SourceSpan};

use crate::exit_code;

/// A script error with its source and the span of the failing call.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(code(rfs::script))]
pub struct ScriptError {
    pub message: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("{label}")]
    pub span: Option<SourceSpan>,
    pub label: String,
    #[help]
    pub help: Option<String>,
    /// What the failure is (decides the exit code and the run's outcome):
    /// `Refused`, `Interrupted`, `Internal`, `Usage` or `ScriptFailed`,
    /// carrying the same (redacted) message.
    pub cause: Box<Error>,
    /// Where the failing code was called from, when it failed inside an
    /// imported module (`src` and `span` are then the module's).
    #[related]
    pub called_from: Vec<CallSite>,
}

/// The call in the script that led to a failure inside a module.
#[derive(Debug, thiserror::Error, Diagnostic)]
#[error("{message}")]
#[diagnostic(severity(Advice))]
pub struct CallSite {
    pub message: String,
    #[source_code]
    pub src: NamedSource<String>,
    #[label("{label}")]
    pub span: Option<SourceSpan>,
    pub label: String,
}

#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum Error {
    /// The fail-closed runtime refused an operation.
    #[error("refused: {0}")]
    #[diagnostic(code(rfs::refused))]
    Refused(String),

    /// A step ended unsuccessfully.
    #[error("step `{name}` failed: {reason}")]
    #[diagnostic(code(rfs::step_failed))]
    StepFailed { name: String, reason: String },

    /// `assert_screen` did not see what it waited for (the message holds
    /// the screen dump).
    #[error("assert_screen failed: {0}")]
    #[diagnostic(code(rfs::assert_screen))]
    ScreenAssertion(String),

    /// Ctrl-C or SIGTERM.
    #[error("interrupted")]
    #[diagnostic(code(rfs::interrupted))]
    Interrupted,

    /// A script failed, at a place in its source.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Script(Box<ScriptError>),

    /// The script failed (a `throw`, a failed assertion, a script error).
    #[error("{0}")]
    #[diagnostic(code(rfs::script_failed))]
    ScriptFailed(String),

    /// Bad command-line usage or an unreadable/uncompilable script.
    #[error("{0}")]
    #[diagnostic(code(rfs::usage))]
    Usage(String),

    /// `rfs journal verify` found tampering.
    #[error("journal {path} is not intact: {reason}")]
    #[diagnostic(code(rfs::journal_invalid))]
    JournalInvalid {
        path: String,
        /// Why (the typed reason is what `journal::chain` returns; the
        /// error carries its words, said once).
        reason: String,
    },

    /// `rfs verify` found a check that does not hold.
    #[error("{out} does not verify: {check}: {reason}")]
    #[diagnostic(code(rfs::not_verified))]
    NotVerified {
        out: String,
        check: &'static str,
        /// Why (the typed reason is what `verify::verify_with`
        /// returns; the error carries its words, said once).
        reason: String,
    },

    /// rfs itself failed (I/O, journal writes, provider bugs).
    #[error("internal error: {}", without_prefix(.0))]
    #[diagnostic(code(rfs::internal))]
    Internal(String),
}

impl Error {
    /// The documented exit code for this error.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Refused(_) => exit_code::REFUSED,
            Error::StepFailed { .. } | Error::ScreenAssertion(_) | Error::ScriptFailed(_) => {
                exit_code::SCRIPT_FAILED
            }
            Error::Interrupted => exit_code::INTERRUPTED,
            Error::Script(s) => s.cause.exit_code(),
            Error::Usage(_) => exit_code::USAGE,
            Error::JournalInvalid { .. } | Error::NotVerified { .. } => exit_code::JOURNAL_INVALID,
            Error::Internal(_) => exit_code::INTERNAL,
        }
    }

    /// The run outcome this error ends a run with (`run.end`'s
    /// `outcome`).
    pub fn outcome(&self) -> crate::outcome::RunOutcome {
        use crate::outcome::RunOutcome;
        match self {
            Error::Refused(_) => RunOutcome::Refused,
            Error::Interrupted => RunOutcome::Interrupted,
            Error::Internal(_) => RunOutcome::Error,
            Error::Script(s) => s.cause.outcome(),
            _ => RunOutcome::Failed,
        }
    }

    pub fn internal(e: impl std::fmt::Display) -> Self {
        Error::Internal(e.to_string())
    }
}

/// An internal error's text without the prefix it already carries when
/// it was made from another internal error's text (said once, never
/// "internal error: internal error: ...").
fn without_prefix(text: &str) -> &str {
    let mut t = text;
    while let Some(rest) = t.strip_prefix("internal error: ") {
        t = rest;
    }
    t
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn internal_errors_are_not_prefixed_twice() {
        let inner = Error::internal("journal write failed");
        let outer = Error::internal(&inner);
        assert_eq!(outer.to_string(), "internal error: journal write failed");
        assert_eq!(
            Error::internal(outer).to_string(),
            "internal error: journal write failed"
        );
    }
}
