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

use crate::events::Event;

/// One step as the evidence lists it.
#[derive(Debug, Clone, Default)]
struct StepRow {
    name: String,
    cwd: String,
    allow_failure: bool,
    exit: Option<i32>,
    attempts: u32,
    duration_ms: u64,
    logs: Vec<String>,
    /// `None` while the step has not ended; Markdown (untrusted parts
    /// escaped when it was set).
    outcome: Option<String>,
    /// The last provider error (the step fails with it unless a retry
    /// succeeds).
    provider_error: Option<String>,
}

/// Everything EVIDENCE.md shows, folded from the journal's events.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    run_id: String,
    script: String,
    provider: String,
    provider_reason: String,
    sandbox_id: Option<String>,
    /// The isolation in force and why.
    isolation: Option<String>,
    labels: Vec<(String, String)>,
    commit: Option<String>,
    tree_digest: Option<String>,
    archive_sha256: Option<String>,
    /// What kind of digest `archive_sha256` is (`source.verify`).
    archive_digest: Option<String>,
    files: Option<usize>,
    workdir: Option<String>,
    /// Re-syncs, in order: from commit, to commit, entries shipped.
    resyncs: Vec<(String, String, usize)>,
    steps: Vec<StepRow>,
    recordings: Vec<(u32, String, String)>,
    cleanup: Option<String>,
    outcome: Option<String>,
    reason: Option<String>,
}

const HEAD_PREFIX: &str = "- journal head: ";
const LINES_PREFIX: &str = "- journal: `journal.jsonl` (";

impl Evidence {
    /// The row of the step `name` that has not ended yet.
    fn open_step(&mut self, name: &str) -> Option<&mut StepRow> {
        self.steps
            .iter_mut()
            .rev()
            .find(|s| s.name == name && s.outcome.is_none())
    }

