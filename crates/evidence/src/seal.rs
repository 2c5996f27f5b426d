//! Sealing a run's evidence once its journal is closed, and checking the
//! seal (part of `rfs verify`).
//!
//! Sealing writes `attestation.intoto.json` (always; signed when there is
//! a key) and `journal.sig` (with a key). The journal's first fact names
//! the signing key's fingerprint, so a bundle whose signature was removed
//! is detected.

use std::path::{Path, PathBuf};

use crate::attestation::{self, AttestationError};
use crate::events::Signer;
use crate::signing::{self, allowed_signers, SignatureError, SigningKey};

/// Write the attestation and, with a key, the journal's signature.
pub fn seal(out_dir: &Path, key: Option<&SigningKey>) -> Result<(), AttestationError> {
    let journal = attestation::read_journal(out_dir)?;
    attestation::write(out_dir, &journal, key)?;
    if let Some(k) = key {
        let sig = k.sshsig(&journal)?;
        attestation::write_atomic(&out_dir.join(signing::SIG_FILE), sig.as_bytes())?;
    }
    Ok(())
}

/// What `rfs verify` checks the signature against.
#[derive(Debug, Clone, Default)]
pub struct Trust {
    /// An `ssh-keygen` allowed-signers file; with it a signature is required.
    pub allowed_signers: Option<PathBuf>,
    /// The principal the signer must be (needs `allowed_signers`).
    pub identity: Option<String>,
}

/// The `journal.sig` check: a valid SSH signature over the journal's bytes
/// by the key its first fact names, allowed by `trust` when given; a run
/// that names no key must have no signature unless one is required.
pub fn check_signature(
    out_dir: &Path,
    journal: &[u8],
    announced: Option<&Signer>,
    trust: &Trust,
) -> Result<String, SignatureError> {
    if trust.identity.is_some() && trust.allowed_signers.is_none() {
        return Err(SignatureError::IdentityWithoutAllowedSigners);
    }
    let sig_path = out_dir.join(signing::SIG_FILE);
    if !sig_path.exists() {
        if let Some(a) = announced {
            return Err(SignatureError::Missing {
                fingerprint: a.fingerprint.clone(),
                file: signing::SIG_FILE,
            });
        }
        if let Some(f) = &trust.allowed_signers {
            return Err(SignatureError::Required {
                file: signing::SIG_FILE,
                allowed_signers: f.display().to_string(),
            });
        }
        return Ok("none (unsigned run)".into());
    }
    let armored =
        crate::out_dir::read_regular(out_dir, signing::SIG_FILE, crate::out_dir::MAX_RECORD_BYTES)
            .and_then(|b| {
                String::from_utf8(b)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|source| SignatureError::Unreadable {
                file: signing::SIG_FILE,
                source,
            })?;
    let entries = trust
        .allowed_signers
        .as_deref()
        .map(allowed_signers::read)
        .transpose()?;
    let v = signing::verify_sshsig(
        journal,
        &armored,
        entries.as_deref(),
        trust.identity.as_deref(),
    )?;
    match announced {
        Some(a) if a.fingerprint == v.fingerprint => {}
        Some(a) => {
            return Err(SignatureError::OtherKey {
                signed_by: v.fingerprint,
                named: a.fingerprint.clone(),
            })
        }
        None => {
            return Err(SignatureError::Unannounced {
                signed_by: v.fingerprint,
            })
        }
    }
    Ok(if v.principals.is_empty() {
        format!(
            "valid SSH signature (namespace rfs) over journal.jsonl by key {}; not checked against allowed signers (pass --allowed-signers)",
            v.fingerprint
        )
    } else {
        format!(
            "valid SSH signature (namespace rfs) over journal.jsonl by {} (key {})",
            v.principals.join(", "),
            v.fingerprint
        )
    })
}

/// The `attestation.intoto.json` check: a DSSE envelope whose in-toto
/// Statement equals the one the journal gives, signed with the journal's
/// key when the run is signed, unsigned otherwise.
pub fn check_attestation(out_dir: &Path, journal: &[u8]) -> Result<String, AttestationError> {
    let key = match crate::out_dir::read_regular(
        out_dir,
        signing::SIG_FILE,
        crate::out_dir::MAX_RECORD_BYTES,
    )
    .and_then(|b| {
        String::from_utf8(b).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }) {
        Ok(armored) => Some(signing::verify_sshsig(journal, &armored, None, None)?.key),
        Err(_) => None,
    };
    let text =
        crate::out_dir::read_regular(out_dir, attestation::FILE, crate::out_dir::MAX_RECORD_BYTES)
            .and_then(|b| {
                String::from_utf8(b)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|source| AttestationError::Unreadable {
                what: attestation::FILE.into(),
                source,
            })?;
    if key.is_none() && env_has_signatures(&text) {
        return Err(AttestationError::SignedWithoutJournalSignature {
            file: attestation::FILE,
        });
    }
    let c = attestation::check(out_dir, journal, key.as_ref())?;
    Ok(format!(
        "in-toto Statement matches the journal ({} steps){}",
        c.steps,
        if c.signed {
            ", DSSE signature valid with the journal's key"
        } else {
            ", unsigned"
        }
    ))
}

fn env_has_signatures(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v["signatures"].as_array().map(|a| !a.is_empty()))
        .unwrap_or(false)
}
