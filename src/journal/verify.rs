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
    /// Whether the head was checked against the run's EVIDENCE.md.
    pub head_matches_evidence: Option<bool>,
}

/// Verify `path`. Errors say which line broke the chain and how.
pub fn verify(path: &Path) -> Result<Verified, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read: {e}"))?;
    let mut prev = GENESIS.to_owned();
    let mut n = 0u64;
    let mut last_kind = String::new();
    let mut hashes = vec![];
    for (i, raw) in text.split_terminator('\n').enumerate() {
        let lineno = i + 1;
        let line: Line = serde_json::from_str(raw)
            .map_err(|e| format!("line {lineno} is not a journal entry: {e}"))?;
        if line.seq != n + 1 {
            return Err(format!(
                "line {lineno} has sequence number {}, expected {} (a line was dropped, duplicated or reordered)",
                line.seq,
                n + 1
            ));
        }
        if line.prev != prev {
            return Err(format!(
                "line {lineno} (seq {}) does not chain to the line before it (that line was edited, dropped or reordered)",
                line.seq
            ));
        }
        // Re-serialising must reproduce the exact bytes: catches edits
        // that keep the JSON valid (whitespace, key order, escapes).
        let canon = serde_json::to_string(&line).map_err(|e| e.to_string())?;
        if canon != raw {
            return Err(format!("line {lineno} (seq {}) was edited", line.seq));
        }
        if last_kind == "run.end" {
            return Err(format!(
                "line {lineno} (seq {}) follows the run.end entry (lines were added after the run ended)",
                line.seq
            ));
        }
        prev = line_hash(raw);
        hashes.push(prev.clone());
        n += 1;
        last_kind = line.kind;
    }
    if n == 0 {
        return Err("the journal is empty".into());
    }
    let head_matches_evidence = path
        .parent()
        .map(|d| d.join("EVIDENCE.md"))
        .and_then(|p| std::fs::read_to_string(p).ok())
        .and_then(|ev| super::evidence::recorded_head(&ev))
        .map(|(lines, head)| {
            // EVIDENCE.md is rewritten after journal lines: a run killed
            // in between leaves a journal that runs past the recorded head
            // (consistent), never one that stops short of it.
            let at = usize::try_from(lines).ok().and_then(|l| l.checked_sub(1));
            match at.and_then(|i| hashes.get(i)) {
                Some(h) if *h == head => Ok(lines == n),
                Some(_) => Err(format!(
                    "line {lines} does not match the head recorded in EVIDENCE.md (the journal was edited)"
                )),
                None => Err(format!(
                    "EVIDENCE.md records {lines} lines but the journal has {n} (lines were dropped from its end)"
                )),
            }
        })
        .transpose()?;
    if head_matches_evidence == Some(false) && last_kind == "run.end" {
        return Err(
            "the journal ends with run.end but EVIDENCE.md records an earlier head (lines were added)"
                .into(),
        );
    }
    Ok(Verified {
        lines: n,
        head: prev,
        complete: last_kind == "run.end",
        head_matches_evidence,
    })
}
