//! Why a `local` sandbox's namespaces could not be set up, or a command
//! not started in them.

use std::io;

/// Why a sandbox's namespaces could not be set up, or a command could
/// not be started inside them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SetupError {
    #[error("path {0} contains a NUL byte")]
    NulByte(String),
    #[error("the sandbox home {home} lies under {dir}, which isolated sandboxes see read-only; set RFS_STATE_DIR elsewhere")]
    HomeUnderSystemDir { home: String, dir: &'static str },
    /// A system call of rfs's own failed (`what`: the call and its object).
    #[error("{what}: {}", os(*.errno))]
    Os { what: String, errno: i32 },
    /// A step of the sandbox's setup failed in the children.
    #[error("{what} failed: {}", os(*.errno))]
    Step { what: String, errno: i32 },
    /// The sandbox's view of the host could not be prepared (its `/etc`,
    /// the id-mapped system directories).
    #[error("{0}")]
    View(String),
    #[error("the sandbox init ended before it was ready ({0})")]
    InitEnded(String),
    /// A cache's mount point could not be made in the sandbox's home.
    #[error("cache `{name}`: {message}")]
    Cache { name: String, message: String },
    /// Namespaces are not usable here, with the kernel settings that
    /// usually explain it.
    #[error("{cause}{}", hints.iter().map(|h| format!("; {h}")).collect::<String>())]
    Unavailable {
        cause: Box<SetupError>,
        hints: Vec<String>,
    },
}

/// Why a command could not be started in a sandbox (the sandbox works).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    #[error("{what} contains a NUL byte")]
    NulByte { what: &'static str },
    #[error("empty argv")]
    EmptyArgv,
    #[error("environment variable name {0:?} is empty or contains `=`")]
    EnvName(String),
    #[error("the file to execute must be a descriptor above the standard streams")]
    ExecFd,
    /// The working directory could not be entered.
    #[error("entering {cwd}: {}", os(*.errno))]
    Cwd { cwd: String, errno: i32 },
    /// `what`: which step of the start (the program itself for `exec`).
    #[error("{what}: {}", os(*.errno))]
    Os { what: String, errno: i32 },
}

pub(super) fn os(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

pub(super) fn io_setup(what: impl Into<String>, e: io::Error) -> SetupError {
    SetupError::Os {
        what: what.into(),
        errno: e.raw_os_error().unwrap_or(libc::EIO),
    }
}

pub(super) fn last_os(what: impl Into<String>) -> SetupError {
    SetupError::Os {
        what: what.into(),
        errno: errno(),
    }
}

/// The calling thread's last OS error number.
pub(super) fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
