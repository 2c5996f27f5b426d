//! EVIDENCE.md's facts of a run: where it ran, the script, provider,
//! sandbox, pins, outcome, labels and cleanup.

use std::fmt::Write as _;

use crate::journal::fold::{Cleanup, RunSummary};
use crate::journal::inert_markdown::{code, esc};

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
pub fn ran_in(r: &RunSummary, st: &crate::journal::fold::StepRecord) -> Option<String> {
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
    if let Some(f) = &r.checkpoints.started_from {
        let _ = writeln!(
            s,
            "- started from: checkpoint {} of setup run {}",
            code(&f.checkpoint_id),
            code(&f.setup_run_id)
        );
    }
    if let Some(i) = &r.isolation {
        let _ = writeln!(s, "- isolation: {}", esc(i));
    }
    if let Some(e) = r.environment.as_ref().and_then(|e| e.describe()) {
        let _ = writeln!(s, "- environment: {}", esc(&e));
    }
    match crate::journal::bisect_answer::Answer::of(r, &script_shown(r)) {
        // A bisect has no one source commit: it names what it tested
        // (each re-sync below), never a commit it did not test.
        Some(a) => {
            for (k, v) in &a.tested_facts {
                let _ = writeln!(s, "- {k}: {}", esc(v));
            }
            if let Some(first) = r.pins.first() {
                let tested = |c: &str| a.rows.iter().any(|row| row.commit == c);
                let _ = writeln!(
                    s,
                    "- first synced: {}{}",
                    code(&first.commit),
                    if tested(&first.commit) {
                        ""
                    } else {
                        " (not tested: where the source was bound before the first commit tested)"
                    }
                );
            }
        }
        None => pin_lines(s, r),
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

/// The source pin's lines: commit, tree, archive, files.
fn pin_lines(s: &mut String, r: &RunSummary) {
    let opt = |o: Option<&str>| o.map(code).unwrap_or_else(|| "(none)".into());
    let pin = r.pin();
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
}

/// The sandbox's labels, but for the owner's (host, pid), which identify
/// the machine that ran rfs and tell a reviewer nothing.
pub(super) fn labels(s: &mut String, r: &RunSummary) {
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

/// The cleanup paragraph: rfs claims only the destroy it did.
pub(super) fn cleanup(c: Option<&Cleanup>) -> String {
    match c {
        None => "(not yet cleaned up)".into(),
        Some(Cleanup::NoSandbox) => "No sandbox was provisioned.".into(),
        Some(Cleanup::Kept { sandbox_id, reason }) if reason == "--keep" => format!(
            "Sandbox {} was kept (--keep); destroy it with `rfs gc` once its owner is gone.",
            code(sandbox_id)
        ),
        Some(Cleanup::Kept { sandbox_id, reason }) => format!(
            "Sandbox {} was kept beyond the run: {}",
            code(sandbox_id),
            esc(reason)
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
