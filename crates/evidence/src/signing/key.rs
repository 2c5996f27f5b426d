//! The signing key of a run: an OpenSSH ed25519 private key read from a
//! file, or a key held by ssh-agent. Loaded and checked before anything
//! runs; the private key stays in memory (or in the agent) and is never
//! written anywhere.

use std::path::{Path, PathBuf};

use signature::Signer as _;
use ssh_key::{Algorithm, HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use super::error::KeyError;
use super::ssh_agent::{self, Agent, Reader};

/// The environment variable naming the signing key (`--sign-key` wins).
pub const KEY_ENV: &str = "RFS_SIGNING_KEY";
/// The SSHSIG namespace of rfs signatures (`ssh-keygen -Y verify -n rfs`).
pub const NAMESPACE: &str = "rfs";

/// Where signatures are made.
enum Holder {
    /// An unencrypted private key read from a file.
    File(Box<PrivateKey>),
    /// A key held by ssh-agent.
    Agent(Agent),
}

/// A loaded signing key.
pub struct SigningKey {
    holder: Holder,
    public: PublicKey,
    /// The path it was named by (for messages).
    pub path: PathBuf,
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningKey")
            .field("path", &self.path)
            .field("fingerprint", &self.fingerprint())
            .field("in_agent", &matches!(self.holder, Holder::Agent(_)))
            .finish()
    }
}

impl SigningKey {
    /// Load the key `path` names: an OpenSSH ed25519 private key
    /// (unencrypted, or encrypted and held by the agent at
    /// `SSH_AUTH_SOCK`), or a public key (`.pub`) whose private half the
    /// agent holds. Every other case is refused with the reason.
    pub fn load(path: &Path) -> Result<SigningKey, KeyError> {
        Self::load_with_agent(path, Agent::from_env())
    }

    pub fn load_with_agent(path: &Path, agent: Option<Agent>) -> Result<SigningKey, KeyError> {
        let shown = || path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| KeyError::Unreadable {
            path: shown(),
            source,
        })?;
        let trimmed = text.trim_start();
        let (private, public) = if trimmed.starts_with("-----BEGIN OPENSSH PRIVATE KEY-----") {
            let k =
                PrivateKey::from_openssh(trimmed).map_err(|source| KeyError::BadPrivateKey {
                    path: shown(),
                    source,
                })?;
            let public = k.public_key().clone();
            (Some(k), public)
        } else if trimmed.starts_with("-----BEGIN") {
            return Err(KeyError::NotOpenSsh { path: shown() });
        } else {
            let public = PublicKey::from_openssh(trimmed.lines().next().unwrap_or("")).map_err(
                |source| KeyError::NotAKey {
                    path: shown(),
                    source,
                },
            )?;
            (None, public)
        };
        if public.algorithm() != Algorithm::Ed25519 {
            return Err(KeyError::NotEd25519 {
                path: shown(),
                algorithm: public.algorithm().to_string(),
            });
        }
        let holder = match private {
            Some(k) if !k.is_encrypted() => Holder::File(Box::new(k)),
            other => {
                let why = if other.is_some() {
                    "is encrypted (passphrase-protected)"
                } else {
                    "is a public key"
                };
                let agent = agent.ok_or_else(|| KeyError::NoAgent {
                    path: shown(),
                    why,
                    sock_env: ssh_agent::SOCK_ENV,
                })?;
                let blob = public.to_bytes()?;
                let held = agent
                    .identities()
                    .map_err(|source| KeyError::AgentUnusable {
                        path: shown(),
                        why,
                        source,
                    })?;
                if !held.iter().any(|i| i.blob == blob) {
                    return Err(KeyError::NotInAgent {
                        path: shown(),
                        why,
                        socket: agent.socket().display().to_string(),
                        fingerprint: public.fingerprint(HashAlg::Sha256).to_string(),
                    });
                }
                Holder::Agent(agent)
            }
        };
        Ok(SigningKey {
            holder,
            public: PublicKey::new(public.key_data().clone(), ""),
            path: path.to_path_buf(),
        })
    }

    /// The public key (without comment).
    pub fn public_key(&self) -> &PublicKey {
        &self.public
    }

    /// `SHA256:…`, as `ssh-keygen -l` shows it.
    pub fn fingerprint(&self) -> String {
        self.public.fingerprint(HashAlg::Sha256).to_string()
    }

    /// What the journal records about the key.
    pub fn signer(&self) -> crate::events::Signer {
        crate::events::Signer {
            algorithm: self.public.algorithm().to_string(),
            fingerprint: self.fingerprint(),
        }
    }

    /// Whether the key is used through ssh-agent.
    pub fn in_agent(&self) -> bool {
        matches!(self.holder, Holder::Agent(_))
    }

    /// A raw ed25519 signature (64 bytes) over `data`.
    pub fn sign_raw(&self, data: &[u8]) -> Result<Vec<u8>, KeyError> {
        match &self.holder {
            Holder::File(k) => k
                .key_data()
                .try_sign(data)
                .map(|s| s.as_bytes().to_vec())
                .map_err(|source| KeyError::Sign {
                    path: self.path.display().to_string(),
                    source,
                }),
            Holder::Agent(a) => {
                let blob = self.public.to_bytes()?;
                let sig = a.sign(&blob, data)?;
                let mut r = Reader(&sig);
                let (alg, raw) = r.string().and_then(|alg| Ok((alg, r.string()?)))?;
                if alg != b"ssh-ed25519" || raw.len() != 64 {
                    return Err(KeyError::AgentSignature {
                        algorithm: String::from_utf8_lossy(alg).into_owned(),
                        len: raw.len(),
                    });
                }
                Ok(raw.to_vec())
            }
        }
    }

    /// An SSH signature (SSHSIG, namespace [`NAMESPACE`], SHA-512) over
    /// `msg`, armored as `ssh-keygen -Y sign` writes it.
    pub fn sshsig(&self, msg: &[u8]) -> Result<String, KeyError> {
        let data = SshSig::signed_data(NAMESPACE, HashAlg::Sha512, msg)?;
        let raw = self.sign_raw(&data)?;
        let sig = ssh_key::Signature::new(Algorithm::Ed25519, raw)?;
        let sshsig = SshSig::new(
            self.public.key_data().clone(),
            NAMESPACE,
            HashAlg::Sha512,
            sig,
        )?;
        // Check our own work: a signature that does not verify is never written.
        self.public
            .verify(NAMESPACE, msg, &sshsig)
            .map_err(KeyError::SelfCheck)?;
        let mut pem = sshsig.to_pem(LineEnding::LF)?;
        if !pem.ends_with('\n') {
            pem.push('\n');
        }
        Ok(pem)
    }
}

/// The key to use: `--sign-key` if given, else `RFS_SIGNING_KEY`.
pub fn from_args(flag: Option<&Path>) -> Result<Option<SigningKey>, KeyError> {
    let path = match flag {
        Some(p) => Some(p.to_path_buf()),
        None => std::env::var_os(KEY_ENV)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from),
    };
    path.map(|p| SigningKey::load(&p)).transpose()
}

/// The key of a run, loaded before anything runs: an unusable key is a
/// refusal, never an unsigned run.
pub fn for_run(flag: Option<&Path>) -> crate::error::Result<Option<std::sync::Arc<SigningKey>>> {
    from_args(flag)
        .map(|k| k.map(std::sync::Arc::new))
        .map_err(|m| crate::error::Error::Refused(format!("cannot sign this run: {m}")))
}
