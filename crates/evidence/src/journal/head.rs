//! `journal.head`: the journal's line count and head hash, recorded
//! beside it each time EVIDENCE.md is rewritten, as data. `rfs journal
//! verify` checks the journal against this record; EVIDENCE.md shows the
//! same two values to a reader but is a view, never parsed back.

use std::path::Path;

use serde::{Deserialize, Serialize};

/// The record's file name, at the top of the output directory.
pub const FILE: &str = "journal.head";

/// The record's size bound: two short fields.
const MAX_BYTES: u64 = 4096;

/// How far the journal had come when the record was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedHead {
    /// Lines in the journal then.
    pub lines: u64,
    /// The sha256 of its last line then.
    pub head: String,
}

/// Write the record atomically (temp file + rename) into `dir`.
pub fn write(dir: &Path, lines: u64, head: &str) -> std::io::Result<()> {
    let rec = RecordedHead {
        lines,
        head: head.to_owned(),
    };
    let mut text = serde_json::to_string(&rec).map_err(std::io::Error::other)?;
    text.push('\n');
    crate::out_dir::replace(
        &dir.join(FILE),
        &dir.join(format!(".{FILE}.tmp")),
        text.as_bytes(),
    )
}

/// The record in `dir`, if there is one (a regular file, bounded, that
/// parses); `None` otherwise.
pub fn read(dir: &Path) -> Option<RecordedHead> {
    let bytes = crate::out_dir::read_regular(dir, FILE, MAX_BYTES).ok()?;
    serde_json::from_slice(&bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_record_reads_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(read(dir.path()), None);
        write(dir.path(), 33, "ab").unwrap();
        write(dir.path(), 34, "cd").unwrap();
        assert_eq!(
            read(dir.path()),
            Some(RecordedHead {
                lines: 34,
                head: "cd".into()
            })
        );
    }

    #[test]
    fn a_record_with_anything_else_in_it_is_no_record() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(FILE), r#"{"lines":1,"head":"x","extra":1}"#).unwrap();
        assert_eq!(read(dir.path()), None);
    }
}
