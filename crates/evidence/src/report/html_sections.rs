//! `report.html`'s sections that EVIDENCE.md has too, drawn from the
//! same fold of the journal: the sandbox's labels, background processes
//! and services (briefly), the caches (and the NOT REPRODUCIBLE they
//! mean), the checkpoints (the one the sandbox started from, those the
//! run made) and the artifacts (with a JUnit report's counts). `tests/report_html.rs`
//! (`report_html_shows_everything_evidence_md_shows`) fails when
//! EVIDENCE.md has a section this page has not.

use std::fmt::Write as _;

use super::html_text::h;
use crate::journal::fold::{ArtifactRow, RunSummary};

/// The NOT REPRODUCIBLE lines of caches, at the top of the page.
pub(super) fn cache_banner(s: &mut String, r: &RunSummary) {
    let said =
        crate::journal::caches::not_reproducible(&r.caches, r.checkpoints.started_from.as_ref());
    for (i, why) in said.iter().enumerate() {
        let _ = writeln!(
            s,
            "<p class=\"not-reproducible\" id=\"cache-not-reproducible-{}\"><strong>{}</strong></p>",
            i + 1,
            h(why)
        );
    }
}

/// The sandbox's labels, but for the owner's (host, pid).
pub(super) fn labels(s: &mut String, r: &RunSummary) {
    let shown: Vec<_> = r
        .labels
        .iter()
        .filter(|(k, _)| !k.starts_with("relayflows/owner-"))
        .collect();
    if shown.is_empty() {
        return;
    }
    s.push_str("<section id=\"labels\"><h2>Sandbox labels</h2><dl class=\"facts\">\n");
    for (k, v) in shown {
        let _ = writeln!(
            s,
            "<dt><code>{}</code></dt><dd><code>{}</code></dd>",
            h(k),
            h(v)
        );
    }
    s.push_str("</dl></section>\n");
}

/// Each cache: what it held at mount and at the end.
pub(super) fn caches(s: &mut String, r: &RunSummary) {
    if r.caches.is_empty() {
        return;
    }
    s.push_str(
        "<section id=\"caches\"><h2>Caches</h2>\n<p>This run mounted caches that rfs keeps between runs of this repository on this provider. What a cache held came from earlier runs, not from the commit: <strong>the run is not reproducible from the commit alone</strong>. Each cache was held exclusively by this run.</p>\n<table>\n<tr><th>cache</th><th>path</th><th>at mount</th><th>at the end</th></tr>\n",
    );
    for c in &r.caches {
        let (sha, files, bytes) = &c.at_mount;
        let waited = if c.waited_ms > 0 {
            format!(" (waited {} ms for another run)", c.waited_ms)
        } else {
            String::new()
        };
        let end = match &c.at_end {
            Some((sha, files, bytes, changed, emptied)) => format!(
                "{files} file(s), {bytes} bytes, sha256 {sha}{}{}",
                if *changed {
                    " (changed by this run)"
                } else {
                    " (unchanged)"
                },
                if *emptied {
                    "; over its size cap, so emptied"
                } else {
                    ""
                }
            ),
            None => "(not yet released)".to_owned(),
        };
        let _ = writeln!(
            s,
            "<tr><td><code>{}</code></td><td><code>{}</code></td><td>{}</td><td>{}</td></tr>",
            h(&c.name),
            h(&c.path),
            h(&format!(
                "{files} file(s), {bytes} bytes, sha256 {sha}{waited}"
            )),
            h(&end)
        );
    }
    s.push_str("</table></section>\n");
}

/// The checkpoint the sandbox started from, and those the run made.
pub(super) fn checkpoints(s: &mut String, r: &RunSummary) {
    let c = &r.checkpoints;
    if c.made.is_empty() && c.started_from.is_none() {
        return;
    }
    s.push_str("<section id=\"checkpoints\"><h2>Checkpoints</h2><ul>\n");
    if let Some(f) = &c.started_from {
        let _ = writeln!(
            s,
            "<li id=\"started-from\">This run's sandbox <code>{}</code> started from checkpoint <code>{}</code> (<code>{}</code>) of setup run <code>{}</code>, whose journal head before the checkpoint was <code>{}</code>; the setup's journal is <code>setup/journal.jsonl</code> in this bundle (sha256 <code>{}</code>), checked by <code>rfs verify</code>. Forked in {} ms: {}.</li>",
            h(&f.sandbox_id),
            h(&f.checkpoint_id),
            h(&f.checkpoint_name),
            h(&f.setup_run_id),
            h(&f.setup_journal_head),
            h(&f.setup_journal.sha256),
            f.fork_ms,
            h(&f.how)
        );
        if !f.setup_caches.is_empty() {
            let _ = writeln!(
                s,
                "<li>Before the checkpoint the setup run had used {}: this run inherits what it did, so it is not reproducible from the commit alone.</li>",
                h(&crate::journal::caches::setup_caches_text(&f.setup_caches))
            );
        }
        if let Some(commit) = &c.source_from {
            let _ = writeln!(
                s,
                "<li>The source (commit <code>{}</code>) came from the checkpoint: its tree was synced and verified by the setup run and was not shipped again.</li>",
                h(commit)
            );
        }
    }
    for (m, removed) in &c.made {
        let pin = match &m.commit {
            Some(commit) => format!("source commit {commit}"),
            None => "no source bound".to_owned(),
        };
        let _ = writeln!(
            s,
            "<li class=\"checkpoint-made\">checkpoint <code>{}</code> (<code>{}</code>{}) of sandbox <code>{}</code>: {}</li>",
            h(&m.checkpoint_id),
            h(&m.name),
            if m.implicit { ", implicit" } else { "" },
            h(&m.sandbox_id),
            h(&format!(
                "{}, journal head {} ({} lines), {pin}, {} ms; {}",
                m.how,
                m.journal_head,
                m.journal_lines,
                m.ms,
                match removed {
                    Some(true) => "removed, verified gone",
                    Some(false) => "removal NOT verified",
                    None => "kept for the suite's proofs",
                }
            ))
        );
    }
    s.push_str("</ul></section>\n");
}

