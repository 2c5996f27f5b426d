//! `EVIDENCE.md`: the human-readable view of a run, a pure function of its
//! journal. The run folds each event into an [`Evidence`] as it journals
//! it and rewrites the file as it goes (so an interrupted run still leaves
//! one); [`render_journal`] does the same fold from `journal.jsonl`, and
//! `rfs verify` compares the two byte for byte.
//!
//! Every value taken from the journal is untrusted text (labels, names,
//! commands, paths, provider messages): it is written either as a code
//! span, when it consists only of characters that cannot end one, or
//! with every ASCII punctuation character backslash-escaped and control
//! characters shown as symbols — so no value can start a line, a list
//! item, a table cell or a link.

use std::fmt::Write as _;
use std::path::Path;

use super::fold::RunSummary;
use super::inert_markdown::{code, esc};
use crate::events::Event;

mod facts;
mod sections;

use facts::{cleanup, labels};
pub use facts::{facts, in_sandbox, ran_in, script_shown};
use sections::{artifacts, prints, refusals, sessions, steps};
pub use sections::{bisect, failure, step_outcome, step_outcome_text, steps_table, tails};

/// EVIDENCE.md's view of the run: the journal's one fold
/// ([`RunSummary`]), rendered as Markdown.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    summary: RunSummary,
}

impl Evidence {
    /// Fold one journaled event in.
    pub fn apply(&mut self, e: &Event) {
        self.summary.apply(e);
    }

    /// The Markdown text, for a journal of `journal_lines` lines whose last
    /// line hashes to `journal_head`: the outcome and what failed first,
    /// then the pins, every step with its command and last output, the
    /// terminal sessions with their assertions, the script's output, what
    /// was refused, the cleanup and the journal.
    pub fn render(&self, journal_lines: u64, journal_head: &str) -> String {
        let r = &self.summary;
        let mut s = String::new();
        let _ = writeln!(s, "# rfs run {}\n", code(&r.run_id));
        if let Some(w) = &r.not_reproducible {
            let _ = writeln!(s, "> **{}**\n", esc(&w.describe()));
        }
        if !r.caches.is_empty() {
            let _ = writeln!(s, "> **{}**\n", super::caches::NOT_REPRODUCIBLE);
        }
        let forked = r.checkpoints.started_from.as_ref();
        for why in super::caches::not_reproducible(&[], forked) {
            let _ = writeln!(s, "> **{}**\n", esc(&why));
        }
        bisect(&mut s, r);
        if r.bisect.is_some() {
            let _ = writeln!(s, "## Run\n");
        }
        facts(&mut s, r);
        failure(&mut s, r);
        labels(&mut s, r);
        steps(&mut s, r);
        sessions(&mut s, r);
        super::spawns::evidence(&mut s, &r.spawns);
        super::services::evidence(&mut s, &r.services);
        super::caches::evidence(&mut s, &r.caches);
        super::host_mounts::evidence(&mut s, &r.host_mounts);
        super::checkpoints::evidence(&mut s, &r.checkpoints);
        prints(&mut s, r);
        artifacts(&mut s, r);
        super::network_view::markdown(&mut s, &r.network);
        refusals(&mut s, r);
        let _ = writeln!(s, "\n## Cleanup\n");
        let _ = writeln!(s, "{}", cleanup(r.cleanup.as_ref()));
        let _ = writeln!(s, "\n## Journal\n");
        let _ = writeln!(s, "- journal: `journal.jsonl` ({journal_lines} lines)");
        let _ = writeln!(s, "- journal head: {}", code(journal_head));
        let _ = writeln!(
            s,
            "- re-verify with: `rfs verify` on this directory (journal, this file and every log)"
        );
        let _ = writeln!(s, "\n<!-- {FORMAT} -->");
        s
    }
}

/// The layout this rfs renders, named at the end of every EVIDENCE.md
/// (an HTML comment: invisible when the Markdown is shown). Raised
/// whenever the rendering changes, so `rfs verify` compares a file only
/// with its own layout instead of calling an older rfs's file edited.
pub const FORMAT: &str = "rfs-evidence/5";

/// The layout an EVIDENCE.md text names (`None`: an rfs from before
/// layouts were named).
pub fn format_of(text: &str) -> Option<&str> {
    let at = text.rfind("<!-- rfs-evidence/")? + "<!-- ".len();
    let end = text[at..].find(" -->")?;
    Some(&text[at..at + end])
}

/// Write `text` atomically (temp file + rename) as `dir/EVIDENCE.md`.
pub fn write(dir: &Path, text: &str) -> std::io::Result<()> {
    // A full disk leaves no half-written temp file behind; a symlink
    // planted at either name is never written through.
    crate::out_dir::replace(
        &dir.join("EVIDENCE.md"),
        &dir.join(".EVIDENCE.md.tmp"),
        text.as_bytes(),
    )
}

/// Why a journal could not be rendered.
#[derive(Debug, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct RenderError {
    pub line: usize,
    pub reason: String,
}

/// EVIDENCE.md for the journal text `journal` (`journal.jsonl`'s bytes):
/// what the run wrote when it ended. The chain itself is checked by
/// [`super::chain::verify`].
pub fn render_journal(journal: &str) -> Result<String, RenderError> {
    let read = read_journal(journal)?;
    let mut ev = Evidence::default();
    for e in &read.events {
        ev.apply(e);
    }
    Ok(ev.render(read.events.len() as u64, &read.head))
}

/// A journal's events, in order, and the hash of its last line.
pub struct ReadJournal {
    pub events: Vec<Event>,
    pub head: String,
}

/// Parse the journal text `journal` into its events (the chain is not
/// checked here: see [`super::chain::verify`]).
pub fn read_journal(journal: &str) -> Result<ReadJournal, RenderError> {
    let mut events = vec![];
    let mut head = super::GENESIS.to_owned();
    for (i, raw) in journal.split_terminator('\n').enumerate() {
        let err = |reason: String| RenderError {
            line: i + 1,
            reason,
        };
        let line: super::Line = serde_json::from_str(raw).map_err(|e| err(e.to_string()))?;
        let event = Event::from_kind_payload(&line.kind, &line.payload).map_err(|e| {
            err(format!(
                "`{}` is not an entry this rfs knows: {e}",
                line.kind
            ))
        })?;
        events.push(event);
        head = super::line_hash(raw);
    }
    Ok(ReadJournal { events, head })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::catalog::samples;

    #[test]
    fn every_kind_renders_without_panicking() {
        let mut ev = Evidence::default();
        for e in samples() {
            ev.apply(&e);
        }
        let text = ev.render(33, "ab");
        assert!(
            text.contains("- outcome: failed\n- reason: step \\`x\\` failed\n"),
            "{text}"
        );
        assert!(
            text.contains("- journal: `journal.jsonl` (33 lines)\n"),
            "{text}"
        );
        assert!(text.contains("- journal head: `ab`\n"), "{text}");
    }
}
