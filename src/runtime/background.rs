//! What a background process (`spawn()`) and a service (`service()`)
//! share: the task that waits on it, its output as its handle sees it (a
//! bounded tail of lines, fed by its step sink's tap), its logs under
//! `steps/`, and how it ended once journaled.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::output::StepSink;
use super::Run;
use rfs_evidence::error::Result;
use rfs_evidence::events::{FileDigest, OutputTail, Stream};

/// Bytes of a background process's output its handle keeps (the last
/// ones; the logs have all of it).
const KEPT_BYTES: usize = 1024 * 1024;

/// The lines a background process printed, as its handle sees them.
#[derive(Default)]
pub(crate) struct Lines {
    kept: VecDeque<String>,
    bytes: usize,
    /// Lines dropped from the front (over [`KEPT_BYTES`]).
    dropped: u64,
    /// Stdout and stderr, for the output tail.
    stdout: String,
    stderr: String,
}

impl Lines {
    fn push(&mut self, which: Stream, line: &str) {
        self.bytes += line.len() + 1;
        self.kept.push_back(line.to_owned());
        let s = match which {
            Stream::Stdout => &mut self.stdout,
            Stream::Stderr => &mut self.stderr,
        };
        s.push_str(line);
        s.push('\n');
        if s.len() > 2 * OutputTail::BYTES {
            let cut = s.len() - OutputTail::BYTES;
            let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap_or(0);
            s.drain(..cut);
        }
        while self.bytes > KEPT_BYTES {
            let Some(l) = self.kept.pop_front() else {
                break;
            };
            self.bytes -= l.len() + 1;
            self.dropped += 1;
        }
    }

    /// Whether a kept line contains `needle`.
    pub(crate) fn contains(&self, needle: &str) -> bool {
        self.kept.iter().any(|l| l.contains(needle))
    }

    /// Everything kept, one line each.
    pub(crate) fn text(&self) -> String {
        let mut s = String::new();
        if self.dropped > 0 {
            s.push_str(&format!(
                "[rfs: {} earlier line(s) are only in the logs]\n",
                self.dropped
            ));
        }
        for l in &self.kept {
            s.push_str(l);
            s.push('\n');
        }
        s
    }

    pub(crate) fn tail(&self) -> Option<OutputTail> {
        OutputTail::of(&self.stdout, &self.stderr)
    }
}

/// What the command's task and the handle share.
#[derive(Default)]
pub(crate) struct Shared {
    pub(crate) lines: Mutex<Lines>,
    /// Set once the wrapper's shell said which group it leads (or that
    /// it could not tell: `None` inside).
    pub(crate) started: OnceLock<Option<i32>>,
}

impl Shared {
    pub(crate) fn lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// One background thing of the run: `D` is what its task hands back
/// when it ended, `E` how it ended, once journaled.
pub(crate) struct Background<D, E> {
    pub name: String,
    pub sandbox_id: String,
    /// Its logs' stem under `steps/` (`NNN-spawn-NAME`, `NNN-service-NAME`).
    stem: String,
    started: Instant,
    cancel: CancellationToken,
    task: Mutex<Option<JoinHandle<D>>>,
    pub(crate) shared: Arc<Shared>,
    ended: Mutex<Option<E>>,
}

impl<D, E: Clone> Background<D, E> {
    pub(super) fn new(
        name: &str,
        sandbox_id: &str,
        stem: String,
        cancel: CancellationToken,
        task: JoinHandle<D>,
        shared: Arc<Shared>,
    ) -> Self {
        Background {
            name: name.to_owned(),
            sandbox_id: sandbox_id.to_owned(),
            stem,
            started: Instant::now(),
            cancel,
            task: Mutex::new(Some(task)),
            shared,
            ended: Mutex::new(None),
        }
    }

    /// Whether its task has not ended (it still runs).
    pub(crate) fn alive(&self) -> bool {
        self.task
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(|t| !t.is_finished())
    }

    /// Its output so far (the last [`KEPT_BYTES`]), one line each.
    pub(crate) fn logs(&self) -> String {
        self.shared.lines().text()
    }

    pub(crate) fn ended(&self) -> Option<E> {
        self.ended.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(super) fn set_ended(&self, e: E) {
        *self.ended.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// Its task, once (`None` when it was taken to end it).
    pub(super) fn take_task(&self) -> Option<JoinHandle<D>> {
        self.task.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Cancel its task (the provider ends what it runs).
    pub(super) fn cancel(&self) {
        self.cancel.cancel();
    }

    pub(super) fn duration_ms(&self) -> u64 {
        super::ms(self.started.elapsed().as_millis())
    }
}

impl Run {
    /// The sink of a background thing named `name`: a step's (redacted
    /// into `steps/STEM.*.log`, to the console) whose lines also go to
    /// the returned [`Shared`] its handle reads.
    pub(super) fn background_sink(
        &self,
        name: &str,
        stem: &str,
        nonce: &str,
    ) -> (StepSink, Arc<Shared>) {
        let shared = Arc::new(Shared::default());
        let tap = shared.clone();
        let sink = StepSink::new(
            name,
            &self.cfg.out_dir.join("steps"),
            stem,
            nonce,
            self.state().redactor.clone(),
            self.reporter.clone(),
            self.log_budget.clone(),
        )
        .with_tap(Arc::new(move |which, line| tap.lines().push(which, line)));
        (sink, shared)
    }

    /// The digests of `b`'s stdout and stderr logs (`None`: not written).
    pub(super) fn background_logs<D, E: Clone>(
        &self,
        b: &Background<D, E>,
    ) -> Result<(Option<FileDigest>, Option<FileDigest>)> {
        let log = |s: &str| self.log_digest(&format!("{}.{s}.log", b.stem));
        Ok((log("stdout")?, log("stderr")?))
    }
}
