//! [`TerminalSession`]: a program under a PTY, seen through an emulator.
//!
//! A background task (the *pump*) owns the PTY's output stream: it feeds
//! every chunk to the emulator, appends it to the asciicast recording, writes the emulator's query replies back to the
//! program, and bumps a `watch` counter that wakes waiters. So output is
//! always consumed (memory stays bounded even if nobody looks at the screen)
//! and [`TerminalSession::wait_for`] re-checks its pattern after every chunk
//! instead of polling.
//!
//! All methods take `&self`. Async methods may be driven from a thread
//! outside the runtime with `Handle::block_on`, provided the runtime is
//! multi-threaded (its workers run the pump).

use std::fmt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::asciicast::{AsciicastWriter, Header};
use super::emulator::{AlacrittyEmulator, Emulator};
use super::keys::{self, KeyMode};
use super::pattern::{Match, Pattern};
use super::screen::Screen;
use super::TerminalError;
use rfs_sandbox::provider::{ExecOutcome, PtyChannel, PtyInput};

/// Most output bytes the pump processes before releasing the screen lock and
/// waking waiters.
const BATCH_BYTES: usize = 256 * 1024;
/// How long [`TerminalSession::close`] waits for the program to die.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// How to set up a session.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// Initial size; must equal the size the PTY was opened with.
    pub cols: u16,
    pub rows: u16,
    /// Write an asciicast v2 recording here (created/truncated).
    pub record: Option<PathBuf>,
    /// `TERM` stated in the recording header.
    pub term: String,
    /// Command line stated in the recording header.
    pub command: Option<String>,
    /// Secrets the recording must never contain (output and input).
    pub redactor: Option<rfs_evidence::secrets::Redactor>,
    /// Cancelling this aborts every wait with [`FailureKind::Cancelled`] /
    /// [`TerminalError::Cancelled`] (e.g. on Ctrl-C of the run).
    pub cancel: CancellationToken,
}

impl SessionOptions {
    pub fn new(cols: u16, rows: u16) -> Self {
        SessionOptions {
            cols,
            rows,
            record: None,
            term: "xterm-256color".into(),
            command: None,
            redactor: None,
            cancel: CancellationToken::new(),
        }
    }
}

/// A successful wait.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Where the pattern matched (`None` for `absent` waits).
    pub matched: Option<Match>,
    /// The screen that satisfied the wait.
    pub screen: Screen,
    /// Time from the start of the wait.
    pub elapsed: Duration,
}

/// Why a wait failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// The pattern did not match within the timeout.
    Timeout,
    /// An `absent` pattern appeared.
    Appeared(Match),
    /// The program's output ended without the pattern matching.
    Ended,
    /// The provider's channel ended without the program's exit status
    /// (a dropped connection): the program may still be running and
    /// printing, so nothing can be concluded from the screen.
    Lost,
    /// The session's cancellation token fired.
    Cancelled,
}

/// A failed wait, with the screen at the moment of failure.
#[derive(Debug, Clone)]
pub struct WaitFailure {
    pub kind: FailureKind,
    /// [`Pattern::describe`] of the awaited pattern.
    pub pattern: String,
    pub elapsed: Duration,
    pub screen: Screen,
}

impl fmt::Display for WaitFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secs = self.elapsed.as_secs_f64();
        match &self.kind {
            FailureKind::Timeout => {
                write!(f, "timed out after {secs:.1}s waiting for {}", self.pattern)?
            }
            FailureKind::Appeared(m) => write!(
                f,
                "expected {} but {:?} appeared at row {} col {} after {secs:.1}s",
                self.pattern, m.text, m.row, m.col
            )?,
            FailureKind::Ended => write!(
                f,
                "program output ended after {secs:.1}s while waiting for {}",
                self.pattern
            )?,
            FailureKind::Lost => write!(
                f,
                "the terminal connection ended after {secs:.1}s without the program's exit status \
                 while waiting for {} (the program may still be running: the screen may be incomplete)",
                self.pattern
            )?,
            FailureKind::Cancelled => {
                write!(f, "cancelled after {secs:.1}s waiting for {}", self.pattern)?
            }
        }
        write!(f, "\n{}", self.screen.dump())
    }
}

