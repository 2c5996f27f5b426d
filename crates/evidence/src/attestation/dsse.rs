//! DSSE envelopes (github.com/secure-systems-lab/dsse, protocol v1):
//! the signature is over the pre-authentication encoding
//! `"DSSEv1" SP LEN(type) SP type SP LEN(body) SP body`, never over JSON.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use ssh_key::{Algorithm, PublicKey};

use super::AttestationError;
use crate::signing::SigningKey;

/// The payload type of an in-toto Statement.
pub const INTOTO_PAYLOAD_TYPE: &str = "application/vnd.in-toto+json";

/// A DSSE envelope as JSON carries it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Envelope {
    /// Base64 (standard, padded) of the payload bytes.
    pub payload: String,
    #[serde(rename = "payloadType")]
    pub payload_type: String,
    pub signatures: Vec<Sig>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Sig {
    /// The signing key's SSH fingerprint (`SHA256:…`); a hint only.
    #[serde(default)]
    pub keyid: String,
    /// Base64 of the raw ed25519 signature over the PAE.
    pub sig: String,
}

/// The pre-authentication encoding.
pub fn pae(payload_type: &str, payload: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "DSSEv1 {} {payload_type} {} ",
        payload_type.len(),
        payload.len()
    )
    .into_bytes();
    out.extend_from_slice(payload);
    out
}

/// Wrap `payload`, signed by `key` when one is given (unsigned otherwise:
/// no signatures).
pub fn seal(
    payload_type: &str,
    payload: &[u8],
    key: Option<&SigningKey>,
) -> Result<Envelope, super::AttestationError> {
    let signatures = match key {
        None => vec![],
        Some(k) => vec![Sig {
            keyid: k.fingerprint(),
            sig: B64.encode(k.sign_raw(&pae(payload_type, payload))?),
        }],
    };
    Ok(Envelope {
        payload: B64.encode(payload),
        payload_type: payload_type.to_owned(),
        signatures,
    })
}

impl Envelope {
    /// The payload bytes.
    pub fn payload_bytes(&self) -> Result<Vec<u8>, AttestationError> {
        B64.decode(&self.payload)
            .map_err(AttestationError::PayloadNotBase64)
    }

    /// Check that some signature is `key`'s over this envelope's PAE;
    /// returns the payload.
    pub fn verify(&self, key: &PublicKey) -> Result<Vec<u8>, AttestationError> {
        let payload = self.payload_bytes()?;
        if self.signatures.is_empty() {
            return Err(AttestationError::Unsigned);
        }
        let msg = pae(&self.payload_type, &payload);
        for s in &self.signatures {
            let Ok(raw) = B64.decode(&s.sig) else {
                continue;
            };
            let Ok(sig) = ssh_key::Signature::new(Algorithm::Ed25519, raw) else {
                continue;
            };
            if signature::Verifier::verify(key.key_data(), &msg, &sig).is_ok() {
                return Ok(payload);
            }
        }
        Err(AttestationError::BadSignature {
            fingerprint: key.fingerprint(ssh_key::HashAlg::Sha256).to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pae_matches_the_dsse_spec_example() {
        // From the DSSE protocol document.
        assert_eq!(
            pae("http://example.com/HelloWorld", b"hello world"),
            b"DSSEv1 29 http://example.com/HelloWorld 11 hello world".to_vec()
        );
    }

    #[test]
    fn pae_counts_bytes_not_characters() {
        assert_eq!(
            pae("t", "é".as_bytes()),
            "DSSEv1 1 t 2 é".as_bytes().to_vec()
        );
    }
}
