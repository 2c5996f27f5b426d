//! A minimal ssh-agent client: list identities and sign with one
//! (draft-miller-ssh-agent: `SSH_AGENTC_REQUEST_IDENTITIES` and
//! `SSH_AGENTC_SIGN_REQUEST`). Nothing else of the protocol is needed, and
//! the private key never leaves the agent.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The environment variable naming the agent's socket.
pub const SOCK_ENV: &str = "SSH_AUTH_SOCK";

const FAILURE: u8 = 5;
const REQUEST_IDENTITIES: u8 = 11;
const IDENTITIES_ANSWER: u8 = 12;
const SIGN_REQUEST: u8 = 13;
const SIGN_RESPONSE: u8 = 14;
/// Agents refuse messages larger than 256 KiB; so do we.
const MAX_MESSAGE: usize = 256 * 1024;
/// An agent may ask its user to confirm a signature (`ssh-add -c`).
const TIMEOUT: Duration = Duration::from_secs(120);

/// What went wrong talking to the agent.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("cannot reach the ssh-agent at {}: {reason}", .socket.display())]
    Unreachable {
        socket: PathBuf,
        reason: std::io::Error,
    },
    /// `during` is "writing to" or "reading from".
    #[error("{during} the ssh-agent at {}: {reason}", .socket.display())]
    Io {
        socket: PathBuf,
        during: &'static str,
        reason: std::io::Error,
    },
    #[error("the ssh-agent at {} sent a {len}-byte message", .socket.display())]
    BadLength { socket: PathBuf, len: usize },
    #[error("truncated agent message")]
    Truncated,
    #[error("the agent refused to list its keys")]
    RefusedListing,
    #[error("the agent refused to sign (key removed, or confirmation denied)")]
    RefusedSigning,
    /// `to` names the request ("a key listing", "a sign request").
    #[error("unexpected agent reply type {reply} to {to}")]
    UnexpectedReply { reply: u8, to: &'static str },
}

/// A connection to an agent.
#[derive(Debug, Clone)]
pub struct Agent {
    socket: PathBuf,
}

/// One key the agent holds: its public key blob (SSH wire encoding) and
/// comment.
#[derive(Debug, Clone)]
pub struct Identity {
    pub blob: Vec<u8>,
    pub comment: String,
}

impl Agent {
    /// The agent named by `SSH_AUTH_SOCK`, if the variable is set.
    pub fn from_env() -> Option<Agent> {
        std::env::var_os(SOCK_ENV)
            .filter(|s| !s.is_empty())
            .map(|s| Agent {
                socket: PathBuf::from(s),
            })
    }

    pub fn at(socket: &Path) -> Agent {
        Agent {
            socket: socket.to_path_buf(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The keys the agent holds.
    pub fn identities(&self) -> Result<Vec<Identity>, AgentError> {
        let reply = self.request(&[REQUEST_IDENTITIES])?;
        let mut r = Reader(&reply);
        match r.byte()? {
            IDENTITIES_ANSWER => {}
            FAILURE => return Err(AgentError::RefusedListing),
            reply => {
                return Err(AgentError::UnexpectedReply {
                    reply,
                    to: "a key listing",
                })
            }
        }
        let n = r.u32()?;
        let mut out = Vec::new();
        for _ in 0..n {
            let blob = r.string()?.to_vec();
            let comment = String::from_utf8_lossy(r.string()?).into_owned();
            out.push(Identity { blob, comment });
        }
        Ok(out)
    }

    /// Sign `data` with the key whose public blob is `key_blob`; returns
    /// the signature blob (`string algorithm, string signature`).
    pub fn sign(&self, key_blob: &[u8], data: &[u8]) -> Result<Vec<u8>, AgentError> {
        let mut msg = vec![SIGN_REQUEST];
        put_string(&mut msg, key_blob);
        put_string(&mut msg, data);
        msg.extend_from_slice(&0u32.to_be_bytes());
        let reply = self.request(&msg)?;
        let mut r = Reader(&reply);
        match r.byte()? {
            SIGN_RESPONSE => Ok(r.string()?.to_vec()),
            FAILURE => Err(AgentError::RefusedSigning),
            reply => Err(AgentError::UnexpectedReply {
                reply,
                to: "a sign request",
            }),
        }
    }

    fn request(&self, msg: &[u8]) -> Result<Vec<u8>, AgentError> {
        let socket = || self.socket.clone();
        let io = |during| {
            move |reason| AgentError::Io {
                socket: socket(),
                during,
                reason,
            }
        };
        let mut s =
            UnixStream::connect(&self.socket).map_err(|reason| AgentError::Unreachable {
                socket: socket(),
                reason,
            })?;
        s.set_read_timeout(Some(TIMEOUT)).ok();
        s.set_write_timeout(Some(TIMEOUT)).ok();
        let mut framed = Vec::with_capacity(msg.len() + 4);
        put_string(&mut framed, msg);
        s.write_all(&framed).map_err(io("writing to"))?;
        let mut len = [0u8; 4];
        s.read_exact(&mut len).map_err(io("reading from"))?;
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 || len > MAX_MESSAGE {
            return Err(AgentError::BadLength {
                socket: socket(),
                len,
            });
        }
        let mut reply = vec![0u8; len];
        s.read_exact(&mut reply).map_err(io("reading from"))?;
        Ok(reply)
    }
}

/// Append an SSH `string` (u32 big-endian length, bytes).
pub fn put_string(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

/// Reads SSH wire types, failing on truncation.
pub struct Reader<'a>(pub &'a [u8]);

impl<'a> Reader<'a> {
    pub fn byte(&mut self) -> Result<u8, AgentError> {
        let (b, rest) = self.0.split_first().ok_or(AgentError::Truncated)?;
        self.0 = rest;
        Ok(*b)
    }

    pub fn u32(&mut self) -> Result<u32, AgentError> {
        if self.0.len() < 4 {
            return Err(AgentError::Truncated);
        }
        let (n, rest) = self.0.split_at(4);
        self.0 = rest;
        Ok(u32::from_be_bytes(n.try_into().expect("4 bytes")))
    }

    pub fn string(&mut self) -> Result<&'a [u8], AgentError> {
        let n = self.u32()? as usize;
        if self.0.len() < n {
            return Err(AgentError::Truncated);
        }
        let (s, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reader_refuses_truncated_strings() {
        let mut v = Vec::new();
        put_string(&mut v, b"abc");
        let mut r = Reader(&v[..5]);
        assert!(matches!(r.string(), Err(AgentError::Truncated)));
        let mut r = Reader(&v);
        assert_eq!(r.string().unwrap(), b"abc");
        assert!(matches!(r.byte(), Err(AgentError::Truncated)));
    }

    #[test]
    fn unreachable_agent_is_an_error_naming_the_socket() {
        let e = Agent::at(Path::new("/nonexistent/agent.sock"))
            .identities()
            .unwrap_err();
        assert!(matches!(e, AgentError::Unreachable { .. }), "{e:?}");
        assert!(e.to_string().contains("/nonexistent/agent.sock"), "{e}");
    }
}
