//! The run journal: `journal.jsonl`, one JSON object per line with a
//! sequence number, a timestamp, a kind, a payload and the sha256 of the
//! previous line, so any edited, dropped or reordered line is detected.
//! Every line is written and flushed before the call returns.

mod background;
pub mod bisect_answer;
pub mod caches;
pub mod chain;
pub mod checkpoints;
pub mod evidence;
pub mod fold;
pub mod head;
pub mod host_mounts;
pub mod inert_markdown;
pub mod network_view;
pub mod services;
pub mod spawns;

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::events::{Event, FileDigest};

/// The `prev` of the first line.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// One journal line, fields in the order they are written.
#[derive(Debug, Serialize, Deserialize)]
pub struct Line {
    pub seq: u64,
    pub ts: String,
    pub kind: String,
    pub payload: serde_json::Value,
    pub prev: String,
}

/// An append-only, hash-chained journal file.
#[derive(Debug)]
pub struct Journal {
    file: File,
    seq: u64,
    head: String,
}

impl Journal {
    /// Create a new journal at `path` (refuses to overwrite one).
    pub fn create(path: &Path) -> std::io::Result<Self> {
        use std::os::unix::fs::OpenOptionsExt;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)?;
        Ok(Journal {
            file,
            seq: 0,
            head: GENESIS.to_owned(),
        })
    }

    /// The hash of the last line written (or [`GENESIS`]).
    pub fn head(&self) -> &str {
        &self.head
    }

    /// Number of lines written.
    pub fn len(&self) -> u64 {
        self.seq
    }

    /// Whether nothing was written yet.
    pub fn is_empty(&self) -> bool {
        self.seq == 0
    }

    /// Append one fact; returns its sequence number. The line reaches the
    /// file (one write) before this returns.
    pub fn append(&mut self, event: &Event) -> std::io::Result<u64> {
        let (kind, payload) = event.to_kind_payload();
        let line = Line {
            seq: self.seq + 1,
            ts: now_rfc3339(),
            kind,
            payload,
            prev: self.head.clone(),
        };
        let mut text = serde_json::to_string(&line).map_err(std::io::Error::other)?;
        let hash = line_hash(&text);
        text.push('\n');
        self.file.write_all(text.as_bytes())?;
        self.file.flush()?;
        self.seq += 1;
        self.head = hash;
        Ok(self.seq)
    }

    /// Make sure everything is on disk.
    pub fn sync(&self) -> std::io::Result<()> {
        self.file.sync_data()
    }
}

/// sha256 hex of one line's text (without the newline).
pub fn line_hash(text: &str) -> String {
    hex::encode(Sha256::digest(text.as_bytes()))
}

/// The digest of a file rfs wrote and closed, `rel` being its path
/// relative to `out_dir` (read in chunks: logs can be large).
pub fn file_digest(out_dir: &Path, rel: &str) -> std::io::Result<FileDigest> {
    file_digest_at_most(out_dir, rel, u64::MAX)
}

/// [`file_digest`] of a regular file inside `out_dir` (reached without
/// following a link) of at most `max` bytes: anything else is refused
/// before a byte is read (see [`crate::out_dir::open_regular`]).
pub fn file_digest_at_most(out_dir: &Path, rel: &str, max: u64) -> std::io::Result<FileDigest> {
    let (f, _) = crate::out_dir::open_regular(out_dir, rel, max)?;
    let mut f = std::io::Read::take(f, max);
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut bytes = 0u64;
    loop {
        let n = std::io::Read::read(&mut f, &mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(FileDigest {
        path: rel.to_owned(),
        sha256: hex::encode(h.finalize()),
        bytes,
    })
}

/// Current UTC time, RFC 3339 with milliseconds.
pub fn now_rfc3339() -> String {
    let f = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z"
    );
    time::OffsetDateTime::now_utc()
        .format(&f)
        .unwrap_or_else(|_| "unknown".into())
}
