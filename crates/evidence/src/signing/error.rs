//! What can go wrong loading a signing key, signing, and checking a
//! signature. The messages are what the user sees (in `rfs run`'s refusal
//! and in `rfs verify`'s failed check).

use super::ssh_agent::AgentError;
use super::NAMESPACE;

/// A signing key that cannot be used, or a signature that cannot be made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("cannot read signing key {path}: {source}")]
    Unreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("signing key {path} is not a readable OpenSSH private key: {source}")]
    BadPrivateKey {
        path: String,
        #[source]
        source: ssh_key::Error,
    },
    #[error("signing key {path} is not in OpenSSH format (PEM/PKCS#8 keys are not supported; convert with `ssh-keygen -p -f KEY` or create one with `ssh-keygen -t ed25519`)")]
    NotOpenSsh { path: String },
    #[error("signing key {path} is neither an OpenSSH private key nor a public key: {source}")]
    NotAKey {
        path: String,
        #[source]
        source: ssh_key::Error,
    },
    #[error("signing key {path} is a {algorithm} key; rfs signs with ed25519 keys only (create one with `ssh-keygen -t ed25519`)")]
    NotEd25519 { path: String, algorithm: String },
    #[error("signing key {path} {why} and no ssh-agent is reachable ({sock_env} is not set); add the key to an agent with `ssh-add {path}` or use an unencrypted key")]
    NoAgent {
        path: String,
        why: &'static str,
        sock_env: &'static str,
    },
    #[error("signing key {path} {why}, and {source}")]
    AgentUnusable {
        path: String,
        why: &'static str,
        #[source]
        source: AgentError,
    },
    #[error("signing key {path} {why} and the ssh-agent at {socket} does not hold it ({fingerprint}); add it with `ssh-add`")]
    NotInAgent {
        path: String,
        why: &'static str,
        socket: String,
        fingerprint: String,
    },
    #[error("encoding the SSH signature or key: {0}")]
    Encoding(#[from] ssh_key::Error),
    #[error("signing with {path}: {source}")]
    Sign {
        path: String,
        #[source]
        source: signature::Error,
    },
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error("the agent returned a {algorithm} signature of {len} bytes, not ed25519")]
    AgentSignature { algorithm: String, len: usize },
    #[error("the signature just made does not verify: {0}")]
    SelfCheck(#[source] ssh_key::Error),
}

/// A `journal.sig` (or the allowed-signers file it is checked against)
/// that does not hold.
#[derive(Debug, thiserror::Error)]
pub enum SignatureError {
    #[error("not an SSH signature (SSHSIG): {0}")]
    NotSshsig(#[source] ssh_key::Error),
    #[error("the signature is for namespace `{0}`, not `{NAMESPACE}`")]
    WrongNamespace(String),
    #[error("the signature by key {fingerprint} does not match the signed bytes ({source}): they were changed after signing")]
    Mismatch {
        fingerprint: String,
        #[source]
        source: ssh_key::Error,
    },
    #[error("the signature is valid but key {fingerprint} is not an allowed signer for identity `{identity}` in namespace `{NAMESPACE}`")]
    NotAllowedFor {
        fingerprint: String,
        identity: String,
    },
    #[error("the signature is valid but key {fingerprint} is not in the allowed signers for namespace `{NAMESPACE}`")]
    NotAllowed { fingerprint: String },
    #[error("--identity needs --allowed-signers (the file that says who the identity is)")]
    IdentityWithoutAllowedSigners,
    #[error("the journal says the run was signed by key {fingerprint}, but {file} is missing")]
    Missing {
        fingerprint: String,
        file: &'static str,
    },
    #[error("the run is unsigned ({file} is missing), and --allowed-signers {allowed_signers} requires a signature")]
    Required {
        file: &'static str,
        allowed_signers: String,
    },
    #[error("cannot read {file}: {source}")]
    Unreadable {
        file: &'static str,
        #[source]
        source: std::io::Error,
    },
    #[error("signed by key {signed_by}, but the journal's first fact names key {named}")]
    OtherKey { signed_by: String, named: String },
    #[error("signed by key {signed_by}, but the journal's first fact names no signing key (the signature was added after the run)")]
    Unannounced { signed_by: String },
    #[error("cannot read allowed signers {path}: {source}")]
    AllowedSignersUnreadable {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("allowed signers {path}: {source}")]
    AllowedSignersMalformed {
        path: String,
        #[source]
        source: MalformedLine,
    },
}

/// A line of an allowed-signers file that cannot be read.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {why}")]
pub struct MalformedLine {
    pub line: usize,
    pub why: &'static str,
}
