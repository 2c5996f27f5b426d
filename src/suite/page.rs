//! `index.html`: the suite at a glance, one self-contained file next to
//! `index.md`, in the style of each proof's `report.html` (its style
//! sheet, its escaping, the same Content-Security-Policy: nothing but
//! rfs's own style, allowed by its hash; no script, nothing fetched).
//!
//! The counts first with the commit, the project's tests (JUnit totals)
//! and the network, NOT REPRODUCIBLE when a proof shipped a working tree
//! or used a cache, then what failed (each failed proof with its error,
//! its last output lines and the screen of its first failed
//! `assert_screen`), the refused proofs (with their last output lines),
//! the flaky ones with every attempt, and a table of
//! every proof linking to its `report.html`. Every link is relative to
//! the suite's folder, so the folder can be moved or downloaded whole.

use std::fmt::Write as _;
use std::path::Path;

use super::events::{Attempt, ProofResult, Verdict};
use super::index::Index;
use rfs_evidence::report::html::{csp_hash, CSS};
use rfs_evidence::report::html_text::{h, h_inline};

/// Who drew the page (its `<meta name="generator">`).
const GENERATOR: &str = concat!("rfs ", env!("CARGO_PKG_VERSION"), " suite/1");

/// What the suite's page adds to the report's style sheet.
const SUITE_CSS: &str = "\
.proof { border: 1px solid var(--line); border-radius: 8px; padding: 4px 16px 12px; margin: 12px 0; }
.proof.bad { border: 2px solid var(--bad); } .proof.warn { border: 2px solid var(--warn); }
#not-reproducible { border: 2px solid var(--bad); border-radius: 8px; padding: 8px 16px; color: var(--bad); }
#counts { width: auto; } #counts th, #counts td { padding: 2px 14px 2px 0; } #counts .n { font-weight: 600; font-size: 16px; }
";

