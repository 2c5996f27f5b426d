//! Services (`service.*`) as the views show them: one row per service
//! container, folded from its facts, its section of EVIDENCE.md and its
//! lines of `report.html`.

use std::fmt::Write as _;

use super::background::{last_named, log_paths, provider_said, Details};
use super::inert_markdown::{code, esc};
use crate::events::{Event, OutputTail};

/// One service of a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceRow {
    pub name: String,
    /// The image as the script named it.
    pub image: String,
    /// The image id it was created from.
    pub image_id: String,
    pub repo_digests: Vec<String>,
    pub container_id: String,
    pub network: String,
    /// What its `ready` saw: (`line`/`port`, target, after ms).
    pub ready: Vec<(String, String, u64)>,
    /// What its `ready` did not see: (`line`/`port`, target, why).
    pub wait_failed: Vec<(String, String, String)>,
    /// Set by `service.end`.
    pub end: Option<ServiceEndRow>,
}

/// How it ended (`service.end`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceEndRow {
    pub by: String,
    pub exit: Option<i32>,
    pub gone: bool,
    pub duration_ms: u64,
    pub logs: Vec<String>,
    pub tail: Option<OutputTail>,
    /// Output past the run's log bound, not kept.
    pub cut: Option<crate::events::OutputCut>,
    pub error: Option<String>,
}

/// Fold a `service.*` fact into `rows` (other facts are ignored).
pub fn apply(rows: &mut Vec<ServiceRow>, e: &Event) {
    match e {
        Event::ServiceStart {
            name,
            image,
            image_pin,
            container_id,
            network,
            ..
        } => rows.push(ServiceRow {
            name: name.clone(),
            image: image.clone(),
            image_id: image_pin.id.clone(),
            repo_digests: image_pin.repo_digests.clone(),
            container_id: container_id.clone(),
            network: network.clone(),
            ..Default::default()
        }),
        Event::ServiceReady {
            name,
            on,
            target,
            after_ms,
        } => {
            if let Some(r) = last_named(rows, name, |r| &r.name) {
                r.ready.push((on.clone(), target.clone(), *after_ms));
            }
        }
        Event::ServiceWaitFailed {
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
        Event::ServiceEnd {
            name,
            by,
            exit,
            gone,
            duration_ms,
            stdout_log,
            stderr_log,
            output_tail,
            output_cut,
            error,
        } => {
            if let Some(r) = last_named(rows, name, |r| &r.name) {
                r.end = Some(ServiceEndRow {
                    by: by.clone(),
                    exit: *exit,
                    gone: *gone,
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

/// How a service ended, in words.
pub fn ended_text(e: &ServiceEndRow) -> String {
    let how = match e.exit {
        Some(c) => format!("exit {c}"),
        None => "no exit code".into(),
    };
    let by = match e.by.as_str() {
        "teardown" => "still running at the run's end: stopped at teardown".to_owned(),
        "interrupt" => "ended by the run's interrupt".to_owned(),
        "not ready" => "removed: it never became ready".to_owned(),
        other => format!("stopped by {other}"),
    };
    let gone = if e.gone {
        "; its container verified gone (the engine no longer knows it)"
    } else {
        "; its container was NOT verified gone"
    };
    let err = provider_said(&e.error);
    let cut = super::background::cut_said(&e.cut);
    format!("{by} ({how}, after {} ms){gone}{err}{cut}", e.duration_ms)
}

/// The image, by content, in words.
pub fn image_text(r: &ServiceRow) -> String {
    let mut s = format!("image {} ({})", r.image, r.image_id);
    if !r.repo_digests.is_empty() {
        let _ = write!(s, ", {}", r.repo_digests.join(", "));
    }
    s
}

/// EVIDENCE.md's section on services.
pub fn evidence(s: &mut String, rows: &[ServiceRow]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n## Services\n");
    for r in rows {
        let _ = writeln!(
            s,
            "- {} `service` of {} (container {}, network {})",
            code(&r.name),
            esc(&image_text(r)),
            code(&r.container_id),
            code(&r.network)
        );
        Details {
            wait: "ready",
            ready: &r.ready,
            wait_failed: &r.wait_failed,
            end: r.end.as_ref().map(|e| (ended_text(e), &e.logs[..])),
        }
        .write(s);
    }
}

/// One line of text per service, for `report.html` (escaped there).
pub fn html_lines(rows: &[ServiceRow]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| {
            let mut parts = vec![image_text(r)];
            parts.extend(
                r.ready
                    .iter()
                    .map(|(on, t, ms)| format!("ready ({on} {t}) after {ms} ms")),
            );
            parts.extend(
                r.wait_failed
                    .iter()
                    .map(|(on, t, why)| format!("ready {on} {t} failed: {why}")),
            );
            parts.push(
                r.end
                    .as_ref()
                    .map_or("still running".to_owned(), ended_text),
            );
            (r.name.clone(), parts.join("; "))
        })
        .collect()
}
