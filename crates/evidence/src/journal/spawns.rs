//! Background processes (`spawn.*`) as the views show them: one row per
//! process, folded from its facts, and its section of EVIDENCE.md.

use std::fmt::Write as _;

use super::background::{last_named, log_paths, provider_said, Details};
use super::inert_markdown::code;
use crate::events::{Event, OutputTail};

/// One background process of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnRow {
    pub name: String,
    pub command: String,
    pub cwd: String,
    /// What `wait_for` saw: (`line`/`port`, target, after ms).
    pub ready: Vec<(String, String, u64)>,
    /// What `wait_for` did not see: (`line`/`port`, target, why).
    pub wait_failed: Vec<(String, String, String)>,
    /// Set by `spawn.end`.
    pub end: Option<SpawnEndRow>,
}

/// How it ended (`spawn.end`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SpawnEndRow {
    pub by: String,
    pub exit: Option<i32>,
    pub signal: Option<i32>,
    pub group: Option<i32>,
    pub group_gone: Option<bool>,
    pub duration_ms: u64,
    pub logs: Vec<String>,
    pub tail: Option<OutputTail>,
    /// Output past the run's log bound, not kept.
    pub cut: Option<crate::events::OutputCut>,
    pub error: Option<String>,
}

/// Fold a `spawn.*` fact into `rows` (other facts are ignored).
pub fn apply(rows: &mut Vec<SpawnRow>, e: &Event) {
    match e {
        Event::SpawnStart {
            name, command, cwd, ..
        } => rows.push(SpawnRow {
            name: name.clone(),
            command: command.clone(),
            cwd: cwd.clone(),
            ..Default::default()
        }),
        Event::SpawnReady {
            name,
            on,
            target,
            after_ms,
        } => {
            if let Some(r) = last_named(rows, name, |r| &r.name) {
                r.ready.push((on.clone(), target.clone(), *after_ms));
            }
        }
        Event::SpawnWaitFailed {
            name,
            on,
            target,
            why,
            ..
        } => {
            if let Some(r) = last_named(rows, name, |r| &r.name) {
                r.wait_failed
                    .push((on.clone(), target.clone(), why.clone()));
            }
        }
        Event::SpawnEnd {
            name,
            by,
            exit,
            signal,
            group,
            group_gone,
            duration_ms,
            stdout_log,
            stderr_log,
            output_tail,
            output_cut,
            error,
        } => {
            if let Some(r) = last_named(rows, name, |r| &r.name) {
                r.end = Some(SpawnEndRow {
                    by: by.clone(),
                    exit: *exit,
                    signal: *signal,
                    group: *group,
                    group_gone: *group_gone,
                    duration_ms: *duration_ms,
                    logs: log_paths(stdout_log, stderr_log),
                    tail: output_tail.clone(),
                    cut: output_cut.clone(),
                    error: error.clone(),
                });
            }
        }
        _ => {}
    }
}

/// How a process ended, in words (`stopped by stop()…`).
pub fn ended_text(e: &SpawnEndRow) -> String {
    let how = match (e.exit, e.signal) {
        (Some(c), _) => format!("exit {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => "no exit code".into(),
    };
    let by = match e.by.as_str() {
        "itself" => "ended on its own".to_owned(),
        "teardown" => "still running at the run's end: stopped at teardown".to_owned(),
        "refused" => "refused by the cwd check (it never started)".to_owned(),
        "interrupt" => "ended by the run's interrupt".to_owned(),
        other => format!("stopped by {other}"),
    };
    let group = match (e.group, e.group_gone) {
        (Some(g), Some(true)) => format!(
            "; its process group {g} verified gone (a probe in the sandbox found none of its processes left)"
        ),
        (Some(g), Some(false)) => {
            format!("; its process group {g} was NOT verified gone (processes were still there)")
        }
        (Some(g), None) => format!(
            "; its process group {g} could not be checked (the probe could not run in the sandbox, or the sandbox was already gone)"
        ),
        (None, _) => "; its process group was not known (no /proc in the sandbox)".to_owned(),
    };
    let err = provider_said(&e.error);
    let cut = super::background::cut_said(&e.cut);
    format!("{by} ({how}, after {} ms){group}{err}{cut}", e.duration_ms)
}

/// EVIDENCE.md's section on background processes.
pub fn evidence(s: &mut String, rows: &[SpawnRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Background processes\n");
    for r in rows {
        let cwd = if r.cwd.is_empty() { "." } else { &r.cwd };
        let _ = writeln!(
            s,
            "- {} `spawn` {} in {}",
            code(&r.name),
            code(&r.command),
            code(cwd)
        );
        Details {
            wait: "wait_for",
            ready: &r.ready,
            wait_failed: &r.wait_failed,
            end: r.end.as_ref().map(|e| (ended_text(e), &e.logs[..])),
        }
        .write(s);
    }
}
