//! `report.html`: the run at a glance, one self-contained file (no
//! network, no external script, style or font; a Content-Security-Policy
//! that allows none). The outcome and what failed come first; then the
//! pins (for a bisect: the ends and the commit found), the steps with
//! their last output, each terminal session's screen at every assertion
//! and at its end (SVG rendered from the emulator's cells) with a player
//! for its recording, and every other section EVIDENCE.md has (labels,
//! background processes, services, caches, checkpoints, the script's
//! output, artifacts, network: see [`super::html_sections`]), the
//! refusals, the cleanup and the journal's head. A pure function of the
//! bundle: `rfs verify` renders it again and compares.

use std::fmt::Write as _;

use super::html_sections;
use super::html_text::{h, json_in_script};
use super::terminal::{Screenshot, SessionView};
use super::FinishedRun;
use crate::journal::evidence::{in_sandbox, script_shown, step_outcome_text};
use crate::journal::fold::{Assertion, Cleanup, RunOutcome, RunSummary, StepRecord};

/// The report's style sheet (the suite's page, `index.html`, uses it too).
pub const CSS: &str = include_str!("assets/report.css");
const PLAYER: &str = include_str!("assets/player.js");

/// Who drew a report, written into it: rfs's version and the page
/// format, raised whenever the page or the screens are drawn differently
/// (so `rfs verify` compares a report only with its own rendering).
pub const GENERATOR: &str = concat!("rfs ", env!("CARGO_PKG_VERSION"), " report/4");

/// The generator a report names (its `<meta name="generator">`).
pub fn generator_of(html: &[u8]) -> Option<String> {
    const OPEN: &str = "<meta name=\"generator\" content=\"";
    let head = String::from_utf8_lossy(&html[..html.len().min(2048)]);
    let at = head.find(OPEN)? + OPEN.len();
    let end = head[at..].find('"')?;
    Some(head[at..at + end].to_owned())
}

/// A Content-Security-Policy `'sha256-…'` source for an inline element's
/// exact text.
pub fn csp_hash(text: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let digest = sha2::Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The page for `b`, with its terminal sessions rendered as `sessions`.
pub fn page(b: &FinishedRun, sessions: &[SessionView]) -> String {
    let r = &b.summary;
    let outcome = r.outcome.map_or("running", |o| o.as_str());
    let mut s = String::with_capacity(64 * 1024);
    // Only rfs's own style and script may apply (by their hashes): a
    // value that escaped its escaping could still not run.
    let style = format!("\n{CSS}");
    let script = format!("\n{PLAYER}");
    let _ = write!(
        s,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"{GENERATOR}\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src {}; script-src {}; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>rfs run {}: {outcome}</title>\n<style>{style}</style>\n</head>\n<body>\n",
        csp_hash(&style),
        csp_hash(&script),
        h(&r.run_id)
    );
    header(&mut s, r);
    failure(&mut s, r, sessions);
    html_sections::labels(&mut s, r);
    steps(&mut s, r);
    terminal(&mut s, r, sessions);
    html_sections::spawns(&mut s, r);
    html_sections::services(&mut s, r);
    html_sections::caches(&mut s, r);
    html_sections::checkpoints(&mut s, r);
    prints(&mut s, r);
    html_sections::artifacts(&mut s, r);
    crate::journal::network_view::html(&mut s, &r.network, &|t| h(t).to_string());
    refusals(&mut s, r);
    cleanup(&mut s, r);
    let _ = write!(
        s,
        "<footer>Journal <code>journal.jsonl</code>, head <code id=\"journal-head\">{}</code>. \
         This page, <code>EVIDENCE.md</code>, every log and recording are checked against it by \
         <code>rfs verify</code> on this folder.</footer>\n<script>{script}</script>\n</body>\n</html>\n",
        h(&b.head)
    );
    s
}

fn badge(outcome: Option<RunOutcome>) -> &'static str {
    match outcome {
        Some(RunOutcome::Completed) => "ok",
        Some(RunOutcome::Interrupted) | None => "warn",
        _ => "bad",
    }
}

