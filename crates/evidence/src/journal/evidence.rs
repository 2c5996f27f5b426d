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

use super::fold::{Cleanup, RunSummary, StepOutcome};
use super::inert_markdown::{code, command, esc, fenced};
use crate::events::Event;

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
pub const FORMAT: &str = "rfs-evidence/4";

/// The layout an EVIDENCE.md text names (`None`: an rfs from before
/// layouts were named).
pub fn format_of(text: &str) -> Option<&str> {
    let at = text.rfind("<!-- rfs-evidence/")? + "<!-- ".len();
    let end = text[at..].find(" -->")?;
    Some(&text[at..at + end])
}

/// `path` as a reader of the evidence should see it: below the sandbox
/// home as `~/…` (a local sandbox's home is a host path under rfs's state
/// directory, which tells a reader nothing).
pub fn in_sandbox(home: Option<&str>, path: &str) -> String {
    match home.and_then(|h| path.strip_prefix(h.trim_end_matches('/'))) {
        Some("") => "~".into(),
        Some(rest) if rest.starts_with('/') => format!("~{rest}"),
        _ => path.to_owned(),
    }
}

/// Where a step ran, as a reader should see it (`~/…/cwd`), if it ran
/// under a pin.
pub fn ran_in(r: &RunSummary, st: &super::fold::StepRecord) -> Option<String> {
    let dir = in_sandbox(r.home.as_deref(), st.workdir.as_deref()?);
    Some(if st.cwd.is_empty() {
        dir
    } else {
        format!("{dir}/{}", st.cwd)
    })
}

/// The script as a reader should see it: its path inside the synced
/// repository, or its file name (never a host path elsewhere).
pub fn script_shown(r: &RunSummary) -> String {
    let script = std::path::Path::new(&r.script);
    let rel = r
        .repo
        .as_deref()
        .and_then(|repo| script.strip_prefix(repo).ok())
        .filter(|_| script.is_absolute());
    match (rel, script.is_absolute()) {
        (Some(rel), _) => rel.display().to_string(),
        (None, true) => script
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| r.script.clone()),
        (None, false) => r.script.clone(),
    }
}

