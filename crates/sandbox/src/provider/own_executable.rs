//! rfs's own executable, as this process declared it: providers place it
//! in their sandboxes (the in-sandbox verifier, the namespace init), so
//! it is the sandbox layer's to know, whoever declares it.

use std::path::{Path, PathBuf};

/// The rfs executable that runs the verifier, once declared.
static EXECUTABLE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Declare `path` as an executable whose entry point dispatches [`COMMAND`] (the in-sandbox verifier)
/// (rfs's CLI declares `/proc/self/exe`; a program embedding the library,
/// like a test, may name the rfs binary). The first declaration stays.
pub fn declare_executable(path: PathBuf) {
    let _ = EXECUTABLE.set(path);
}

/// The declared executable (`None`: this process cannot run the native
/// verifier, so syncs verify with the POSIX script).
pub fn executable() -> Option<&'static Path> {
    EXECUTABLE.get().map(PathBuf::as_path)
}

/// The hidden first argument that makes rfs the verifier.
pub const COMMAND: &str = "__verify-source";

/// The argument that only asks the verifier to answer
/// [`probe_answer`] (a verifier that answers it started).
pub const PROBE: &str = "--probe";

/// What `rfs __verify-source --probe` prints.
pub fn probe_answer() -> String {
    format!("rfs {} verifier\n", env!("CARGO_PKG_VERSION"))
}
