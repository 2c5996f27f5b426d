//! The internals the cargo-fuzz targets in `fuzz/` drive and the forger
//! tests (`tests/signing.rs`) and the verifier tests
//! (`tests/native_verifier.rs`) use, behind the `fuzzing` cargo feature
//! (enabled by `fuzz/Cargo.toml` and by the crate's own dev-dependency).
//! Not part of the public API: hidden from the docs and absent from normal
//! builds.

pub use crate::attestation::dsse::{seal as dsse_seal, INTOTO_PAYLOAD_TYPE};
pub use crate::journal::chain::verify as verify_journal;
pub use crate::journal::evidence::render_journal as render_evidence;
pub use crate::journal::Line as JournalLine;
pub use crate::runtime::cwd::resolve as resolve_cwd;
pub use crate::runtime::step_wrapper::Gate;
pub use crate::signing::SigningKey;
pub use crate::source::archive::build_into as build_archive_into;
pub use crate::source::archive_digest::{of as entries_digest, DigestKind};
pub use crate::source::manifest::{Entry, Manifest};
pub use crate::source::remote_check::{
    parse_report, EXIT_DEST_EXISTS, EXIT_EXTRACT, SCRIPT as VERIFY_SCRIPT,
};
pub use crate::source::repo::resolve as resolve_source;
pub use crate::source::SourceOptions;