    /// Fold one journaled event in.
    pub fn apply(&mut self, e: &Event) {
        match e {
            Event::RunStart {
                run_id,
                script,
                provider,
                provider_reason,
                ..
            } => {
                self.run_id = run_id.clone();
                self.script = script.clone();
                self.provider = provider.clone();
                self.provider_reason = provider_reason.clone();
            }
            Event::Placement {
                sandbox_id,
                labels,
                isolation,
                ..
            } => {
                self.sandbox_id = Some(sandbox_id.clone());
                self.isolation = isolation.as_ref().map(|i| i.describe());
                self.labels = labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            }
            Event::SourceVerify { archive_digest, .. } if !archive_digest.is_empty() => {
                self.archive_digest = Some(archive_digest.clone());
            }
            Event::SourcePin {
                commit,
                tree_digest,
                archive_sha256,
                files,
                workdir,
                ..
            } => {
                self.commit = Some(commit.clone());
                self.tree_digest = Some(tree_digest.clone());
                self.archive_sha256 = Some(archive_sha256.clone());
                self.files = Some(*files);
                self.workdir = Some(workdir.clone());
            }
            Event::SourceResync {
                from_commit,
                commit,
                shipped,
                ..
            } => self
                .resyncs
                .push((from_commit.clone(), commit.clone(), *shipped)),
            Event::StepStart {
                name,
                cwd,
                allow_failure,
                ..
            } => self.steps.push(StepRow {
                name: name.clone(),
                cwd: cwd.clone(),
                allow_failure: *allow_failure,
                ..StepRow::default()
            }),
            Event::StepAttempt {
                name,
                attempt,
                exit,
                cancelled,
                duration_ms,
                stdout_log,
                stderr_log,
                ..
            } => {
                if let Some(row) = self.open_step(name) {
                    row.attempts = *attempt;
                    row.exit = *exit;
                    row.duration_ms += duration_ms;
                    row.provider_error = None;
                    row.logs.extend(
                        [stdout_log, stderr_log]
                            .into_iter()
                            .flatten()
                            .map(|f| f.path.clone()),
                    );
                    if *cancelled {
                        row.outcome =
                            Some(format!("INTERRUPTED (attempt {attempt} was cancelled)"));
                    }
                }
            }
            Event::StepProviderError {
                name,
                attempt,
                error,
                duration_ms,
                stdout_log,
                stderr_log,
            } => {
                if let Some(row) = self.open_step(name) {
                    row.attempts = *attempt;
                    row.duration_ms += duration_ms;
                    row.provider_error = Some(error.clone());
                    row.logs.extend(
                        [stdout_log, stderr_log]
                            .into_iter()
                            .flatten()
                            .map(|f| f.path.clone()),
                    );
                }
            }
            Event::StepRefused { name, cwd, reason } => {
                let outcome = Some(format!("REFUSED ({})", esc(reason)));
                match self.open_step(name) {
                    Some(row) => row.outcome = outcome,
                    None => self.steps.push(StepRow {
                        name: name.clone(),
                        cwd: cwd.clone(),
                        outcome,
                        ..StepRow::default()
                    }),
                }
            }
            Event::StepEnd {
                name,
                ok,
                exit,
                attempts,
                duration_ms,
                summary,
                ..
            } => {
                if let Some(row) = self.open_step(name) {
                    row.exit = *exit;
                    row.attempts = *attempts;
                    row.duration_ms = *duration_ms;
                    row.outcome = Some(if *ok {
                        "ok".into()
                    } else if row.allow_failure {
                        format!("failed, allowed ({})", esc(summary))
                    } else {
                        format!("FAILED ({})", esc(summary))
                    });
                }
            }
            Event::AttachStart {
                session,
                command,
                recording,
                ..
            } => self
                .recordings
                .push((*session, command.clone(), recording.clone())),
            Event::CleanupNone { .. } => self.cleanup = Some("No sandbox was provisioned.".into()),
            Event::CleanupKept { sandbox_id, .. } => {
                self.cleanup = Some(format!(
                "Sandbox {} was kept (--keep); destroy it with `rfs gc` once its owner is gone.",
                code(sandbox_id)
            ))
            }
            Event::CleanupVerified {
                sandbox_id,
                why,
                inventory_count,
                polls,
                elapsed_ms,
                saw_present_before,
                ..
            } => {
                // rfs claims only the destroy it did.
                let what = if *saw_present_before {
                    "destroyed"
                } else {
                    "already gone (ended outside rfs, not destroyed by it), verified"
                };
                self.cleanup = Some(format!(
                    "Sandbox {} {what} at {}: get-by-id returned not found and it was absent from the provider inventory ({inventory_count} sandboxes listed) after {polls} poll(s), {elapsed_ms} ms.",
                    code(sandbox_id),
                    esc(why)
                ))
            }
            Event::CleanupFailed {
                sandbox_id, error, ..
            } => {
                self.cleanup = Some(format!(
                    "Teardown of sandbox {} could NOT be verified: {}. Run `rfs gc` to retry.",
                    code(sandbox_id),
                    esc(error)
                ))
            }
            Event::RunEnd {
                outcome, reason, ..
            } => {
                self.reason = reason.clone();
                for row in self.steps.iter_mut().filter(|s| s.outcome.is_none()) {
                    row.outcome = Some(match &row.provider_error {
                        Some(e) => format!("FAILED (the provider could not run it: {})", esc(e)),
                        None => format!(
                            "INTERRUPTED (did not finish; the run ended {})",
                            esc(outcome)
                        ),
                    });
                }
                self.outcome = Some(outcome.clone());
            }
            _ => {}
        }
    }