/// The run's facts: script, provider, sandbox, pins, outcome.
pub fn facts(s: &mut String, r: &RunSummary) {
    let opt = |o: Option<&str>| o.map(code).unwrap_or_else(|| "(none)".into());
    let pin = r.pin();
    let _ = writeln!(s, "- script: {}", code(&script_shown(r)));
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
    if let Some(e) = r.environment.as_ref().and_then(|e| e.describe()) {
        let _ = writeln!(s, "- environment: {}", esc(&e));
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
    if let Some(w) = &r.not_reproducible {
        const SHOWN: usize = 20;
        let mut paths: Vec<String> = w
            .uncommitted_paths
            .iter()
            .take(SHOWN)
            .map(|p| code(p))
            .collect();
        if w.uncommitted_paths.len() > SHOWN {
            paths.push(format!("and {} more", w.uncommitted_paths.len() - SHOWN));
        }
        let _ = writeln!(
            s,
            "- uncommitted paths shipped (`--allow-dirty`, on top of {}): {}",
            code(&w.base_commit),
            paths.join(", ")
        );
    }
    let workdir = pin.map(|p| in_sandbox(r.home.as_deref(), &p.workdir));
    let _ = writeln!(s, "- source workdir: {}", opt(workdir.as_deref()));
    for rs in &r.resyncs {
        let _ = writeln!(
            s,
            "- re-synced: {} → {} ({} shipped, verified in the sandbox)",
            code(&rs.from_commit),
            code(&rs.commit),
            crate::plural::count(rs.shipped, "file", "files")
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
}

/// What failed, first: the first step that failed the run (its command
/// and last output) and the first failed screen assertion.
pub fn failure(s: &mut String, r: &RunSummary) {
    let (step, assertion) = r.first_failures();
    if step.is_none() && assertion.is_none() {
        return;
    }
    let _ = writeln!(s, "\n## What failed\n");
    if let Some((i, st)) = step {
        let _ = writeln!(
            s,
            "Step {} {}: {}",
            i + 1,
            code(&st.name),
            step_outcome(&st.outcome)
        );
        let _ = writeln!(s, "\n- command: {}", command(&st.command));
        tails(s, st.output_tail.as_ref());
    }
    if let Some(a) = assertion {
        let _ = writeln!(
            s,
            "Screen assertion {} of session {}: expected {}; {} after {} ms{}",
            a.assert,
            a.session,
            esc(&a.pattern),
            a.outcome.describe(),
            a.elapsed_ms,
            a.snapshot
                .as_deref()
                .map(|p| format!(" (the screen it saw: {})", code(p)))
                .unwrap_or_default()
        );
    }
}

/// The last lines a step printed, each stream in its own block.
pub fn tails(s: &mut String, tail: Option<&crate::events::OutputTail>) {
    let Some(t) = tail else { return };
    for (what, text) in [("stdout", &t.stdout), ("stderr", &t.stderr)] {
        if !text.is_empty() {
            let _ = write!(s, "\n{what}, last lines:\n\n{}", fenced("text", text));
        }
    }
}

/// The sandbox's labels, but for the owner's (host, pid), which identify
/// the machine that ran rfs and tell a reviewer nothing.
fn labels(s: &mut String, r: &RunSummary) {
    let shown: Vec<_> = r
        .labels
        .iter()
        .filter(|(k, _)| !k.starts_with("relayflows/owner-"))
        .collect();
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Sandbox labels\n");
    for (k, v) in shown {
        let _ = writeln!(s, "- {} = {}", code(k), code(v));
    }
}

/// The steps: a table, then each step with its command, where it ran and
/// what it printed last.
fn steps(s: &mut String, r: &RunSummary) {
    if !steps_table(s, r) {
        return;
    }
    for (i, st) in r.steps.iter().enumerate() {
        let _ = writeln!(s, "\n### {}. {}\n", i + 1, code(&st.name));
        if !st.command.is_empty() {
            let _ = writeln!(s, "- command: {}", command(&st.command));
        }
        if let Some(dir) = ran_in(r, st) {
            let _ = writeln!(s, "- ran in: {}", code(&dir));
        }
        let _ = writeln!(s, "- result: {}", step_outcome(&st.outcome));
        if let Some(n) = r.network.step_line(&st.name) {
            let _ = writeln!(s, "- network: {}", esc(&n));
        }
        if let Some(u) = &st.usage {
            let _ = writeln!(s, "- used: {}", u.describe());
        }
        tails(s, st.output_tail.as_ref());
    }
}

/// The steps' table under a `## Steps` heading; `false` when no step ran.
pub fn steps_table(s: &mut String, r: &RunSummary) -> bool {
    let _ = writeln!(s, "\n## Steps\n");
    if r.steps.is_empty() {
        let _ = writeln!(s, "(no steps ran)");
        return false;
    }
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
    true
}

/// Each terminal session: its command, how it ended, every screen
/// assertion and its recording.
fn sessions(s: &mut String, r: &RunSummary) {
    if r.recordings.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Terminal sessions\n");
    for rec in &r.recordings {
        let ended = match &rec.ended {
            Some((how, Some(code))) => format!("; ended: {} (exit {code})", esc(how)),
            Some((how, None)) => format!("; ended: {}", esc(how)),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "- session {}: {}{ended}; recording {} (asciicast v2, play with `asciinema play`)",
            rec.session,
            command(&rec.command),
            code(&rec.path),
        );
        for a in r.assertions.iter().filter(|a| a.session == rec.session) {
            let _ = writeln!(
                s,
                "  - assert {}: expected {}: {} after {} ms{}",
                a.assert,
                esc(&a.pattern),
                a.outcome.describe(),
                a.elapsed_ms,
                a.snapshot
                    .as_deref()
                    .map(|p| format!(", screen {}", code(p)))
                    .unwrap_or_default()
            );
        }
    }
}

/// What the script printed.
fn prints(s: &mut String, r: &RunSummary) {
    if r.prints.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Script output\n");
    let _ = write!(s, "{}", fenced("text", &r.prints.join("\n")));
    if r.prints_elided > 0 {
        let _ = writeln!(
            s,
            "\n({} more lines, in the journal's `print` entries)",
            r.prints_elided
        );
    }
}

/// What `collect()` copied out of the sandbox and `put()` shipped in,
/// each file with its sha256 (`rfs verify` checks every one).
fn artifacts(s: &mut String, r: &RunSummary) {
    if r.artifacts.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Artifacts\n");
    for e in &r.artifacts {
        match e {
            super::fold::ArtifactRow::Collected {
                path,
                files,
                links,
                skipped,
                bytes,
                junit,
            } => {
                let _ = writeln!(
                    s,
                    "- collected {}: {} file(s), {bytes} bytes",
                    code(path),
                    files.len()
                );
                if let Some(j) = junit {
                    let _ = writeln!(
                        s,
                        "  - a JUnit report: {} test case(s), {} failed, {} error(s), {} skipped (in the run's JUnit)",
                        j.tests, j.failures, j.errors, j.skipped
                    );
                }
                for f in files {
                    let _ = writeln!(s, "  - {} sha256 {}", code(&f.path), code(&f.sha256));
                }
                for l in links {
                    let _ = writeln!(
                        s,
                        "  - {} is a symlink to {} (recorded, not followed)",
                        code(&l.path),
                        code(&l.target)
                    );
                }
                for p in skipped {
                    let _ = writeln!(s, "  - {} skipped (not a file, folder or symlink)", code(p));
                }
            }
            super::fold::ArtifactRow::Put {
                local,
                path,
                sha256,
                bytes,
                bundled,
            } => {
                let kept = match bundled {
                    Some(b) => format!("kept as {}", code(b)),
                    None => "**NOT REPRODUCIBLE**: not kept in a bundle".to_owned(),
                };
                let _ = writeln!(
                    s,
                    "- put {} at {}: {bytes} bytes, sha256 {}, {kept}",
                    code(local),
                    code(path),
                    code(sha256)
                );
            }
        }
    }
}

/// Every refusal, with its reason.
fn refusals(s: &mut String, r: &RunSummary) {
    if r.refusals.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Refused\n");
    for why in &r.refusals {
        let _ = writeln!(s, "- {}", esc(why));
    }
}

/// `rfs bisect`, leading the page: the answer (the commit found, its
/// subject, author and date; for a merge, the range to bisect inside
/// it), then every commit tested with its result, oldest first.
pub fn bisect(s: &mut String, r: &RunSummary) {
    let Some(a) = crate::journal::bisect_answer::Answer::of(r, &script_shown(r)) else {
        return;
    };
    let _ = writeln!(s, "## Bisect\n");
    let headline = match a
        .commit
        .as_deref()
        .and_then(|c| Some((c, a.headline.strip_prefix(c)?)))
    {
        Some((c, rest)) => format!("{}{}", code(c), esc(rest)),
        None => esc(&a.headline),
    };
    let _ = writeln!(s, "**{headline}**\n");
    for (k, v) in &a.details {
        let _ = writeln!(s, "- {k}: {}", esc(v));
    }
    if let Some(m) = &a.merge {
        let _ = writeln!(s, "\n{}\n", esc(&m.why));
        let _ = writeln!(s, "- with rfs: {}", code(&m.rfs));
        let _ = writeln!(s, "- with git: {}", code(&m.git));
    }
    let _ = writeln!(s, "\nRange: {}.\n", esc(&a.range));
    let _ = writeln!(
        s,
        "Commits tested, oldest first:\n\n| commit | end | result | why |\n|---|---|---|---|"
    );
    for row in &a.rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            code(&row.commit),
            row.end,
            row.result.as_str(),
            esc(&row.why)
        );
    }
    s.push('\n');
}

/// A step's outcome cell (untrusted parts escaped).
pub fn step_outcome(o: &StepOutcome) -> String {
    esc(&step_outcome_text(o))
}

/// A step's outcome in words, as plain text (each view escapes it).
pub fn step_outcome_text(o: &StepOutcome) -> String {
    match o {
        StepOutcome::Running => "running".into(),
        StepOutcome::Passed => "ok".into(),
        StepOutcome::Failed {
            allowed: true,
            summary,
        } => format!("failed, allowed ({summary})"),
        StepOutcome::Failed { summary, .. } => format!("FAILED ({summary})"),
        StepOutcome::Refused { reason } => format!("REFUSED ({reason})"),
        StepOutcome::Cancelled { attempt } => {
            format!("INTERRUPTED (attempt {attempt} was cancelled)")
        }
        StepOutcome::ProviderFailed { error } => {
            format!("FAILED (the provider could not run it: {error})")
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
                "Sandbox {} {what} at {}: get-by-id returned not found and it was absent from the provider inventory ({} listed) after {}, {elapsed_ms} ms.",
                code(sandbox_id),
                esc(why),
                crate::plural::count(*inventory_count, "sandbox", "sandboxes"),
                crate::plural::count(*polls, "poll", "polls"),
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
