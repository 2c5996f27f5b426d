//! The session's script thread: the one engine and scope of an `rfs mcp`
//! session, evaluating each tool call as the REPL evaluates an input, so
//! every call is journaled, refused and redacted exactly as a script's.
//! Values reach the script through scope variables, never by pasting
//! them into code; the transcript `save` writes shows them as literals.

use std::sync::mpsc::Receiver;
use std::sync::Arc;

use rhai::{Dynamic, Engine, Scope};

use crate::error::Error;
use crate::runtime::Run;

/// One call for the script thread.
pub(crate) struct Job {
    /// Rhai evaluated with `vars` in scope.
    pub code: String,
    pub vars: Vec<(&'static str, Dynamic)>,
    /// The statement `save` writes for it, once it succeeded.
    pub shown: Option<String>,
    pub reply: tokio::sync::oneshot::Sender<Reply>,
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

/// Serve jobs until the sender is dropped; the transcript of the calls
/// that succeeded goes to `transcript`.
pub(crate) fn serve(
    run: Arc<Run>,
    engine: Engine,
    jobs: Receiver<Job>,
    transcript: Arc<std::sync::Mutex<Vec<String>>>,
) {
    let mut scope = Scope::new();
    scope.push("mcp_terms", rhai::Array::new());
    for job in jobs {
        for (name, value) in job.vars {
            scope.set_or_push(name, value);
        }
        if run.is_cancelled() {
            run.renew_cancel();
        }
        let reply = match engine.eval_with_scope::<Dynamic>(&mut scope, &job.code) {
            Ok(v) => {
                if let Some(s) = job.shown {
                    // A secret the call made known never reaches a saved script.
                    let s = run.state().redactor.redact_str(&s);
                    transcript.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                }
                Reply::Value(to_json(&v))
            }
            Err(e) => failed(&run, &e),
        };
        let _ = job.reply.send(reply);
    }
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
        reason: run.state().redactor.redact_str(&text),
    }
}

/// `s` as a Rhai string literal.
pub(crate) fn lit(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}
