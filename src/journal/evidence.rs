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

use super::summary::{Cleanup, RunSummary, StepOutcome};
use crate::events::Event;

/// EVIDENCE.md's view of the run: the journal's one fold
/// ([`RunSummary`]), rendered as Markdown.
#[derive(Debug, Clone, Default)]
pub(crate) struct Evidence {
    summary: RunSummary,
}

const HEAD_PREFIX: &str = "- journal head: ";
const LINES_PREFIX: &str = "- journal: `journal.jsonl` (";

impl Evidence {
    /// Fold one journaled event in.
    pub(crate) fn apply(&mut self, e: &Event) {
        self.summary.apply(e);
    }

    /// The Markdown text, for a journal of `journal_lines` lines whose last
    /// line hashes to `journal_head`.
    pub(crate) fn render(&self, journal_lines: u64, journal_head: &str) -> String {
        let r = &self.summary;
        let mut s = String::new();
        let opt = |o: Option<&str>| o.map(code).unwrap_or_else(|| "(none)".into());
        let pin = r.pin();
        let _ = writeln!(s, "# rfs run {}\n", code(&r.run_id));
        let _ = writeln!(s, "- script: {}", code(&r.script));
        let _ = writeln!(
            s,
            "- provider: {} (chosen by {})",
            code(&r.provider),
            esc(&r.provider_reason)
        );
        let _ = writeln!(s, "- sandbox id: {}", opt(r.sandbox_id.as_deref()));
        if let Some(i) = &r.isolation {
            let _ = writeln!(s, "- isolation: {}", esc(i));
        }
        let _ = writeln!(
            s,
            "- source commit: {}",
            opt(pin.map(|p| p.commit.as_str()))
        );
        let _ = writeln!(
            s,
            "- tree digest: {}",
            opt(pin.map(|p| p.tree_digest.as_str()))
        );
        let kind = r.archive_digest_kind.map_or("sha256", |k| k.name());
        let _ = writeln!(
            s,
            "- archive {}: {}",
            esc(kind),
            opt(pin.map(|p| p.archive_sha256.as_str()))
        );
        if let Some(p) = pin {
            let _ = writeln!(s, "- files synced and verified: {}", p.files);
        }
        let _ = writeln!(
            s,
            "- source workdir: {}",
            opt(pin.map(|p| p.workdir.as_str()))
        );
        for rs in &r.resyncs {
            let _ = writeln!(
                s,
                "- re-synced: {} → {} ({} entries shipped, verified in the sandbox)",
                code(&rs.from_commit),
                code(&rs.commit),
                rs.shipped
            );
        }
        let _ = writeln!(
            s,
            "- outcome: {}",
            r.outcome.map_or("running", |o| o.as_str())
        );
        if let Some(reason) = &r.reason {
            let _ = writeln!(s, "- reason: {}", esc(reason));
        }
        if !r.labels.is_empty() {
            let _ = writeln!(s, "\n## Sandbox labels\n");
            for (k, v) in &r.labels {
                let _ = writeln!(s, "- {} = {}", code(k), code(v));
            }
        }
        let _ = writeln!(s, "\n## Steps\n");
        if r.steps.is_empty() {
            let _ = writeln!(s, "(no steps ran)");
        } else {
            let _ = writeln!(
                s,
                "| # | step | outcome | exit | attempts | duration | cwd | log |\n|---|---|---|---|---|---|---|---|"
            );
            for (i, st) in r.steps.iter().enumerate() {
                let logs: Vec<String> = st.logs.iter().map(|l| code(l)).collect();
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} ms | {} | {} |",
                    i + 1,
                    esc(&st.name),
                    step_outcome(&st.outcome),
                    st.exit.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                    st.attempts,
                    st.duration_ms,
                    code(if st.cwd.is_empty() { "." } else { &st.cwd }),
                    logs.join(", ")
                );
            }
        }
        if !r.recordings.is_empty() {
            let _ = writeln!(s, "\n## Terminal recordings\n");
            for rec in &r.recordings {
                let _ = writeln!(
                    s,
                    "- session {}: {} (asciicast v2, play with `asciinema play`), command: {}",
                    rec.session,
                    code(&rec.path),
                    esc(&rec.command)
                );
            }
        }
        let _ = writeln!(s, "\n## Cleanup\n");
        let _ = writeln!(s, "{}", cleanup(r.cleanup.as_ref()));
        let _ = writeln!(s, "\n## Journal\n");
        let _ = writeln!(s, "{LINES_PREFIX}{journal_lines} lines)");
        let _ = writeln!(s, "{HEAD_PREFIX}{}", code(journal_head));
        let _ = writeln!(
            s,
            "- re-verify with: `rfs verify` on this directory (journal, this file and every log)"
        );
        s
    }
}

