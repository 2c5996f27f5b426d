//! rfs's evidence: what a run leaves behind and how it is checked.
//!
//! This crate has no async runtime and no script engine in its dependency
//! tree, so a verifier or another tool can depend on it alone:
//! - [`events`]: the one typed event stream (the schema of every fact);
//! - [`journal`]: the hash-chained journal, its one fold
//!   (`journal::fold`) and EVIDENCE.md, a view of it;
//! - [`out_dir`], [`bundle`], [`seal`], [`signing`], [`attestation`]: the
//!   bundle on disk, its seal, its SSH signature and in-toto attestation;
//! - [`report`]: every view of a finished run (HTML, JUnit, Markdown);
//! - [`verify`]: re-deriving and checking all of the above;
//! - [`terminal`]: the emulator and screens recordings are replayed into;
//! - [`outcome`], [`error`], [`exit_code`]: how runs end and what they say.

pub mod attestation;
pub mod bundle;
pub mod checkpoint_link;
pub mod error;
pub mod events;
pub mod exit_code;
pub mod journal;
pub mod out_dir;
pub mod outcome;
pub mod plural;
pub mod report;
pub mod seal;
pub mod secrets;
pub mod signing;
pub mod terminal;
pub mod text;
pub mod validate;
pub mod verify;
