//! A spinner on stderr while a sandbox is provisioned or the source is
//! shipped and verified, shown only when that takes longer than a
//! moment (about a second) and only on a terminal: the CLI never builds
//! one for pipes, `--json` or `-q`.

use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

use rfs_evidence::events::Event;

/// How long a phase runs before its spinner appears.
pub const DEFAULT_AFTER: Duration = Duration::from_secs(1);

/// Follows the event stream and spins while a slow phase runs.
#[derive(Debug)]
pub struct Progress {
    after: Duration,
    state: Mutex<State>,
    /// The spinner being drawn, if one is (console lines suspend it).
    shown: Arc<Mutex<Option<ProgressBar>>>,
}

#[derive(Debug, Default)]
struct State {
    /// The phase's spinner thread; [`State::end`] ends the phase.
    phase: Option<(Sender<String>, JoinHandle<()>)>,
    /// A sync was asked for and has not ended (its upload comes after
    /// the placement).
    sync: Option<String>,
}

impl Progress {
    /// A spinner that appears once a phase has run for `after`.
    pub fn new(after: Duration) -> Progress {
        Progress {
            after,
            state: Mutex::default(),
            shown: Arc::default(),
        }
    }

    /// Run `f` (which prints to the terminal) with the spinner hidden.
    pub fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        let shown = self.shown.lock().unwrap_or_else(|p| p.into_inner());
        match shown.as_ref() {
            Some(bar) => bar.suspend(f),
            None => f(),
        }
    }

    /// Take an event: start, relabel or end the current phase.
    pub fn event(&self, event: &Event) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::SourceResolved { commit, .. } => {
                let msg = format!("syncing commit {}", short(commit));
                st.sync = Some(msg.clone());
                self.phase(&mut st, msg);
            }
            Event::PlacementIntent { provider, .. } => {
                self.phase(&mut st, format!("provisioning a {provider} sandbox"));
            }
            Event::Placement { .. } => match st.sync.clone() {
                Some(msg) => self.phase(&mut st, format!("{msg}: shipping and verifying")),
                None => st.end(),
            },
            Event::SourcePin { .. }
            | Event::SourceSyncFailed { .. }
            | Event::SourceRefused { .. }
            | Event::PlacementFailed { .. }
            | Event::RunEnd { .. } => {
                st.sync = None;
                st.end();
            }
            _ => {}
        }
    }

    /// Relabel the running phase, or start one.
    fn phase(&self, st: &mut State, msg: String) {
        if let Some((tx, _)) = &st.phase {
            if tx.send(msg.clone()).is_ok() {
                return;
            }
        }
        let (tx, rx) = mpsc::channel::<String>();
        let after = self.after;
        let shown = self.shown.clone();
        let thread = std::thread::spawn(move || {
            let mut msg = msg;
            // Quick phases never draw.
            loop {
                match rx.recv_timeout(after) {
                    Ok(m) => msg = m,
                    Err(RecvTimeoutError::Disconnected) => return,
                    Err(RecvTimeoutError::Timeout) => break,
                }
            }
            let bar = ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} rfs: {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.set_message(msg);
            bar.enable_steady_tick(Duration::from_millis(100));
            *shown.lock().unwrap_or_else(|p| p.into_inner()) = Some(bar.clone());
            while let Ok(m) = rx.recv() {
                bar.set_message(m);
            }
            shown.lock().unwrap_or_else(|p| p.into_inner()).take();
            bar.finish_and_clear();
        });
        st.phase = Some((tx, thread));
    }
}

impl State {
    /// End the phase and wait until its spinner is cleared, so the next
    /// console line lands on a clean line.
    fn end(&mut self) {
        if let Some((tx, thread)) = self.phase.take() {
            drop(tx);
            let _ = thread.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).end();
    }
}

fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}