impl std::error::Error for WaitFailure {}

/// State shared between the session handle and its pump.
struct State {
    emulator: Box<dyn Emulator>,
    recorder: Option<AsciicastWriter>,
    record_error: Option<String>,
    output_closed: bool,
    exit: Option<ExecOutcome>,
}

impl State {
    fn record(&mut self, f: impl FnOnce(&mut AsciicastWriter) -> std::io::Result<()>) {
        if let Some(rec) = self.recorder.as_mut() {
            if let Err(e) = f(rec) {
                self.record_error = Some(e.to_string());
                self.recorder = None;
            }
        }
    }
}

struct Shared {
    state: Mutex<State>,
    /// Bumped after every processed batch, on output end and on exit.
    changed: watch::Sender<u64>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }
}

/// A live terminal session. Dropping it kills the program.
pub struct TerminalSession {
    shared: Arc<Shared>,
    input: mpsc::UnboundedSender<PtyInput>,
    cancel: CancellationToken,
    record_path: Option<PathBuf>,
    pump: Mutex<Option<JoinHandle<()>>>,
}

impl TerminalSession {
    /// Start serving `channel` on `runtime` with the alacritty emulator.
    pub fn start(
        runtime: &tokio::runtime::Handle,
        channel: PtyChannel,
        options: SessionOptions,
    ) -> Result<Self, TerminalError> {
        let emulator = Box::new(AlacrittyEmulator::new(options.cols, options.rows));
        Self::start_with(runtime, channel, options, emulator)
    }