/// A step's outcome cell (untrusted parts escaped).
fn step_outcome(o: &StepOutcome) -> String {
    match o {
        StepOutcome::Running => "running".into(),
        StepOutcome::Passed => "ok".into(),
        StepOutcome::Failed {
            allowed: true,
            summary,
        } => format!("failed, allowed ({})", esc(summary)),
        StepOutcome::Failed { summary, .. } => format!("FAILED ({})", esc(summary)),
        StepOutcome::Refused { reason } => format!("REFUSED ({})", esc(reason)),
        StepOutcome::Cancelled { attempt } => {
            format!("INTERRUPTED (attempt {attempt} was cancelled)")
        }
        StepOutcome::ProviderFailed { error } => {
            format!("FAILED (the provider could not run it: {})", esc(error))
        }
        StepOutcome::Unfinished { run } => {
            format!("INTERRUPTED (did not finish; the run ended {run})")
        }
    }
}

/// The cleanup paragraph: rfs claims only the destroy it did.
fn cleanup(c: Option<&Cleanup>) -> String {
    match c {
        None => "(not yet cleaned up)".into(),
        Some(Cleanup::NoSandbox) => "No sandbox was provisioned.".into(),
        Some(Cleanup::Kept { sandbox_id }) => format!(
            "Sandbox {} was kept (--keep); destroy it with `rfs gc` once its owner is gone.",
            code(sandbox_id)
        ),
        Some(Cleanup::Verified {
            sandbox_id,
            why,
            inventory_count,
            polls,
            elapsed_ms,
            destroyed_by_rfs,
        }) => {
            let what = if *destroyed_by_rfs {
                "destroyed"
            } else {
                "already gone (ended outside rfs, not destroyed by it), verified"
            };
            format!(
                "Sandbox {} {what} at {}: get-by-id returned not found and it was absent from the provider inventory ({inventory_count} sandboxes listed) after {polls} poll(s), {elapsed_ms} ms.",
                code(sandbox_id),
                esc(why)
            )
        }
        Some(Cleanup::NotVerified { sandbox_id, error }) => format!(
            "Teardown of sandbox {} could NOT be verified: {}. Run `rfs gc` to retry.",
            code(sandbox_id),
            esc(error)
        ),
    }
}

/// Write `text` atomically (temp file + rename) as `dir/EVIDENCE.md`.
pub(crate) fn write(dir: &Path, text: &str) -> std::io::Result<()> {
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
/// [`super::verify::verify`].
pub fn render_journal(journal: &str) -> Result<String, RenderError> {
    let mut ev = Evidence::default();
    let mut n = 0u64;
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
        ev.apply(&event);
        n += 1;
        head = super::line_hash(raw);
    }
    Ok(ev.render(n, &head))
}

/// Untrusted text as inert Markdown: ASCII punctuation backslash-escaped,
/// control characters (newlines included) shown as Unicode control
/// pictures, so the text stays on its line and in its cell.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            ',' | ';' => out.push(c),
            c if c.is_ascii_punctuation() => {
                out.push('\\');
                out.push(c);
            }
            '\u{0}'..='\u{1f}' => out.push(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
            '\u{7f}' => out.push('\u{2421}'),
            c if c.is_control() || matches!(c, '\u{2028}' | '\u{2029}') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A code span when `s` is made only of characters that cannot end or
/// break one (ids, hashes, plain paths); otherwise [`esc`].
pub(crate) fn code(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@+=-".contains(c));
    if plain {
        format!("`{s}`")
    } else {
        esc(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::catalog::samples;

    #[test]
    fn escaped_text_cannot_start_structure() {
        let hostile = "x |\n- outcome: completed\n# H [l](http://e) `c` <b> *e* 1. \\";
        let e = esc(hostile);
        assert!(!e.contains('\n'));
        for ch in ['|', '`', '[', '<', '*', '#', '-'] {
            let unescaped = e
                .char_indices()
                .any(|(i, c)| c == ch && (i == 0 || e.as_bytes()[i - 1] != b'\\'));
            assert!(!unescaped, "{ch} unescaped in {e}");
        }
        assert_eq!(code("local-abc_1.2"), "`local-abc_1.2`");
        assert_eq!(code("a`b"), "a\\`b");
    }

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
