//! The internals the cargo-fuzz targets in `fuzz/` drive and the forger
//! tests (`tests/signing.rs`) and the verifier tests
//! (`tests/native_verifier.rs`) use, behind the `fuzzing` cargo feature
//! (enabled by `fuzz/Cargo.toml` and by the crate's own dev-dependency).
//! Not part of the public API: hidden from the docs and absent from normal
//! builds.

pub use crate::runtime::cwd::resolve as resolve_cwd;
pub use crate::runtime::step_wrapper::Gate;
pub use rfs_evidence::attestation::dsse::{seal as dsse_seal, INTOTO_PAYLOAD_TYPE};
pub use rfs_evidence::journal::chain::verify as verify_journal;
pub use rfs_evidence::journal::evidence::render_journal as render_evidence;
pub use rfs_evidence::journal::Line as JournalLine;
pub use rfs_evidence::signing::SigningKey;
pub use rfs_sandbox::source::archive::build_into as build_archive_into;
pub use rfs_sandbox::source::archive_digest::{of as entries_digest, DigestKind};
pub use rfs_sandbox::source::manifest::{Entry, Manifest};
pub use rfs_sandbox::source::remote_check::{
    parse_report, EXIT_DEST_EXISTS, EXIT_EXTRACT, SCRIPT as VERIFY_SCRIPT,
};
pub use rfs_sandbox::source::repo::resolve as resolve_source;
pub use rfs_sandbox::source::SourceOptions;
