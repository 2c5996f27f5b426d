//! The session's script thread: the one engine and scope of an `rfs mcp`
//! session, evaluating each tool call as the REPL evaluates an input, so
//! every call is journaled, refused and redacted exactly as a script's.
//! Values reach the script through scope variables, never by pasting
//! them into code; the transcript `save` writes shows them as literals.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Receiver;
use std::sync::Arc;

use rhai::{Dynamic, Engine, Scope};

use crate::runtime::Run;
use rfs_evidence::error::Error;

/// One call for the script thread.
pub(crate) struct Job {
    /// Rhai evaluated with `vars` in scope.
    pub code: String,
    pub vars: Vec<(&'static str, Dynamic)>,
    /// The statement `save` writes for it, made from its value once it
    /// succeeded.
    pub shown: Option<Shown>,
    pub reply: tokio::sync::oneshot::Sender<Reply>,
}

/// How a call that succeeded is written by `save`, from the value it gave
/// (a step that succeeded is saved to succeed again; a terminal under the
/// number `attach` gave it).
pub(crate) type Shown = Box<dyn FnOnce(&serde_json::Value) -> String + Send>;

/// A statement that does not depend on the call's value.
pub(crate) fn fixed(s: String) -> Shown {
    Box::new(move |_| s)
}

/// What a call gave.
pub(crate) enum Reply {
    Value(serde_json::Value),
    /// A refusal or failure, with its reason (redacted).
    Failed {
        refused: bool,
        reason: String,
    },
}

/// How the session stops its script thread: no call starts once it is
/// stopping, and the one running when it stops is cancelled.
#[derive(Debug, Default)]
pub(crate) struct Control {
    stopping: AtomicBool,
    running: AtomicBool,
}

impl Control {
    /// Let no further call start; cancel the one running. Whether one was.
    pub(crate) fn stop(&self, run: &Run) -> bool {
        // Paired with `serve`: it marks a call running before it looks at
        // `stopping`, this sets `stopping` before it looks at `running`,
        // so a call either is refused there or is cancelled here.
        self.stopping.store(true, Ordering::SeqCst);
        let running = self.running.load(Ordering::SeqCst);
        if running {
            run.interrupt();
        }
        running
    }
}

/// Serve jobs until the sender is dropped; the transcript of the calls
/// that succeeded goes to `transcript`.
pub(crate) fn serve(
    run: Arc<Run>,
    engine: Engine,
    jobs: Receiver<Job>,
    transcript: Arc<std::sync::Mutex<Vec<String>>>,
    control: Arc<Control>,
) {
    let mut scope = Scope::new();
    scope.push("mcp_terms", rhai::Map::new());
    for job in jobs {
        if run.is_cancelled() {
            run.renew_cancel();
        }
        control.running.store(true, Ordering::SeqCst);
        if control.stopping.load(Ordering::SeqCst) {
            control.running.store(false, Ordering::SeqCst);
            let _ = job.reply.send(Reply::Failed {
                refused: false,
                reason: "the session ended before this call ran".into(),
            });
            continue;
        }
        for (name, value) in job.vars {
            scope.set_or_push(name, value);
        }
        let reply = match engine.eval_with_scope::<Dynamic>(&mut scope, &job.code) {
            Ok(v) => {
                let v = to_json(&v);
                if let Some(shown) = job.shown {
                    // A secret the call made known never reaches a saved script.
                    let s = run.state().redactor.redact_str(&shown(&v));
                    transcript.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                }
                Reply::Value(redact_json(&run, v))
            }
            Err(e) => failed(&run, &e),
        };
        control.running.store(false, Ordering::SeqCst);
        let _ = job.reply.send(reply);
    }
}

/// Every string in `v` with the run's secrets (and every secret this
/// process knows: secret-named environment and `--var`s) redacted, as in
/// the journal: what a call returns (a screen, a step's output) reaches
/// the client, and a client is no place for a secret.
fn redact_json(run: &Run, v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) => Value::String(redact(run, &s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| redact_json(run, v)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (redact(run, &k), redact_json(run, v)))
                .collect(),
        ),
        v => v,
    }
}

fn redact(run: &Run, s: &str) -> String {
    let s = run.state().redactor.redact_str(s);
    String::from_utf8_lossy(&rfs_evidence::secrets::redact_known(s.as_bytes())).into_owned()
}

fn to_json(v: &Dynamic) -> serde_json::Value {
    if v.is_unit() {
        return serde_json::Value::Null;
    }
    rhai::serde::from_dynamic::<serde_json::Value>(v)
        .unwrap_or_else(|_| serde_json::Value::String(v.to_string()))
}

/// A script error as the tool's error: a refusal (a value rfs raised)
/// says so; the text is redacted.
fn failed(run: &Run, e: &rhai::EvalAltResult) -> Reply {
    let err = crate::script::classify(run, e, e.to_string());
    let refused = matches!(err, Error::Refused(_));
    let text = match e.unwrap_inner() {
        rhai::EvalAltResult::ErrorRuntime(v, _) => v.to_string(),
        other => other.to_string(),
    };
    Reply::Failed {
        refused,
        reason: redact(run, &text),
    }
}

/// `s` as a Rhai string literal.
pub(crate) fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}