/// The outcome and the run's facts; for a bisect, its answer first.
fn header(s: &mut String, r: &RunSummary) {
    let outcome = r.outcome.map_or("running", |o| o.as_str());
    let answer = crate::journal::bisect_answer::Answer::of(r, &script_shown(r));
    match &answer {
        Some(a) => {
            // A bisect's badge is its answer; the run's outcome is a fact.
            let (class, word) = match r.outcome {
                Some(RunOutcome::Completed) if a.found => ("ok", "found"),
                Some(RunOutcome::Completed) => ("warn", "no answer"),
                o => (badge(o), outcome),
            };
            let _ = write!(
                s,
                "<header>\n<h1>rfs bisect <code>{}</code> <span class=\"badge {class}\" id=\"bisect-verdict\">{}</span></h1>\n",
                h(&script_shown(r)),
                h(word)
            );
            bisect_answer(s, a);
        }
        None => {
            let _ = write!(
                s,
                "<header>\n<h1>rfs run <code>{}</code> <span class=\"badge {}\" id=\"outcome\">{}</span></h1>\n",
                h(&script_shown(r)),
                badge(r.outcome),
                h(outcome)
            );
        }
    }
    if let Some(reason) = &r.reason {
        let _ = writeln!(s, "<p id=\"reason\">{}</p>", h(reason));
    }
    if let Some(w) = &r.not_reproducible {
        let _ = writeln!(
            s,
            "<p id=\"not-reproducible\"><strong>{}</strong></p>",
            h(&w.describe())
        );
    }
    html_sections::cache_banner(s, r);
    let mut facts: Vec<(&str, String)> = vec![("run", r.run_id.clone())];
    if answer.is_some() {
        facts.push(("run outcome", outcome.to_owned()));
    }
    facts.push((
        "provider",
        format!("{} (chosen by {})", r.provider, r.provider_reason),
    ));
    if let Some(id) = &r.sandbox_id {
        facts.push(("sandbox", id.clone()));
    }
    if let Some(i) = &r.isolation {
        facts.push(("isolation", i.clone()));
    }
    for m in &r.host_mounts {
        facts.push(("host folder", m.describe()));
    }
    if let Some(f) = r.checkpoints.started_from_text() {
        facts.push(("started from", f));
    }
    // A bisect names what it tested, never one source commit (its first
    // sync may be of a commit it did not test); its syncs fold away.
    if let Some(a) = &answer {
        facts.extend(a.tested_facts.iter().map(|(k, v)| (*k, v.clone())));
    }
    let shown = if answer.is_some() { 0 } else { r.pins.len() };
    let tested = |c: &str| {
        answer
            .as_ref()
            .is_none_or(|a| a.rows.iter().any(|row| row.commit == c))
    };
    for (i, p) in r.pins.iter().take(shown).enumerate() {
        pin_facts(&mut facts, r, p, i, true);
    }
    s.push_str("<dl class=\"facts\">\n");
    fact_rows(s, &facts);
    s.push_str("</dl>\n");
    if r.pins.len() > shown {
        let mut more = vec![];
        for (i, p) in r.pins.iter().enumerate().skip(shown) {
            pin_facts(&mut more, r, p, i, tested(&p.commit));
        }
        let _ = writeln!(
            s,
            "<details id=\"resyncs\"><summary>{} syncs of the source (one per commit tested; one not tested is marked)</summary><dl class=\"facts\">",
            r.pins.len() - shown
        );
        fact_rows(s, &more);
        s.push_str("</dl></details>\n");
    }
    s.push_str("</header>\n");
}

fn pin_facts(
    facts: &mut Vec<(&str, String)>,
    r: &RunSummary,
    p: &crate::journal::fold::Pin,
    i: usize,
    tested: bool,
) {
    let what = match (i, r.bisect.is_some()) {
        (0, false) => "source commit",
        (0, true) => "synced to",
        _ => "re-synced to",
    };
    let commit = if tested {
        p.commit.clone()
    } else {
        format!("{} (not tested)", p.commit)
    };
    facts.push((what, commit));
    facts.push(("tree digest", p.tree_digest.clone()));
    facts.push(("files verified", p.files.to_string()));
    facts.push(("source workdir", in_sandbox(r.home.as_deref(), &p.workdir)));
}

