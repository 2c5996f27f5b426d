//! EVIDENCE.md's sections on what happened: what failed first, the
//! steps, terminal sessions, prints, artifacts, refusals and bisect
//! results.

use std::fmt::Write as _;

use super::facts::{ran_in, script_shown};
use crate::journal::fold::{RunSummary, StepOutcome};
use crate::journal::inert_markdown::{code, command, esc, fenced};

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

/// The steps: a table, then each step with its command, where it ran and
/// what it printed last.
pub(super) fn steps(s: &mut String, r: &RunSummary) {
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
        if let Some(c) = &st.output_cut {
            let _ = writeln!(s, "- logs: {}", esc(&c.describe()));
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
pub(super) fn sessions(s: &mut String, r: &RunSummary) {
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
pub(super) fn prints(s: &mut String, r: &RunSummary) {
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
pub(super) fn artifacts(s: &mut String, r: &RunSummary) {
    if r.artifacts.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Artifacts\n");
    for e in &r.artifacts {
        match e {
            crate::journal::fold::ArtifactRow::Collected {
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
            crate::journal::fold::ArtifactRow::Absent {
                path,
                optional,
                step,
            } => {
                let why = crate::journal::fold::absent_why(*optional, step.as_deref(), code);
                let _ = writeln!(s, "- {} was absent when collected ({why})", code(path));
            }
            crate::journal::fold::ArtifactRow::Put {
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
pub(super) fn refusals(s: &mut String, r: &RunSummary) {
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
    let _ = writeln!(s, "{}\n", esc(&a.ends));
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
