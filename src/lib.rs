//! rfs: fail-closed, provable sandbox workflows scripted in Rhai.
pub mod provider;
pub mod terminal;