/// What `collect()` copied out and `put()` shipped in, each file with
/// its sha256, and a JUnit report's counts.
pub(super) fn artifacts(s: &mut String, r: &RunSummary) {
    if r.artifacts.is_empty() {
        return;
    }
    s.push_str("<section id=\"artifacts\"><h2>Artifacts</h2><ul>\n");
    for e in &r.artifacts {
        match e {
            ArtifactRow::Collected {
                path,
                files,
                links,
                skipped,
                bytes,
                junit,
            } => {
                let _ = write!(
                    s,
                    "<li>collected <code>{}</code>: {} file(s), {bytes} bytes",
                    h(path),
                    files.len()
                );
                if let Some(j) = junit {
                    let _ = write!(
                        s,
                        "<p class=\"junit\">a JUnit report: {} test case(s), {} failed, {} error(s), {} skipped (in the run's JUnit)</p>",
                        j.tests, j.failures, j.errors, j.skipped
                    );
                }
                s.push_str("<ul>");
                for f in files {
                    let _ = write!(
                        s,
                        "<li><code>{}</code> sha256 <code>{}</code></li>",
                        h(&f.path),
                        h(&f.sha256)
                    );
                }
                for l in links {
                    let _ = write!(
                        s,
                        "<li><code>{}</code> is a symlink to <code>{}</code> (recorded, not followed)</li>",
                        h(&l.path),
                        h(&l.target)
                    );
                }
                for p in skipped {
                    let _ = write!(
                        s,
                        "<li><code>{}</code> skipped (not a file, folder or symlink)</li>",
                        h(p)
                    );
                }
                s.push_str("</ul></li>\n");
            }
            ArtifactRow::Absent {
                path,
                optional,
                step,
            } => {
                let why = crate::journal::fold::absent_why(*optional, step.as_deref(), |s| {
                    format!("<code>{}</code>", h(s))
                });
                let _ = writeln!(
                    s,
                    "<li><code>{}</code> was absent when collected ({why})</li>",
                    h(path)
                );
            }
            ArtifactRow::Put {
                local,
                path,
                sha256,
                bytes,
                bundled,
            } => {
                let kept = match bundled {
                    Some(b) => format!("kept as <code>{}</code>", h(b)),
                    None => "<strong>NOT REPRODUCIBLE</strong>: not kept in a bundle".to_owned(),
                };
                let _ = writeln!(
                    s,
                    "<li>put <code>{}</code> at <code>{}</code>: {bytes} bytes, sha256 <code>{}</code>, {kept}</li>",
                    h(local),
                    h(path),
                    h(sha256)
                );
            }
        }
    }
    s.push_str("</ul></section>\n");
}

/// Background processes, briefly: what ran, when it was ready, how it
/// ended (EVIDENCE.md and the journal have the rest).
pub(super) fn spawns(s: &mut String, r: &RunSummary) {
    if r.spawns.is_empty() {
        return;
    }
    s.push_str("<section id=\"spawns\"><h2>Background processes</h2><ul>\n");
    for p in &r.spawns {
        let ready: Vec<String> = p
            .ready
            .iter()
            .map(|(on, t, ms)| format!("ready ({on} {t}) after {ms} ms"))
            .chain(
                p.wait_failed
                    .iter()
                    .map(|(on, t, why)| format!("wait_for {on} {t} failed: {why}")),
            )
            .collect();
        let end = p.end.as_ref().map_or(
            "still running".to_owned(),
            crate::journal::spawns::ended_text,
        );
        let _ = writeln!(
            s,
            "<li><code>{}</code>: <code>{}</code>{}; {}</li>",
            h(&p.name),
            h(&p.command),
            if ready.is_empty() {
                String::new()
            } else {
                format!("; {}", h(&ready.join("; ")))
            },
            h(&end)
        );
    }
    s.push_str("</ul></section>\n");
}

/// Services, briefly: the image by content, when it was ready, how it
/// ended.
pub(super) fn services(s: &mut String, r: &RunSummary) {
    if r.services.is_empty() {
        return;
    }
    s.push_str("<section id=\"services\"><h2>Services</h2><ul>\n");
    for (name, text) in crate::journal::services::html_lines(&r.services) {
        let _ = writeln!(s, "<li><code>{}</code>: {}</li>", h(&name), h(&text));
    }
    s.push_str("</ul></section>\n");
}
