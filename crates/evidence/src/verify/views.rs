//! The views of a run (EVIDENCE.md, report.html) are exactly the
//! rendering of its journal.

use super::{Established, Failure, Subject, Views};
use crate::journal;
use crate::text::quote;

/// A view this rfs cannot compare (`made_by` another rfs): refused, or
/// with [`Views::AllowUnchecked`] named as not checked.
fn unchecked_view(
    s: &Subject,
    file: &'static str,
    made_by: String,
    this: &'static str,
    remedy: &str,
) -> Result<Established, Failure> {
    match s.views {
        Views::MustMatch => Err(Failure::UncheckedView {
            file,
            made_by,
            this,
        }),
        Views::AllowUnchecked => Ok(Established::Unchecked(format!(
            "NOT CHECKED: made by another rfs ({made_by}; this rfs makes {this}), so nothing vouches for what it says (allowed by --allow-unchecked-views); {remedy}"
        ))),
    }
}

pub(super) fn check_evidence(s: &Subject) -> Result<Established, Failure> {
    let expected = journal::evidence::render_journal(&s.journal)?;
    let actual =
        crate::out_dir::read_regular(&s.out, "EVIDENCE.md", crate::out_dir::MAX_RECORD_BYTES)
            .map_err(|error| Failure::Unreadable {
                path: "EVIDENCE.md".into(),
                error,
            })?;
    if actual == expected.as_bytes() {
        return Ok(Established::Checked(format!(
            "equals the rendering of the journal ({} bytes)",
            actual.len()
        )));
    }
    let actual = String::from_utf8_lossy(&actual);
    // A file another rfs laid out is not this rfs's rendering to compare
    // with, and what it says is then vouched for by nobody (a failed
    // run's rewritten to "completed" would read as verified): refused
    // unless the person running verify allows it.
    let layout = journal::evidence::format_of(&actual);
    if layout != Some(journal::evidence::FORMAT) {
        return unchecked_view(
            s,
            "EVIDENCE.md",
            layout.map_or("an earlier layout, which names none".to_owned(), |l| {
                format!("layout {}", quote(l))
            }),
            journal::evidence::FORMAT,
            "`rfs report OUT --format markdown` shows this rfs's view of the journal",
        );
    }
    let mut a = actual.lines();
    let mut e = expected.lines();
    let mut n = 0;
    loop {
        n += 1;
        match (a.next(), e.next()) {
            (Some(x), Some(y)) if x == y => continue,
            (x, y) => {
                return Err(Failure::EvidenceDiffers {
                    line: n,
                    file: x.unwrap_or("(end of file)").to_owned(),
                    journal: y.unwrap_or("(end of file)").to_owned(),
                })
            }
        }
    }
}

/// `report.html`, when the bundle has one (bundles of earlier versions
/// do not), is exactly the rendering of the bundle: a view, like
/// EVIDENCE.md, that nobody edited.
pub(super) fn check_report(s: &Subject) -> Result<Established, Failure> {
    let file = crate::report::HTML_FILE;
    if std::fs::symlink_metadata(s.out.join(file)).is_err() {
        return Ok(Established::Checked(
            "none in this bundle (it is a view: `rfs report` makes one)".into(),
        ));
    }
    let actual = crate::out_dir::read_regular(&s.out, file, crate::out_dir::MAX_RECORD_BYTES)
        .map_err(|error| Failure::Unreadable {
            path: file.into(),
            error,
        })?;
    // A report drawn by another rfs (another page format) is not this
    // rfs's rendering to compare with: a browser would run its script
    // and show what it says, vouched for by nobody.
    let made_by = crate::report::html::generator_of(&actual);
    if made_by.as_deref() != Some(crate::report::html::GENERATOR) {
        return unchecked_view(
            s,
            "report.html",
            made_by.map_or("a page naming no generator".to_owned(), |g| {
                format!("generator {}", quote(&g))
            }),
            crate::report::html::GENERATOR,
            "do not open it: `rfs report OUT` makes it again from the journal",
        );
    }
    // The journal verify already read, not a second read of the file.
    let bundle = crate::report::FinishedRun::of_journal(&s.journal)
        .map_err(|e| Failure::Report(e.to_string()))?;
    let expected = crate::report::page_of(&s.out, &bundle);
    if actual == expected.as_bytes() {
        return Ok(Established::Checked(format!(
            "equals the rendering of the bundle ({} bytes)",
            actual.len()
        )));
    }
    let actual = String::from_utf8_lossy(&actual);
    let line = actual
        .lines()
        .zip(expected.lines())
        .position(|(a, e)| a != e)
        .unwrap_or_else(|| actual.lines().count().min(expected.lines().count()))
        + 1;
    Err(Failure::ReportDiffers { line })
}