fn fact_rows(s: &mut String, facts: &[(&str, String)]) {
    for (k, v) in facts {
        let _ = writeln!(s, "<dt>{}</dt><dd><code>{}</code></dd>", h(k), h(v));
    }
}

/// A bisect's answer: the commit found (subject, author, date), for a
/// merge the range to bisect inside it, then every commit tested,
/// oldest first.
fn bisect_answer(s: &mut String, a: &crate::journal::bisect_answer::Answer) {
    let headline = match a
        .commit
        .as_deref()
        .and_then(|c| Some((c, a.headline.strip_prefix(c)?)))
    {
        Some((c, rest)) => format!("<code>{}</code>{}", h(c), h(rest)),
        None => h(&a.headline),
    };
    let _ = writeln!(
        s,
        "<section id=\"bisect\">\n<h2>Bisect</h2>\n<p id=\"bisect-answer\"><strong>{headline}</strong></p>"
    );
    if !a.details.is_empty() {
        s.push_str("<dl class=\"facts\" id=\"bisect-commit\">\n");
        for (k, v) in &a.details {
            let _ = writeln!(s, "<dt>{}</dt><dd>{}</dd>", h(k), h(v));
        }
        s.push_str("</dl>\n");
    }
    if let Some(m) = &a.merge {
        let _ = writeln!(
            s,
            "<div id=\"bisect-merge\"><p>{}</p><pre>{}</pre><p>with git:</p><pre>{}</pre></div>",
            h(&m.why),
            h(&m.rfs),
            h(&m.git)
        );
    }
    let _ = writeln!(s, "<p id=\"bisect-ends\">{}</p>", h(&a.ends));
    let _ = writeln!(
        s,
        "<p>Range: {}.</p>\n<table id=\"bisect-tested\">\n<tr><th>commit</th><th>end</th><th>result</th><th>why</th></tr>",
        h(&a.range)
    );
    for row in &a.rows {
        let _ = writeln!(
            s,
            "<tr class=\"{}\"><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td></tr>",
            row.result.as_str(),
            h(&row.commit),
            row.end,
            row.result.as_str(),
            h(&row.why)
        );
    }
    s.push_str("</table>\n</section>\n");
}

/// What failed, first: the failing step with its command and output, and
/// the first failed assertion beside the screen it saw.
fn failure(s: &mut String, r: &RunSummary, sessions: &[SessionView]) {
    let (step, assertion) = r.first_failures();
    if step.is_none() && assertion.is_none() {
        return;
    }
    s.push_str("<section id=\"failure\">\n<h2>What failed</h2>\n");
    if let Some((i, st)) = step {
        let _ = writeln!(
            s,
            "<p>Step {} <code>{}</code>: {}</p>",
            i + 1,
            h(&st.name),
            h(&step_outcome_text(&st.outcome))
        );
        step_body(s, r, st);
    }
    if let Some(a) = assertion {
        assertion_figure(s, a, sessions, true, "failed-");
    }
    s.push_str("</section>\n");
}

/// A step's command, where it ran and the last lines it printed.
fn step_body(s: &mut String, r: &RunSummary, st: &StepRecord) {
    if !st.command.is_empty() {
        let _ = writeln!(
            s,
            "<p>command</p><pre class=\"command\">{}</pre>",
            h(&st.command)
        );
    }
    if let Some(dir) = crate::journal::evidence::ran_in(r, st) {
        let _ = writeln!(s, "<p>ran in <code>{}</code></p>", h(&dir));
    }
    if let Some(u) = &st.usage {
        let _ = writeln!(s, "<p class=\"usage\">used: {}</p>", h(&u.describe()));
    }
    if let Some(t) = &st.output_tail {
        for (what, text) in [("stdout", &t.stdout), ("stderr", &t.stderr)] {
            if !text.is_empty() {
                let clean = crate::journal::inert_markdown::strip_ansi(text);
                let _ = writeln!(
                    s,
                    "<p>{what}, last lines</p><pre class=\"{what}\">{}</pre>",
                    h(&clean)
                );
            }
        }
    }
}

