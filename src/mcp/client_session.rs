//! One `rfs mcp` session: its run, the script thread every call is
//! evaluated on, and how it ends. It starts only once a client has
//! initialized (a client that leaves before that starts nothing), and it
//! ends once: by `end`, or when the client leaves or a signal comes. A
//! call still running then is cancelled and waited for before the run
//! ends (as interrupted), so nothing is journaled after `run.end`.

use std::sync::{Arc, Mutex};

use rhai::Dynamic;

use super::save::Bounds;
use super::worker::{self, Control, Job, Reply};
use crate::runtime::Run;
use crate::script::{self, Script, ScriptSource};
use crate::settings::RunSettings;
use rfs_evidence::error::Error;
use rfs_evidence::outcome::RunOutcome;

/// The session behind the tools.
pub(crate) struct Session {
    jobs: Mutex<Option<std::sync::mpsc::Sender<Job>>>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
    control: Arc<Control>,
    pub run: Arc<Run>,
    pub transcript: Arc<Mutex<Vec<String>>>,
    pub out_dir: std::path::PathBuf,
    /// Where `save` may write.
    pub bounds: Bounds,
    /// How it ended, once it has (held while it ends).
    ended: Mutex<Option<Ending>>,
}

/// How the run's end went.
#[derive(Debug, Clone)]
pub(crate) struct Ending {
    pub outcome: RunOutcome,
    /// A call was running and was cancelled.
    pub cancelled_a_call: bool,
    pub teardown_warning: Option<String>,
    pub seal_error: Option<String>,
}

impl Session {
    /// Start the run of a session (its sandbox comes with the first call
    /// that needs one) and its script thread.
    pub(crate) fn start(
        settings: &RunSettings,
        rt: tokio::runtime::Handle,
    ) -> Result<Arc<Session>, Error> {
        // What a call returns goes to the client: the secrets of rfs's own
        // environment are redacted there too (the lifecycle's start learns
        // them). stdout is the protocol: nothing else may be printed there.
        let run = crate::lifecycle::start(
            settings,
            rt,
            crate::lifecycle::Start {
                provider: None,
                script_path: settings.script.clone(),
                reporter: Arc::new(rfs_evidence::events::Silent),
                bundle: None,
                key: None,
                replay_of: None,
                link: Default::default(),
            },
        )
        .map_err(|not| not.into_error())?;
        let here = Script {
            path: settings.invocation_dir.join("<mcp>"),
            dir: settings.invocation_dir.clone(),
            source: ScriptSource {
                name: "<mcp>".into(),
                text: String::new(),
            },
        };
        let mut engine = match script::run_engine(&run, &here, settings.vars.clone()) {
            Ok(e) => e,
            Err(e) => {
                crate::lifecycle::end_run(&run, RunOutcome::Error, None, None);
                return Err(e);
            }
        };
        super::terminals::register(&mut engine);
        let (jobs, rx) = std::sync::mpsc::channel::<Job>();
        let transcript = Arc::new(Mutex::new(Vec::new()));
        let control = Arc::new(Control::default());
        let (r, t, c) = (run.clone(), transcript.clone(), control.clone());
        let worker = std::thread::Builder::new()
            .name("rfs-mcp-script".into())
            .stack_size(16 * 1024 * 1024)
            .spawn(move || worker::serve(r, engine, rx, t, c))
            .map_err(|e| {
                crate::lifecycle::end_run(&run, RunOutcome::Error, None, None);
                Error::internal(e)
            })?;
        Ok(Arc::new(Session {
            jobs: Mutex::new(Some(jobs)),
            worker: Mutex::new(Some(worker)),
            control,
            run,
            transcript,
            bounds: Bounds::of(&settings.invocation_dir, &settings.out_dir),
            out_dir: settings.out_dir.clone(),
            ended: Mutex::new(None),
        }))
    }

    /// End the session once (blocking): no call is taken any more, the one
    /// running (if any) is cancelled and waited for, then the run ends
    /// with its verified teardown and the bundle is sealed as a run's is.
    /// How it ended, and whether this call ended it (a second call waits
    /// for the first to be done).
    pub(crate) fn end(&self) -> (Ending, bool) {
        let mut ended = lock(&self.ended);
        if let Some(e) = &*ended {
            return (e.clone(), false);
        }
        drop(lock(&self.jobs).take());
        let cancelled_a_call = self.control.stop(&self.run);
        if let Some(w) = lock(&self.worker).take() {
            let _ = w.join();
        }
        let outcome = if cancelled_a_call {
            RunOutcome::Interrupted
        } else {
            RunOutcome::Completed
        };
        let end = crate::lifecycle::end_run(&self.run, outcome, None, None);
        let teardown_warning = end.teardown_warning;
        let seal_error = end
            .seal_error
            .map(|(what, e)| format!("{what} failed: {e}"));
        let ending = Ending {
            outcome,
            cancelled_a_call,
            teardown_warning,
            seal_error,
        };
        *ended = Some(ending.clone());
        (ending, true)
    }

    /// Evaluate one call on the script thread.
    pub(crate) async fn eval(
        &self,
        code: String,
        vars: Vec<(&'static str, Dynamic)>,
        shown: Option<super::worker::Shown>,
    ) -> Result<Reply, &'static str> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sent = lock(&self.jobs).as_ref().is_some_and(|j| {
            j.send(Job {
                code,
                vars,
                shown,
                reply: tx,
            })
            .is_ok()
        });
        if sent {
            rx.await.map_err(|_| "the session ended while the call ran")
        } else {
            Err("the session has ended (its sandbox is gone); start a new one")
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
