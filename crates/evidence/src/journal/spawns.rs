//! Background processes (`spawn.*`) as the views show them: one row per
//! process, folded from its facts, and its section of EVIDENCE.md.

use std::fmt::Write as _;

use super::inert_markdown::{code, esc};
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
    pub error: Option<String>,
}

/// Fold a `spawn.*` fact into `rows` (other facts are ignored).
pub fn apply(rows: &mut Vec<SpawnRow>, e: &Event) {
    let find = |rows: &mut Vec<SpawnRow>, n: &str| rows.iter_mut().rev().position(|r| r.name == n);
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
            if let Some(i) = find(rows, name) {
                let n = rows.len() - 1 - i;
                rows[n].ready.push((on.clone(), target.clone(), *after_ms));
            }
        }
        Event::SpawnWaitFailed {
            name,
            on,
            target,
            why,
            ..
        } => {
            if let Some(i) = find(rows, name) {
                let n = rows.len() - 1 - i;
                rows[n]
                    .wait_failed
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
            error,
        } => {
            if let Some(i) = find(rows, name) {
                let n = rows.len() - 1 - i;
                rows[n].end = Some(SpawnEndRow {
                    by: by.clone(),
                    exit: *exit,
                    signal: *signal,
                    group: *group,
                    group_gone: *group_gone,
                    duration_ms: *duration_ms,
                    logs: [stdout_log, stderr_log]
                        .into_iter()
                        .flatten()
                        .map(|f| f.path.clone())
                        .collect(),
                    tail: output_tail.clone(),
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
    let err = e
        .error
        .as_ref()
        .map(|m| format!("; the provider said: {m}"))
        .unwrap_or_default();
    format!("{by} ({how}, after {} ms){group}{err}", e.duration_ms)
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
        for (on, target, ms) in &r.ready {
            let _ = writeln!(s, "  - ready: {on} {} after {ms} ms", code(target));
        }
        for (on, target, why) in &r.wait_failed {
            let _ = writeln!(s, "  - wait_for {on} {} FAILED: {}", code(target), esc(why));
        }
        match &r.end {
            Some(e) => {
                let _ = writeln!(s, "  - {}", esc(&ended_text(e)));
                for l in &e.logs {
                    let _ = writeln!(s, "  - log: {}", code(l));
                }
            }
            None => {
                let _ = writeln!(s, "  - (still running)");
            }
        }
    }
}
