//! Signing evidence with an SSH key, so that outside tools verify it.
//!
//! - [`key`]: the signing key (OpenSSH ed25519 file or ssh-agent);
//! - [`ssh_agent`]: the small ssh-agent client it uses;
//! - [`allowed_signers`]: the file `ssh-keygen -Y verify` trusts keys by;
//! - [`verify_sshsig`]: check a `journal.sig` the way `ssh-keygen -Y verify` does.
//!
//! `journal.sig` is an SSHSIG (namespace `rfs`, SHA-512) over the exact
//! bytes of `journal.jsonl`, so
//! `ssh-keygen -Y verify -f allowed_signers -I ID -n rfs -s journal.sig < journal.jsonl`
//! accepts it.

pub mod allowed_signers;
pub mod error;
pub mod key;
pub mod ssh_agent;

use ssh_key::{HashAlg, PublicKey, SshSig};

pub use error::{KeyError, SignatureError};
pub use key::SigningKey;
pub use key::NAMESPACE;

/// The signature file beside the journal.
pub const SIG_FILE: &str = "journal.sig";

/// What a verified SSH signature says.
#[derive(Debug, Clone)]
pub struct VerifiedSig {
    pub key: PublicKey,
    /// `SHA256:…`
    pub fingerprint: String,
    /// The principals the allowed signers grant this key (empty when no
    /// allowed signers were given).
    pub principals: Vec<String>,
}

/// Verify an armored SSHSIG over `msg` in namespace `rfs`: the signature
/// must be valid, and when `allowed` is given its key must be allowed there
/// (for `identity`, when given).
pub fn verify_sshsig(
    msg: &[u8],
    armored: &str,
    allowed: Option<&[allowed_signers::Entry]>,
    identity: Option<&str>,
) -> Result<VerifiedSig, SignatureError> {
    let sig = SshSig::from_pem(armored.trim()).map_err(SignatureError::NotSshsig)?;
    if sig.namespace() != NAMESPACE {
        return Err(SignatureError::WrongNamespace(sig.namespace().to_owned()));
    }
    let key = PublicKey::new(sig.public_key().clone(), "");
    let fingerprint = key.fingerprint(HashAlg::Sha256).to_string();
    key.verify(NAMESPACE, msg, &sig)
        .map_err(|source| SignatureError::Mismatch {
            fingerprint: fingerprint.clone(),
            source,
        })?;
    let principals = match allowed {
        None => Vec::new(),
        Some(entries) => {
            let p = allowed_signers::principals_for(entries, key.key_data(), NAMESPACE, identity);
            if p.is_empty() {
                return Err(match identity {
                    Some(id) => SignatureError::NotAllowedFor {
                        fingerprint,
                        identity: id.to_owned(),
                    },
                    None => SignatureError::NotAllowed { fingerprint },
                });
            }
            p
        }
    };
    Ok(VerifiedSig {
        key,
        fingerprint,
        principals,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic test key, written as an OpenSSH private key file.
    fn key_file(dir: &std::path::Path) -> std::path::PathBuf {
        let kp = ssh_key::private::Ed25519Keypair::from_seed(&[7u8; 32]);
        let k = ssh_key::PrivateKey::from(kp);
        let p = dir.join("k");
        std::fs::write(
            &p,
            k.to_openssh(ssh_key::LineEnding::LF).unwrap().as_bytes(),
        )
        .unwrap();
        std::fs::write(dir.join("k.pub"), k.public_key().to_openssh().unwrap()).unwrap();
        p
    }

    fn test_pub() -> String {
        let d = tempfile::tempdir().unwrap();
        let p = key_file(d.path());
        std::fs::read_to_string(p.with_extension("pub")).unwrap()
    }

    fn key() -> SigningKey {
        let d = tempfile::tempdir().unwrap();
        SigningKey::load_with_agent(&key_file(d.path()), None).unwrap()
    }

    #[test]
    fn sshsig_round_trip_and_allowed_signers() {
        let k = key();
        let sig = k.sshsig(b"journal bytes\n").unwrap();
        assert!(sig.starts_with("-----BEGIN SSH SIGNATURE-----"));
        let v = verify_sshsig(b"journal bytes\n", &sig, None, None).unwrap();
        assert_eq!(v.fingerprint, k.fingerprint());
        let e = verify_sshsig(b"journal bytes!\n", &sig, None, None).unwrap_err();
        assert!(matches!(e, SignatureError::Mismatch { .. }), "{e}");
        let allowed = allowed_signers::parse(&format!("ci@example.com {}\n", test_pub())).unwrap();
        let v = verify_sshsig(
            b"journal bytes\n",
            &sig,
            Some(&allowed),
            Some("ci@example.com"),
        )
        .unwrap();
        assert_eq!(v.principals, vec!["ci@example.com"]);
        let e = verify_sshsig(
            b"journal bytes\n",
            &sig,
            Some(&allowed),
            Some("eve@example.com"),
        )
        .unwrap_err();
        assert!(
            matches!(&e, SignatureError::NotAllowedFor { identity, .. } if identity == "eve@example.com"),
            "{e}"
        );
    }

    #[test]
    fn dsse_envelope_verifies_only_unchanged_and_with_the_key() {
        use crate::attestation::dsse;
        let k = key();
        let env = dsse::seal(dsse::INTOTO_PAYLOAD_TYPE, b"{\"a\":1}", Some(&k)).unwrap();
        assert_eq!(env.verify(k.public_key()).unwrap(), b"{\"a\":1}");
        let mut changed = env.clone();
        changed.payload_type = "application/json".into();
        assert!(changed.verify(k.public_key()).is_err());
        let unsigned = dsse::seal(dsse::INTOTO_PAYLOAD_TYPE, b"{}", None).unwrap();
        assert!(unsigned.signatures.is_empty());
        assert!(matches!(
            unsigned.verify(k.public_key()),
            Err(crate::attestation::AttestationError::Unsigned)
        ));
    }

    #[test]
    fn public_key_without_agent_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = key_file(d.path()).with_extension("pub");
        let e = SigningKey::load_with_agent(&p, None).unwrap_err();
        assert!(
            matches!(
                e,
                KeyError::NoAgent {
                    why: "is a public key",
                    ..
                }
            ),
            "{e}"
        );
    }
}