    /// The Markdown text, for a journal of `journal_lines` lines whose last
    /// line hashes to `journal_head`.
    pub fn render(&self, journal_lines: u64, journal_head: &str) -> String {
        let mut s = String::new();
        let opt = |o: &Option<String>| o.as_deref().map(code).unwrap_or_else(|| "(none)".into());
        let _ = writeln!(s, "# rfs run {}\n", code(&self.run_id));
        let _ = writeln!(s, "- script: {}", code(&self.script));
        let _ = writeln!(
            s,
            "- provider: {} (chosen by {})",
            code(&self.provider),
            esc(&self.provider_reason)
        );
        let _ = writeln!(s, "- sandbox id: {}", opt(&self.sandbox_id));
        if let Some(i) = &self.isolation {
            let _ = writeln!(s, "- isolation: {}", esc(i));
        }
        let _ = writeln!(s, "- source commit: {}", opt(&self.commit));
        let _ = writeln!(s, "- tree digest: {}", opt(&self.tree_digest));
        let kind = self.archive_digest.as_deref().unwrap_or("sha256");
        let _ = writeln!(s, "- archive {}: {}", esc(kind), opt(&self.archive_sha256));
        if let Some(f) = self.files {
            let _ = writeln!(s, "- files synced and verified: {f}");
        }
        let _ = writeln!(s, "- source workdir: {}", opt(&self.workdir));
        for (from, to, shipped) in &self.resyncs {
            let _ = writeln!(
                s,
                "- re-synced: {} → {} ({shipped} entries shipped, verified in the sandbox)",
                code(from),
                code(to)
            );
        }
        let _ = writeln!(
            s,
            "- outcome: {}",
            self.outcome
                .as_deref()
                .map(esc)
                .unwrap_or_else(|| "running".into())
        );
        if let Some(r) = &self.reason {
            let _ = writeln!(s, "- reason: {}", esc(r));
        }
        if !self.labels.is_empty() {
            let _ = writeln!(s, "\n## Sandbox labels\n");
            for (k, v) in &self.labels {
                let _ = writeln!(s, "- {} = {}", code(k), code(v));
            }
        }
        let _ = writeln!(s, "\n## Steps\n");
        if self.steps.is_empty() {
            let _ = writeln!(s, "(no steps ran)");
        } else {
            let _ = writeln!(
                s,
                "| # | step | outcome | exit | attempts | duration | cwd | log |\n|---|---|---|---|---|---|---|---|"
            );
            for (i, st) in self.steps.iter().enumerate() {
                let logs: Vec<String> = st.logs.iter().map(|l| code(l)).collect();
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {} | {} ms | {} | {} |",
                    i + 1,
                    esc(&st.name),
                    st.outcome.as_deref().unwrap_or("running"),
                    st.exit.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
                    st.attempts,
                    st.duration_ms,
                    code(if st.cwd.is_empty() { "." } else { &st.cwd }),
                    logs.join(", ")
                );
            }
        }
        if !self.recordings.is_empty() {
            let _ = writeln!(s, "\n## Terminal recordings\n");
            for (n, command, rec) in &self.recordings {
                let _ = writeln!(
                    s,
                    "- session {n}: {} (asciicast v2, play with `asciinema play`), command: {}",
                    code(rec),
                    esc(command)
                );
            }
        }
        let _ = writeln!(s, "\n## Cleanup\n");
        let _ = writeln!(
            s,
            "{}",
            self.cleanup.as_deref().unwrap_or("(not yet cleaned up)")
        );
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

/// The (line count, head) recorded in an EVIDENCE.md text.
pub fn recorded_head(evidence: &str) -> Option<(u64, String)> {
    let head = evidence
        .lines()
        .find_map(|l| l.strip_prefix(HEAD_PREFIX))?
        .trim_matches('`')
        .to_owned();
    let lines = evidence
        .lines()
        .find_map(|l| l.strip_prefix(LINES_PREFIX))?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    Some((lines, head))
}

/// Untrusted text as inert Markdown: ASCII punctuation backslash-escaped,
/// control characters (newlines included) shown as Unicode control
/// pictures, so the text stays on its line and in its cell.
pub fn esc(s: &str) -> String {
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
pub fn code(s: &str) -> String {
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
        assert_eq!(recorded_head(&text), Some((33, "ab".into())));
    }
}