/// The steps: a table, then each step (a failed one open).
fn steps(s: &mut String, r: &RunSummary) {
    s.push_str("<section id=\"steps\">\n<h2>Steps</h2>\n");
    if r.steps.is_empty() {
        s.push_str("<p>(no steps ran)</p>\n</section>\n");
        return;
    }
    // A bisect runs the proof once per commit: each step says which.
    let at_commit = r.bisect.is_some();
    let _ = writeln!(
        s,
        "<table>\n<tr><th>#</th><th>step</th>{}<th>outcome</th><th>exit</th><th>attempts</th><th>duration</th></tr>",
        if at_commit { "<th>commit</th>" } else { "" }
    );
    for (i, st) in r.steps.iter().enumerate() {
        let commit = if at_commit {
            format!(
                "<td><code>{}</code></td>",
                h(&st
                    .commit
                    .as_deref()
                    .map_or("-".to_owned(), |c| c.chars().take(12).collect()))
            )
        } else {
            String::new()
        };
        let class = if st.outcome.failed_the_run() {
            "bad"
        } else {
            "ok"
        };
        let _ = writeln!(
            s,
            "<tr class=\"{class}\"><td>{}</td><td><a href=\"#step-{}\"><code>{}</code></a></td>{commit}<td>{}</td><td>{}</td><td>{}</td><td>{} ms</td></tr>",
            i + 1,
            i + 1,
            h(&st.name),
            h(&step_outcome_text(&st.outcome)),
            st.exit.map(|e| e.to_string()).unwrap_or_else(|| "-".into()),
            st.attempts,
            st.duration_ms
        );
    }
    s.push_str("</table>\n");
    for (i, st) in r.steps.iter().enumerate() {
        // A bisect's failing steps are results it looks for, not news.
        let open = if st.outcome.failed_the_run() && r.bisect.is_none() {
            " open"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<details id=\"step-{}\"{open}><summary>{}. <code>{}</code>: {}</summary>",
            i + 1,
            i + 1,
            h(&st.name),
            h(&step_outcome_text(&st.outcome))
        );
        step_body(s, r, st);
        s.push_str("</details>\n");
    }
    s.push_str("</section>\n");
}

/// One assertion: the screen it saw (beside what it expected when it
/// failed) and its caption.
fn assertion_figure(
    s: &mut String,
    a: &Assertion,
    sessions: &[SessionView],
    side: bool,
    id_prefix: &str,
) {
    let shot = sessions
        .iter()
        .find(|v| v.session == a.session)
        .and_then(|v| v.at_assert.get(&a.assert));
    let caption = format!(
        "session {}, assert {}: expected {}: {} after {} ms",
        a.session,
        a.assert,
        a.pattern,
        a.outcome.describe(),
        a.elapsed_ms
    );
    let _ = write!(
        s,
        "<figure class=\"assert\" id=\"{id_prefix}session-{}-assert-{}\" data-outcome=\"{}\">",
        a.session,
        a.assert,
        h(a.outcome.as_str())
    );
    if side {
        let _ = write!(
            s,
            "<div class=\"side\"><div class=\"expected\"><p>expected</p><pre>{}</pre></div><div>",
            h(&a.pattern)
        );
    }
    push_screen(s, shot);
    if side {
        s.push_str("</div></div>");
    }
    let _ = writeln!(s, "<figcaption>{}</figcaption></figure>", h(&caption));
}