    /// Like [`TerminalSession::start`] with a custom emulator.
    pub fn start_with(
        runtime: &tokio::runtime::Handle,
        channel: PtyChannel,
        options: SessionOptions,
        emulator: Box<dyn Emulator>,
    ) -> Result<Self, TerminalError> {
        let recorder = match &options.record {
            Some(path) => {
                let header = Header::new(
                    options.cols,
                    options.rows,
                    &options.term,
                    options.command.clone(),
                );
                let mut w = AsciicastWriter::create(path, &header).map_err(|e| {
                    TerminalError::Recording {
                        path: path.display().to_string(),
                        message: e.to_string(),
                    }
                })?;
                if let Some(r) = &options.redactor {
                    w.redact_with(r);
                }
                Some(w)
            }
            None => None,
        };
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                emulator,
                recorder,
                record_error: None,
                output_closed: false,
                exit: None,
            }),
            changed: watch::channel(0).0,
        });
        let PtyChannel {
            input,
            output,
            exit,
        } = channel;
        let pump = runtime.spawn(pump(shared.clone(), output, input.clone()));
        let exit_shared = shared.clone();
        runtime.spawn(async move {
            let outcome = exit.await.unwrap_or_default();
            exit_shared.lock().exit = Some(outcome);
            exit_shared.bump();
        });
        Ok(TerminalSession {
            shared,
            input,
            cancel: options.cancel,
            record_path: options.record,
            pump: Mutex::new(Some(pump)),
        })
    }

    fn send_input(&self, what: &'static str, msg: PtyInput) -> Result<(), TerminalError> {
        self.input
            .send(msg)
            .map_err(|_| TerminalError::Closed(what))
    }

    /// Type `text` (sent as-is, UTF-8; use `\r` or [`press`](Self::press)
    /// `"Enter"` to submit a line).
    pub fn send(&self, text: &str) -> Result<(), TerminalError> {
        self.send_bytes(text.as_bytes())
    }

    /// A secret the recording must not contain from now on.
    pub fn add_secret(&self, value: &str) {
        if let Some(rec) = self.shared.lock().recorder.as_mut() {
            rec.add_secret(value);
        }
    }

    /// Send raw bytes to the program.
    pub fn send_bytes(&self, bytes: &[u8]) -> Result<(), TerminalError> {
        self.shared
            .lock()
            .record(|r| r.input(bytes).and_then(|_| r.flush()));
        self.send_input("send input", PtyInput::Data(bytes.to_vec()))
    }

    /// Press one key by tmux-style name (see [`keys`]); cursor keys follow
    /// the program's application-cursor mode.
    pub fn press(&self, key: &str) -> Result<(), TerminalError> {
        let mode = KeyMode {
            app_cursor: self.shared.lock().emulator.app_cursor(),
        };
        let bytes = keys::encode(key, mode)?;
        self.send_bytes(&bytes)
    }

    /// Resize the terminal (emulator and PTY; the program gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) -> Result<(), TerminalError> {
        if cols == 0 || rows == 0 {
            return Err(TerminalError::Size { cols, rows });
        }
        {
            let mut st = self.shared.lock();
            st.emulator.resize(cols, rows);
            st.record(|r| r.resize(cols, rows).and_then(|_| r.flush()));
        }
        self.shared.bump();
        self.send_input("resize", PtyInput::Resize { cols, rows })
    }

    /// Add a marker to the recording (no-op without one).
    pub fn marker(&self, label: &str) {
        self.shared
            .lock()
            .record(|r| r.marker(label).and_then(|_| r.flush()));
    }

    /// The screen now.
    pub fn screen(&self) -> Screen {
        self.shared.lock().emulator.snapshot()
    }

    /// Line `n` of the screen (0-based; negative counts from the bottom).
    pub fn line(&self, n: i32) -> Option<String> {
        self.screen().line(n).map(str::to_string)
    }

    /// Cursor `(row, col)`, 0-based.
    pub fn cursor(&self) -> (u16, u16) {
        self.screen().cursor
    }

    /// How the program ended, if it has.
    pub fn exit_status(&self) -> Option<ExecOutcome> {
        self.shared.lock().exit
    }

    /// The recording's first write error, if recording failed midway
    /// (recording then stops; the session goes on).
    pub fn recording_error(&self) -> Option<String> {
        self.shared.lock().record_error.clone()
    }

    /// Wait until `pattern` holds (see [`Pattern`] for `absent`, `stable`
    /// and `timeout`). Re-checked after every output chunk.
    pub async fn wait_for(&self, pattern: &Pattern) -> Result<Outcome, WaitFailure> {
        let start = Instant::now();
        let deadline = start + pattern.timeout;
        let mut changes = self.shared.changed.subscribe();
        let mut last: Option<Screen> = None;
        let mut stable_since = start;
        loop {
            changes.borrow_and_update();
            let (screen, closed, exit) = {
                let st = self.shared.lock();
                (st.emulator.snapshot(), st.output_closed, st.exit)
            };
            // The output ended and the channel said how the program ended
            // (`Some(true)`), or that it cannot tell (`Some(false)`).
            let ended_known = closed.then_some(exit).flatten().map(|o| o.is_known());
            let now = Instant::now();
            if last.as_ref() != Some(&screen) {
                stable_since = now;
            }
            let found = pattern.matches(&screen);
            let fail = |kind, screen: Screen| WaitFailure {
                kind,
                pattern: pattern.describe(),
                elapsed: now - start,
                screen,
            };
            // Without a match, a lost channel proves nothing about what
            // the program printed since (for `absent` either); an ended
            // program prints nothing more.
            if found.is_none() && ended_known == Some(false) {
                return Err(fail(FailureKind::Lost, screen));
            }
            let mut wake_at = deadline;
            if pattern.absent {
                if let Some(m) = found {
                    return Err(fail(FailureKind::Appeared(m), screen));
                }
                if ended_known == Some(true) || now >= deadline {
                    return Ok(Outcome {
                        matched: None,
                        screen,
                        elapsed: now - start,
                    });
                }
            } else if let Some(m) = found {
                let ready_at = stable_since + pattern.stable.unwrap_or_default();
                if now >= ready_at {
                    return Ok(Outcome {
                        matched: Some(m),
                        screen,
                        elapsed: now - start,
                    });
                }
                wake_at = wake_at.min(ready_at);
            } else if closed {
                return Err(fail(FailureKind::Ended, screen));
            }
            if now >= deadline {
                return Err(fail(FailureKind::Timeout, screen));
            }
            last = Some(screen);
            tokio::select! {
                _ = changes.changed() => {}
                _ = tokio::time::sleep_until(wake_at) => {}
                _ = self.cancel.cancelled() => {
                    let screen = self.screen();
                    return Err(WaitFailure {
                        kind: FailureKind::Cancelled,
                        pattern: pattern.describe(),
                        elapsed: start.elapsed(),
                        screen,
                    });
                }
            }
        }
    }

    /// Wait for the program to exit, at most `timeout`.
    pub async fn wait_exit(&self, timeout: Duration) -> Result<ExecOutcome, TerminalError> {
        tokio::select! {
            outcome = self.wait_exit_uncancelled() => Ok(outcome),
            _ = tokio::time::sleep(timeout) => Err(TerminalError::ExitTimeout {
                timeout,
                screen: self.screen().dump(),
            }),
            _ = self.cancel.cancelled() => Err(TerminalError::Cancelled),
        }
    }

    /// Kill the program's whole process group, wait for it to end and for
    /// its output to be processed, and flush the recording. Returns how it
    /// ended; fails if it would not die or the recording could not be
    /// written.
    pub async fn close(&self) -> Result<ExecOutcome, TerminalError> {
        if self.exit_status().is_none() {
            // A closed input means the provider is gone, which also ends it.
            let _ = self.input.send(PtyInput::Kill);
        }
        let outcome = match tokio::time::timeout(CLOSE_GRACE, self.wait_exit_uncancelled()).await {
            Ok(outcome) => outcome,
            Err(_) => {
                return Err(TerminalError::ExitTimeout {
                    timeout: CLOSE_GRACE,
                    screen: self.screen().dump(),
                })
            }
        };
        let pump = self.pump.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(pump) = pump {
            // Output ends shortly after the program; don't hang on stragglers.
            let _ = tokio::time::timeout(CLOSE_GRACE, pump).await;
        }
        let mut st = self.shared.lock();
        st.record(|r| r.end_streams().and_then(|_| r.flush()));
        if let Some(message) = st.record_error.clone() {
            return Err(TerminalError::Recording {
                path: self
                    .record_path
                    .as_ref()
                    .map(|p| p.display().to_string())
                    .unwrap_or_default(),
                message,
            });
        }
        Ok(outcome)
    }

    /// How the program ended, once it has (no timeout, no cancellation).
    async fn wait_exit_uncancelled(&self) -> ExecOutcome {
        let mut changes = self.shared.changed.subscribe();
        loop {
            changes.borrow_and_update();
            if let Some(outcome) = self.exit_status() {
                return outcome;
            }
            if changes.changed().await.is_err() {
                // Unreachable while `self` holds the sender; be safe anyway.
                return self.exit_status().unwrap_or_default();
            }
        }
    }
}