/// The page for the suite whose folder is `dir`.
pub(crate) fn page(ix: &Index, dir: &Path) -> String {
    let mut s = String::with_capacity(32 * 1024);
    let style = format!("\n{CSS}{SUITE_CSS}");
    let (class, word) = verdict_of(ix);
    let _ = write!(
        s,
        "<!doctype html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"generator\" content=\"{GENERATOR}\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src {}; img-src data:\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>rfs test {}: {word}</title>\n<style>{style}</style>\n</head>\n<body>\n",
        csp_hash(&style),
        h_inline(&ix.suite_id),
    );
    let _ = writeln!(
        s,
        "<header>\n<h1>rfs test <code>{}</code> <span class=\"badge {class}\" id=\"verdict\">{word}</span></h1>",
        h_inline(&ix.suite_id)
    );
    if !ix.not_reproducible.is_empty() {
        let _ = writeln!(
            s,
            "<p id=\"not-reproducible\"><strong>NOT REPRODUCIBLE</strong>: {} shipped the working tree as it was (<code>--allow-dirty</code>), not a commit, or used a cache kept between runs (its own or its setup's); each one's <code>EVIDENCE.md</code> says which.</p>",
            ix.not_reproducible
                .iter()
                .map(|n| format!("<code>{}</code>", h_inline(n)))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    counts(&mut s, ix);
    s.push_str("</header>\n");
    super::setup_view::html(&mut s, ix.setup.as_ref());
    let failed: Vec<&ProofResult> = ix
        .proofs
        .iter()
        .filter(|p| {
            matches!(
                p.verdict,
                Verdict::Failed | Verdict::Error | Verdict::Interrupted
            )
        })
        .collect();
    if !failed.is_empty() {
        s.push_str("<section id=\"failed\">\n<h2>What failed</h2>\n");
        for p in failed {
            proof_failed(&mut s, p, dir);
        }
        s.push_str("</section>\n");
    }
    let refused: Vec<&ProofResult> = ix
        .proofs
        .iter()
        .filter(|p| p.verdict == Verdict::Refused)
        .collect();
    if !refused.is_empty() {
        s.push_str("<section id=\"refused\">\n<h2>Refused</h2>\n");
        for p in refused {
            proof_head(&mut s, p, dir, "bad");
            error(&mut s, p, p.last());
            output_tail(&mut s, p);
            s.push_str("</article>\n");
        }
        s.push_str("</section>\n");
    }
    let flaky: Vec<&ProofResult> = ix
        .proofs
        .iter()
        .filter(|p| p.verdict == Verdict::Flaky)
        .collect();
    if !flaky.is_empty() {
        s.push_str(
            "<section id=\"flaky\">\n<h2>Flaky</h2>\n<p>Failed, then passed when run again (<code>--retries</code>).</p>\n",
        );
        for p in flaky {
            proof_head(&mut s, p, dir, "warn");
            attempts(&mut s, p, dir);
            s.push_str("</article>\n");
        }
        s.push_str("</section>\n");
    }
    table(&mut s, ix, dir);
    let _ = writeln!(
        s,
        "<footer>Drawn by {GENERATOR} from this suite's <code>index.json</code>; each proof's own \
         <code>report.html</code> and <code>EVIDENCE.md</code> are checked by <code>rfs verify</code> on its folder.</footer>\n</body>\n</html>"
    );
    s
}

/// The suite's badge.
fn verdict_of(ix: &Index) -> (&'static str, &'static str) {
    let c = &ix.counts;
    if ix.stopped.is_some() && c.finished() == 0 {
        ("warn", "stopped")
    } else if ix.exit_code == 0 {
        ("ok", "passed")
    } else if c.refused > 0 && c.failed == 0 && c.error == 0 {
        ("bad", "refused")
    } else {
        ("bad", "failed")
    }
}

fn counts(s: &mut String, ix: &Index) {
    let c = &ix.counts;
    let _ = writeln!(
        s,
        "<p id=\"summary\">{}</p>",
        h(&super::events::summary_text(c))
    );
    let cells = [
        ("passed", c.passed),
        ("flaky", c.flaky),
        ("failed", c.failed),
        ("refused", c.refused),
        ("cancelled", c.interrupted),
        ("rfs errors", c.error),
        ("not run", c.not_run),
    ];
    s.push_str("<table id=\"counts\">\n<tr>");
    for (what, _) in cells {
        let _ = write!(s, "<th>{what}</th>");
    }
    s.push_str("</tr>\n<tr>");
    for (what, n) in cells {
        let _ = write!(
            s,
            "<td class=\"n\" id=\"count-{}\">{n}</td>",
            what.replace(' ', "-")
        );
    }
    s.push_str("</tr>\n</table>\n<dl class=\"facts\">\n");
    let _ = writeln!(
        s,
        "<dt>provider</dt><dd><code>{}</code>, {} at a time</dd>\n<dt>time</dt><dd>{:.1} s</dd>\n<dt>exit code</dt><dd>{}</dd>",
        h_inline(&ix.provider),
        ix.jobs,
        ix.duration_ms as f64 / 1000.0,
        ix.exit_code
    );
    if let Some(why) = &ix.stopped {
        let _ = writeln!(s, "<dt>stopped early</dt><dd>{}</dd>", h(why));
    }
    let t = &ix.totals;
    for (id, what, text) in [
        ("commit", "commit", t.commit_text()),
        (
            "project-tests",
            "project tests (JUnit, every proof)",
            t.tests_text(),
        ),
        ("network", "network", t.network_text()),
    ] {
        if let Some(text) = text {
            let _ = writeln!(s, "<dt>{what}</dt><dd id=\"suite-{id}\">{}</dd>", h(&text));
        }
    }
    s.push_str("</dl>\n");
}

/// A file of an attempt's bundle, relative to the suite's folder, when
/// it exists there (a run refused before it began has no bundle).
fn link(a: &Attempt, dir: &Path, file: &str) -> Option<String> {
    if a.out_dir.is_empty() {
        return None;
    }
    let out = Path::new(&a.out_dir);
    if !out.join(file).is_file() {
        return None;
    }
    let rel = out
        .strip_prefix(dir)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
        .map(Path::to_path_buf)
        .or_else(|| out.file_name().map(Into::into))?;
    let mut href = String::new();
    for part in rel.iter() {
        href.push_str(&percent(&part.to_string_lossy()));
        href.push('/');
    }
    href.push_str(file);
    Some(href)
}

/// A path segment for an `href`: anything but unreserved characters is
/// percent-encoded (so a folder's name can never end the attribute or
/// become a scheme).
fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The id of a proof's article: its place in the index (names are the
/// files', anything may be in them).
fn anchor(p: &ProofResult) -> String {
    let base: String = p
        .name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("proof-{}", base.trim_matches('-'))
}

/// A proof's heading (opens an `<article>`): verdict, name, exit,
/// attempts, time and its report.
fn proof_head(s: &mut String, p: &ProofResult, dir: &Path, class: &str) {
    let report = p
        .last()
        .and_then(|a| link(a, dir, rfs_evidence::report::HTML_FILE))
        .map(|href| format!(" <a class=\"report\" href=\"{}\">report.html</a>", h(&href)))
        .unwrap_or_else(|| " (no bundle: refused before it ran)".into());
    let _ = writeln!(
        s,
        "<article class=\"proof {class}\" id=\"{}\" data-verdict=\"{}\">\n<h3><span class=\"badge {class}\">{}</span> <code class=\"name\">{}</code></h3>\n<p>exit {}, {}, {:.2} s;{report}</p>",
        h(&anchor(p)),
        h(&format!("{:?}", p.verdict).to_lowercase()),
        p.verdict.word(),
        h_inline(&p.name),
        p.exit_code,
        rfs_evidence::plural::count(p.attempts.len() as u64, "attempt", "attempts"),
        p.duration_ms as f64 / 1000.0
    );
}

/// An attempt's error as rfs printed it; the proof's name in it shown as
/// in its heading (a line end in a name stays visible, not a new line).
fn error(s: &mut String, p: &ProofResult, a: Option<&Attempt>) {
    let Some(e) = a.and_then(|a| a.error.as_deref()) else {
        return;
    };
    let shown = e
        .trim_end()
        .split(p.name.as_str())
        .map(|part| h(&rfs_evidence::journal::inert_markdown::strip_ansi(part)))
        .collect::<Vec<_>>()
        .join(&h_inline(&p.name));
    let _ = writeln!(s, "<p>error</p><pre class=\"error\">{shown}</pre>");
}

/// A failed proof: heading, error, last output lines, and the screen of
/// its first failed assertion.
fn proof_failed(s: &mut String, p: &ProofResult, dir: &Path) {
    proof_head(s, p, dir, "bad");
    error(s, p, p.last());
    output_tail(s, p);
    if let Some(a) = p.last() {
        screen(s, a, dir);
    }
    if p.attempts.len() > 1 {
        attempts(s, p, dir);
    }
    if let Some(w) = p.last().and_then(|a| a.teardown_warning.as_deref()) {
        let _ = writeln!(s, "<p class=\"warning\">warning: {}</p>", h(w));
    }
    s.push_str("</article>\n");
}

/// The last lines a proof printed (a failed or refused one): what
/// explains its error.
fn output_tail(s: &mut String, p: &ProofResult) {
    if p.output_tail.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<p>last {} lines of output</p><pre class=\"tail\">{}</pre>",
        p.output_tail.len(),
        p.output_tail
            .iter()
            .map(|l| h_inline(l))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// The screen the first failed `assert_screen` of the attempt saw, drawn
/// as its `report.html` draws it, with a link to it there.
fn screen(s: &mut String, a: &Attempt, dir: &Path) {
    if a.out_dir.is_empty() {
        return;
    }
    let out = Path::new(&a.out_dir);
    let Ok(b) = rfs_evidence::report::FinishedRun::read(out) else {
        return;
    };
    let Some(failed) = b.summary.first_failures().1 else {
        return;
    };
    let sessions = rfs_evidence::report::terminal::sessions(out, &b.summary);
    let shot = sessions
        .iter()
        .find(|v| v.session == failed.session)
        .and_then(|v| v.at_assert.get(&failed.assert));
    let there = link(a, dir, rfs_evidence::report::HTML_FILE)
        .map(|href| {
            format!(
                " (<a class=\"screen-link\" href=\"{}#failed-session-{}-assert-{}\">in report.html</a>)",
                h(&href),
                failed.session,
                failed.assert
            )
        })
        .unwrap_or_default();
    let _ = write!(
        s,
        "<figure class=\"assert\" data-session=\"{}\" data-assert=\"{}\"><div class=\"side\"><div class=\"expected\"><p>expected</p><pre>{}</pre></div><div>",
        failed.session,
        failed.assert,
        h(&failed.pattern)
    );
    rfs_evidence::report::html::push_screen(s, shot);
    let _ = writeln!(
        s,
        "</div></div><figcaption>session {}, assert {}: {}{there}</figcaption></figure>",
        failed.session,
        failed.assert,
        h(failed.outcome.describe())
    );
}

/// Every attempt of a proof run again, each with its report.
fn attempts(s: &mut String, p: &ProofResult, dir: &Path) {
    s.push_str("<ol class=\"attempts\">\n");
    for a in &p.attempts {
        let report = link(a, dir, rfs_evidence::report::HTML_FILE)
            .map(|href| format!(" <a href=\"{}\">report.html</a>", h(&href)))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "<li>{}, exit {}, {:.2} s;{report}</li>",
            Verdict::of_exit(a.exit_code).word(),
            a.exit_code,
            a.duration_ms as f64 / 1000.0
        );
    }
    s.push_str("</ol>\n");
}

/// Every proof, failed first, then the rest by name; then those not run.
fn table(s: &mut String, ix: &Index, dir: &Path) {
    s.push_str("<section id=\"proofs\">\n<h2>Every proof</h2>\n<table>\n<tr><th>proof</th><th>verdict</th><th>attempts</th><th>time</th><th>evidence</th></tr>\n");
    let mut rows: Vec<&ProofResult> = ix.proofs.iter().collect();
    rows.sort_by_key(|p| rank(p.verdict));
    for p in rows {
        let class = if p.verdict.passed() { "ok" } else { "bad" };
        let evidence = match p.last() {
            Some(a) => [rfs_evidence::report::HTML_FILE, "EVIDENCE.md"]
                .iter()
                .filter_map(|f| {
                    link(a, dir, f).map(|href| format!("<a href=\"{}\">{f}</a>", h(&href)))
                })
                .collect::<Vec<_>>()
                .join(" "),
            None => String::new(),
        };
        let evidence = if evidence.is_empty() {
            "none (refused before it ran)".to_owned()
        } else {
            evidence
        };
        let _ = writeln!(
            s,
            "<tr class=\"{class}\"><td><code>{}</code></td><td>{}</td><td>{}</td><td>{:.2} s</td><td>{evidence}</td></tr>",
            h_inline(&p.name),
            p.verdict.word(),
            p.attempts.len(),
            p.duration_ms as f64 / 1000.0
        );
    }
    for n in &ix.not_run {
        let _ = writeln!(
            s,
            "<tr class=\"bad\"><td><code>{}</code></td><td>NOT RUN</td><td>0</td><td></td><td></td></tr>",
            h_inline(n)
        );
    }
    s.push_str("</table>\n</section>\n");
}

/// The order of the table: what did not pass first.
fn rank(v: Verdict) -> u8 {
    match v {
        Verdict::Failed | Verdict::Error | Verdict::Interrupted => 0,
        Verdict::Refused => 1,
        Verdict::Flaky => 2,
        Verdict::Passed => 3,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_name_cannot_leave_its_href() {
        assert_eq!(percent("a\"b c<d>/e:f"), "a%22b%20c%3Cd%3E%2Fe%3Af");
    }
}
