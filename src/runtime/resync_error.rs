//! Why a re-sync's command failed in the sandbox ([`super::resync`]).

/// Why a command of the re-sync failed in the sandbox.
#[derive(Debug, thiserror::Error)]
pub(super) enum ApplyError {
    #[error(transparent)]
    Provider(#[from] rfs_sandbox::provider::ProviderError),
    #[error(transparent)]
    Report(#[from] rfs_sandbox::source::remote_check::ReportError),
    #[error("interrupted")]
    Interrupted,
    /// Past its deadline ([`super::resync::deadline`]): stopped.
    #[error("the sandbox command did not finish within {0} s, its deadline (a minute, plus 5 ms per entry it walks and a second per MiB it handles); rfs stopped it")]
    Deadline(u64),
    /// The sandbox was paused, died or vanished while rfs waited on it.
    #[error("sandbox {0}; rfs stopped waiting for it")]
    Stalled(String),
    /// A missing tool or a vanished root: the script's own message.
    #[error("{0}")]
    Refused(String),
    #[error("removing old paths failed: {0}")]
    Remove(String),
    #[error("extraction failed: {0}")]
    Extract(String),
    #[error("cannot hash the upload: {0}")]
    Digest(String),
    #[error("the sandbox command ended with {}: {stderr}", rfs_evidence::exit_code::ExitText(*.exit))]
    Exited { exit: Option<i32>, stderr: String },
}
