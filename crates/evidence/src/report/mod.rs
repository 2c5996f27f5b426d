//! Views of a finished run for the places a reviewer looks, each a pure
//! function of the bundle (its journal, and the recordings it names):
//! - [`markdown`]: a short Markdown summary (CI step summaries, `rfs
//!   report --format markdown`);
//! - [`junit`]: JUnit XML of the steps and screen assertions (`--junit`);
//! - [`html`]: `report.html` in every bundle, with the terminal screens
//!   ([`terminal`]) rendered from the recordings.

pub mod html;
mod html_sections;
pub mod html_text;
pub mod junit;
pub mod junit_in;
pub mod markdown;
pub mod terminal;

use std::path::Path;

use crate::journal::fold::RunSummary;

/// A bundle read back for its views: the fold of its journal.
pub struct FinishedRun {
    pub summary: RunSummary,
    /// The hash of the journal's last line.
    pub head: String,
}

/// Why a bundle's views could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("journal.jsonl {0}")]
    Journal(#[from] crate::journal::evidence::RenderError),
    #[error("cannot write {path}: {source}")]
    Write {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl FinishedRun {
    /// Read the bundle in `out` (its journal, bounded, a regular file).
    pub fn read(out: &Path) -> Result<FinishedRun, ReportError> {
        let bytes =
            crate::out_dir::read_regular(out, "journal.jsonl", crate::out_dir::MAX_RECORD_BYTES)
                .map_err(|source| ReportError::Read {
                    path: out.join("journal.jsonl").display().to_string(),
                    source,
                })?;
        FinishedRun::of_journal(&String::from_utf8_lossy(&bytes))
    }

    /// The bundle whose journal text is `journal` (already read).
    pub fn of_journal(journal: &str) -> Result<FinishedRun, ReportError> {
        let read = crate::journal::evidence::read_journal(journal)?;
        Ok(FinishedRun {
            summary: RunSummary::of(&read.events),
            head: read.head,
        })
    }
}

/// Append `text` to the file at `path` (a CI step summary collects what
/// each step appends).
pub fn append(path: &Path, text: &str) -> Result<(), ReportError> {
    use std::io::Write as _;
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(text.as_bytes()))
        .map_err(|source| ReportError::Write {
            path: path.display().to_string(),
            source,
        })
}

/// The file name of the HTML report at the top of a bundle.
pub const HTML_FILE: &str = "report.html";

/// `report.html` for the bundle in `out`.
pub fn render_html(out: &Path) -> Result<String, ReportError> {
    Ok(page_of(out, &FinishedRun::read(out)?))
}

/// `report.html` for the bundle `b` in `out` (its recordings are read
/// from there).
pub fn page_of(out: &Path, b: &FinishedRun) -> String {
    let sessions = terminal::sessions(out, &b.summary);
    html::page(b, &sessions)
}

/// Write `report.html` into the bundle in `out` (replacing an earlier
/// one: it is a view, made again from the same bundle).
pub fn write_html(out: &Path) -> Result<(), ReportError> {
    let page = render_html(out)?;
    crate::out_dir::replace(
        &out.join(HTML_FILE),
        &out.join(format!(".{HTML_FILE}.tmp")),
        page.as_bytes(),
    )
    .map_err(|source| ReportError::Write {
        path: out.join(HTML_FILE).display().to_string(),
        source,
    })
}
