//! `rfs run --json`: stdout carries only JSON lines — each event as the
//! run goes (`{"type":"event","kind":…,"payload":…}`), then one summary
//! (`{"type":"summary",…}`, see [`Summary`]). Step output and diagnostics
//! go to stderr.

use std::io::Write;
use std::sync::Mutex;

use crate::reporter::Summary;
use rfs_evidence::events::{Event, Reporter, Stream};
use rfs_evidence::journal::fold::RunSummary;

/// The JSON-lines reporter; [`Json::finish`] prints the summary.
#[derive(Debug, Default)]
pub struct Json {
    run: Mutex<RunSummary>,
}

impl Json {
    /// Print the summary line for a run that ended with `exit_code`.
    pub fn finish(&self, run_id: Option<&str>, exit_code: i32) {
        let run = self.run.lock().unwrap_or_else(|p| p.into_inner());
        let s = Summary::view(&run, run_id, exit_code);
        let mut v = serde_json::to_value(&s).unwrap_or_default();
        if let Some(o) = v.as_object_mut() {
            o.insert("type".into(), "summary".into());
        }
        line(&v);
    }
}

fn line(v: &serde_json::Value) {
    // A closed pipe must not fail the run.
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
    let _ = out.flush();
}

impl Reporter for Json {
    fn event(&self, event: &Event) {
        self.run
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .apply(event);
        let (kind, payload) = event.to_kind_payload();
        line(&serde_json::json!({ "type": "event", "kind": kind, "payload": payload }));
    }

    fn output(&self, step: &str, stream: Stream, text: &str) {
        let tag = match stream {
            Stream::Stdout => "",
            Stream::Stderr => " stderr",
        };
        let _ = writeln!(std::io::stderr().lock(), "[{step}{tag}] {text}");
    }

    fn warning(&self, text: &str) {
        let _ = writeln!(std::io::stderr().lock(), "rfs: warning: {text}");
    }
}