impl Drop for TerminalSession {
    fn drop(&mut self) {
        if self.exit_status().is_none() {
            let _ = self.input.send(PtyInput::Kill);
        }
    }
}

/// Consume the program's output until it ends.
async fn pump(
    shared: Arc<Shared>,
    mut output: mpsc::Receiver<Vec<u8>>,
    input: mpsc::UnboundedSender<PtyInput>,
) {
    while let Some(chunk) = output.recv().await {
        let replies = {
            let mut st = shared.lock();
            let mut taken = 0;
            let mut next = Some(chunk);
            while let Some(chunk) = next.take() {
                taken += chunk.len();
                st.emulator.feed(&chunk);
                st.record(|r| r.output(&chunk));
                if taken < BATCH_BYTES {
                    next = output.try_recv().ok();
                }
            }
            st.record(|r| r.flush());
            st.emulator.take_replies()
        };
        if !replies.is_empty() {
            let _ = input.send(PtyInput::Data(replies));
        }
        shared.bump();
    }
    {
        let mut st = shared.lock();
        st.record(|r| r.end_streams().and_then(|_| r.flush()));
        st.output_closed = true;
    }
    shared.bump();
}
impl From<&FailureKind> for rfs_evidence::outcome::AssertionOutcome {
    fn from(k: &FailureKind) -> Self {
        use FailureKind as K;
        match k {
            K::Timeout => rfs_evidence::outcome::AssertionOutcome::Timeout,
            K::Appeared(_) => rfs_evidence::outcome::AssertionOutcome::Appeared,
            K::Ended => rfs_evidence::outcome::AssertionOutcome::Ended,
            K::Lost => rfs_evidence::outcome::AssertionOutcome::Lost,
            K::Cancelled => rfs_evidence::outcome::AssertionOutcome::Cancelled,
        }
    }
}