/// Each terminal session: the screen at each assertion, the last screen,
/// and the player.
fn terminal(s: &mut String, r: &RunSummary, sessions: &[SessionView]) {
    if r.recordings.is_empty() {
        return;
    }
    s.push_str("<section id=\"terminal\">\n<h2>Terminal sessions</h2>\n");
    for rec in &r.recordings {
        let ended = match &rec.ended {
            Some((how, Some(code))) => format!("; ended: {how} (exit {code})"),
            Some((how, None)) => format!("; ended: {how}"),
            None => String::new(),
        };
        let _ = writeln!(
            s,
            "<h3 id=\"session-{}\">Session {}: <code>{}</code>{}</h3>",
            rec.session,
            rec.session,
            h(&rec.command),
            h(&ended)
        );
        s.push_str("<div class=\"shots\">\n");
        for a in r.assertions.iter().filter(|a| a.session == rec.session) {
            assertion_figure(s, a, sessions, a.outcome.is_failure(), "");
        }
        let view = sessions.iter().find(|v| v.session == rec.session);
        if let Some(last) = view.and_then(|v| v.last.as_deref()) {
            let _ = writeln!(
                s,
                "<figure class=\"last\" id=\"session-{}-last\">{last}<figcaption>session {}: the screen when the recording ends</figcaption></figure>",
                rec.session, rec.session
            );
        }
        s.push_str("</div>\n");
        if let Some(v) = view.filter(|v| !v.frames.is_empty()) {
            let frames: Vec<serde_json::Value> = v
                .frames
                .iter()
                .map(|(t, svg)| serde_json::json!([t, svg]))
                .collect();
            let _ = writeln!(
                s,
                "<div class=\"player\" data-frames=\"frames-{n}\"><p>Recording <code>{}</code> ({} frames)</p>\
                 <div class=\"screen\"></div><div class=\"controls\"><button type=\"button\">▶ play</button>\
                 <input type=\"range\" min=\"0\" max=\"0\" value=\"0\" aria-label=\"frame\"><span class=\"clock\"></span></div></div>\n\
                 <script type=\"application/json\" id=\"frames-{n}\">{}</script>",
                h(&rec.path),
                v.frames.len(),
                json_in_script(&serde_json::Value::Array(frames)),
                n = rec.session
            );
        }
    }
    s.push_str("</section>\n");
}

fn prints(s: &mut String, r: &RunSummary) {
    if r.prints.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<section id=\"prints\"><h2>Script output</h2><pre>{}</pre>{}</section>",
        h(&r.prints.join("\n")),
        if r.prints_elided > 0 {
            format!("<p>({} more lines in the journal)</p>", r.prints_elided)
        } else {
            String::new()
        }
    );
}

fn refusals(s: &mut String, r: &RunSummary) {
    if r.refusals.is_empty() {
        return;
    }
    s.push_str("<section id=\"refused\"><h2>Refused</h2><ul>\n");
    for why in &r.refusals {
        let _ = writeln!(s, "<li>{}</li>", h(why));
    }
    s.push_str("</ul></section>\n");
}

fn cleanup(s: &mut String, r: &RunSummary) {
    let text = match &r.cleanup {
        None => "(not yet cleaned up)".to_owned(),
        Some(Cleanup::NoSandbox) => "No sandbox was provisioned.".to_owned(),
        Some(Cleanup::Kept { sandbox_id, reason }) if reason == "--keep" => {
            format!("Sandbox {sandbox_id} was kept (--keep).")
        }
        Some(Cleanup::Kept { sandbox_id, reason }) => {
            format!("Sandbox {sandbox_id} was kept beyond the run: {reason}")
        }
        Some(Cleanup::Verified {
            sandbox_id,
            destroyed_by_rfs,
            polls,
            elapsed_ms,
            ..
        }) => format!(
            "Sandbox {sandbox_id} {} and verified gone (get-by-id: not found; absent from the inventory) after {}, {elapsed_ms} ms.",
            if *destroyed_by_rfs { "destroyed" } else { "was already gone (ended outside rfs)" },
            crate::plural::count(*polls, "poll", "polls")
        ),
        Some(Cleanup::NotVerified { sandbox_id, error }) => {
            format!("Teardown of sandbox {sandbox_id} could NOT be verified: {error}. Run `rfs gc`.")
        }
    };
    let _ = writeln!(
        s,
        "<section id=\"cleanup\"><h2>Cleanup</h2><p>{}</p></section>",
        h(&text)
    );
}

/// A screen as drawn (SVG), else its text and why it is not drawn.
pub fn push_screen(s: &mut String, shot: Option<&Screenshot>) {
    match shot {
        Some(Screenshot::Svg(svg)) => s.push_str(svg),
        Some(Screenshot::Text { text, why }) => {
            let _ = write!(
                s,
                "<pre class=\"screen-text\">{}</pre><p>({})</p>",
                h(text),
                h(why)
            );
        }
        None => s.push_str("<p>(no screen was recorded)</p>"),
    }
}
