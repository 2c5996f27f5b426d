//! Why an attestation cannot be written, or does not hold.

/// An attestation that cannot be made or checked, or does not match.
#[derive(Debug, thiserror::Error)]
pub enum AttestationError {
    #[error("cannot read {what}: {source}")]
    Unreadable {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot write {path}: {source}")]
    Unwritable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the journal is not UTF-8")]
    JournalNotUtf8,
    #[error("the journal is incomplete: line {line} ends mid-entry, with no line end (its write was cut short: a full disk, or rfs killed while writing)")]
    Incomplete { line: usize },
    #[error("journal line {line} is not a journal entry: {source}")]
    NotAnEntry {
        line: usize,
        #[source]
        source: serde_json::Error,
    },
    #[error("journal line {line} (`{kind}`) is not an entry this rfs knows: {source}")]
    UnknownEntry {
        line: usize,
        kind: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the journal does not start with run.start")]
    NoRunStart,
    #[error("encoding the statement: {0}")]
    Encoding(#[source] serde_json::Error),
    #[error("{file} is not a DSSE envelope: {source}")]
    NotAnEnvelope {
        file: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("{file} has payload type `{found}`, not `{expected}`")]
    PayloadType {
        file: &'static str,
        found: String,
        expected: &'static str,
    },
    #[error("the envelope's payload is not base64: {0}")]
    PayloadNotBase64(#[source] base64::DecodeError),
    #[error("{file}'s payload is not JSON: {source}")]
    PayloadNotJson {
        file: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("the attestation is unsigned")]
    Unsigned,
    #[error("no signature in the attestation verifies with key {fingerprint} over its DSSE encoding (payload or signature changed)")]
    BadSignature { fingerprint: String },
    #[error("{file} carries signatures but the journal is unsigned, so they cannot be checked")]
    SignedWithoutJournalSignature { file: &'static str },
    #[error("{file} does not match the journal: {difference}")]
    Differs {
        file: &'static str,
        difference: String,
    },
    #[error(transparent)]
    Signing(#[from] crate::signing::KeyError),
    #[error(transparent)]
    JournalSignature(#[from] crate::signing::SignatureError),
}
