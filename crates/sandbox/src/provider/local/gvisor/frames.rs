//! The frames between rfs and its agent in a gVisor sandbox
//! ([`super::agent`]): over the sandbox's first process's standard input
//! (rfs → agent) and output (agent → rfs), each a header — kind (1 byte),
//! command id and payload length (4 bytes each, little-endian) — then the
//! payload. Either side reads the other's frames as untrusted: a length
//! over [`MAX_PAYLOAD`] or an unknown kind ends the channel.

use serde::{Deserialize, Serialize};

/// rfs → agent: start a command ([`Start`] as JSON).
pub const START: u8 = 1;
/// rfs → agent: SIGKILL the command's process group (and the command).
pub const KILL: u8 = 2;
/// agent → rfs, once, id 0: the agent runs (payload: [`HELLO`]).
pub const READY: u8 = 10;
/// agent → rfs: the command started (payload: its pid inside, u32).
pub const STARTED: u8 = 11;
/// agent → rfs: the command could not start (payload: [`Failed`]).
pub const FAILED: u8 = 12;
pub const STDOUT: u8 = 13;
pub const STDERR: u8 = 14;
/// agent → rfs: the command's stdout (stderr) reached its end.
pub const STDOUT_END: u8 = 15;
pub const STDERR_END: u8 = 16;
/// agent → rfs: the command ended (payload: its wait status, i32).
pub const EXIT: u8 = 17;

/// The agent's greeting: the protocol it speaks.
pub const HELLO: &[u8] = b"rfs-gvisor-agent 1";
pub const HEADER: usize = 9;
/// The largest payload either side sends (output is sent in chunks).
pub const MAX_PAYLOAD: usize = 4 << 20;
/// The largest output chunk the agent reads at once.
pub const CHUNK: usize = 64 << 10;

/// A command to start: exactly this argv, environment and working
/// directory (a path inside).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Start {
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: String,
}

/// Why a command did not start.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Failed {
    /// Its working directory could not be entered.
    pub cwd: bool,
    pub message: String,
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub kind: u8,
    pub id: u32,
    pub payload: Vec<u8>,
}

/// The bytes of a frame.
pub fn encode(kind: u8, id: u32, payload: &[u8]) -> Vec<u8> {
    let mut b = Vec::with_capacity(HEADER + payload.len());
    b.push(kind);
    b.extend_from_slice(&id.to_le_bytes());
    b.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    b.extend_from_slice(payload);
    b
}

/// Frames out of a byte stream read in pieces.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: Vec<u8>,
}

impl Decoder {
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, `Ok(None)` until one is there, or why the
    /// stream is not frames (a payload over [`MAX_PAYLOAD`]).
    pub fn next(&mut self) -> Result<Option<Frame>, String> {
        if self.buf.len() < HEADER {
            return Ok(None);
        }
        let word = |at: usize| u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4"));
        let (id, len) = (word(1), word(5) as usize);
        if len > MAX_PAYLOAD {
            return Err(format!("a frame of {len} bytes (at most {MAX_PAYLOAD})"));
        }
        if self.buf.len() < HEADER + len {
            return Ok(None);
        }
        let kind = self.buf[0];
        let payload = self.buf[HEADER..HEADER + len].to_vec();
        self.buf.drain(..HEADER + len);
        Ok(Some(Frame { kind, id, payload }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_split_anywhere_come_out_whole_and_oversized_ones_are_refused() {
        let mut bytes = encode(STDOUT, 7, b"hello");
        bytes.extend(encode(EXIT, 7, &0i32.to_le_bytes()));
        let mut d = Decoder::default();
        let mut got = vec![];
        for b in bytes {
            d.push(&[b]);
            while let Some(f) = d.next().unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got.len(), 2);
        assert_eq!(
            (got[0].kind, got[0].id, &got[0].payload[..]),
            (STDOUT, 7, &b"hello"[..])
        );
        assert_eq!(got[1].kind, EXIT);
        let mut d = Decoder::default();
        let mut huge = vec![STDOUT, 1, 0, 0, 0];
        huge.extend_from_slice(&(MAX_PAYLOAD as u32 + 1).to_le_bytes());
        d.push(&huge);
        assert!(d.next().is_err());
    }
}
