//! `rfs journal verify`: re-check the hash chain of a journal.

use std::path::Path;

use super::{line_hash, Line, GENESIS};

/// What a successful verification found.
#[derive(Debug)]
pub struct Verified {
    pub lines: u64,
    pub head: String,
    /// Whether the journal ends with a `run.end` entry.
    pub complete: bool,
    /// Whether the journal ends at the head recorded beside it
    /// (`journal.head`, rewritten with EVIDENCE.md): `Some(false)` when it
    /// runs past it, `None` without a record.
    pub matches_recorded_head: Option<bool>,
}

/// Why a journal is not intact: the first problem found.
#[derive(Debug, thiserror::Error)]
pub enum ChainError {
    #[error("cannot read: {0}")]
    Unreadable(#[source] std::io::Error),
    #[error("the journal is incomplete: line {line} ends mid-entry, with no line end (its write was cut short: a full disk, or rfs killed while writing); the {} lines before it chain intact", .line - 1)]
    Incomplete { line: usize },
    #[error("line {line} is not a journal entry: {error}")]
    NotAnEntry {
        line: usize,
        #[source]
        error: serde_json::Error,
    },
    #[error("line {line} has sequence number {seq}, expected {expected} (a line was dropped, duplicated or reordered)")]
    Sequence {
        line: usize,
        seq: u64,
        expected: u64,
    },
    #[error("line {line} (seq {seq}) does not chain to the line before it (that line was edited, dropped or reordered)")]
    Unchained { line: usize, seq: u64 },
    #[error("line {line} (seq {seq}) was edited")]
    Edited { line: usize, seq: u64 },
    #[error(
        "line {line} (seq {seq}) follows the run.end entry (lines were added after the run ended)"
    )]
    AfterEnd { line: usize, seq: u64 },
    #[error("the journal is empty")]
    Empty,
    #[error(
        "line {line} does not match the head recorded in journal.head (the journal was edited)"
    )]
    HeadMismatch { line: u64 },
    #[error("journal.head records {recorded} lines but the journal has {actual} (lines were dropped from its end)")]
    Truncated { recorded: u64, actual: u64 },
    #[error(
        "the journal ends with run.end but journal.head records an earlier head (lines were added)"
    )]
    AddedAfterRecordedEnd,
}

/// Verify `path`. Errors say which line broke the chain and how.
pub fn verify(path: &Path) -> Result<Verified, ChainError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = crate::out_dir::read_regular(dir, &name, crate::out_dir::MAX_RECORD_BYTES)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(ChainError::Unreadable)?;
    let (chained, hashes) = verify_text(&text)?;
    let matches_recorded_head = path
        .parent()
        .and_then(super::head::read)
        .map(|super::head::RecordedHead { lines, head }| {
            // EVIDENCE.md is rewritten after journal lines: a run killed
            // in between leaves a journal that runs past the recorded head
            // (consistent), never one that stops short of it.
            let at = usize::try_from(lines).ok().and_then(|l| l.checked_sub(1));
            match at.and_then(|i| hashes.get(i)) {
                Some(h) if *h == head => Ok(lines == chained.lines),
                Some(_) => Err(ChainError::HeadMismatch { line: lines }),
                None => Err(ChainError::Truncated {
                    recorded: lines,
                    actual: chained.lines,
                }),
            }
        })
        .transpose()?;
    if matches_recorded_head == Some(false) && chained.complete {
        return Err(ChainError::AddedAfterRecordedEnd);
    }
    Ok(Verified {
        matches_recorded_head,
        ..chained
    })
}

/// Verify the chain of a journal's `text` (read already), without a
/// recorded head to compare (`matches_recorded_head` is `None`); with
/// the hash of each line, in order.
pub fn verify_text(text: &str) -> Result<(Verified, Vec<String>), ChainError> {
    let mut prev = GENESIS.to_owned();
    let mut n = 0u64;
    let mut last_kind = String::new();
    let mut hashes = vec![];
    let last = text.split_terminator('\n').count();
    let cut = !text.is_empty() && !text.ends_with('\n');
    for (i, raw) in text.split_terminator('\n').enumerate() {
        let line_no = i + 1;
        let line: Line = serde_json::from_str(raw).map_err(|error| {
            if cut && line_no == last && error.is_eof() {
                ChainError::Incomplete { line: line_no }
            } else {
                ChainError::NotAnEntry {
                    line: line_no,
                    error,
                }
            }
        })?;
        let seq = line.seq;
        if seq != n + 1 {
            return Err(ChainError::Sequence {
                line: line_no,
                seq,
                expected: n + 1,
            });
        }
        if line.prev != prev {
            return Err(ChainError::Unchained { line: line_no, seq });
        }
        // Re-serialising must reproduce the exact bytes: catches edits
        // that keep the JSON valid (whitespace, key order, escapes).
        let canon = serde_json::to_string(&line).map_err(|error| ChainError::NotAnEntry {
            line: line_no,
            error,
        })?;
        if canon != raw {
            return Err(ChainError::Edited { line: line_no, seq });
        }
        if last_kind == "run.end" {
            return Err(ChainError::AfterEnd { line: line_no, seq });
        }
        prev = line_hash(raw);
        hashes.push(prev.clone());
        n += 1;
        last_kind = line.kind;
    }
    if n == 0 {
        return Err(ChainError::Empty);
    }
    Ok((
        Verified {
            lines: n,
            head: prev,
            complete: last_kind == "run.end",
            matches_recorded_head: None,
        },
        hashes,
    ))
}
