//! Watching one command's streamed log until it ends: the one loop behind
//! a followed session command ([`super::follow`]) and a step on an agent
//! ([`super::agent`]). The log is relayed through the end-line scanners,
//! the command's recorded exit status is checked every [`CHECK_EVERY`], a
//! log that runs on after the recorded exit is bounded by [`LOG_GRACE`],
//! and rfs's timeout and cancellation act through the supervisor.

use std::time::Duration;

use futures_util::StreamExt;
use tokio::time::Instant;
use tokio_tungstenite::tungstenite::Message;

use super::logs::EndScan;
use super::outcome::KILL_GRACE;
use super::relay::{feed, Relay};
use super::session::RecordedExit;
use super::ws::Ws;
use super::Api;
use crate::provider::supervisor::{Intervention, Supervisor};
use crate::provider::{sleep_until, ExecRequest, OutputSink, ProviderResult};

/// How often a watched command's recorded exit status is checked.
const CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long the log may go on after the command's recorded exit.
pub(super) const LOG_GRACE: Duration = Duration::from_secs(2);

/// Said (on the step's stderr) when the log did not end with the command.
pub(super) const LOG_UNENDED_NOTE: &str = "rfs: the command removed the Daytona toolbox's session log (under $HOME/.daytona); output after this point is not captured, its exit status is read from /tmp\n";

/// Splits a log's frames into stdout/stderr pieces (`true` = stderr).
pub(super) trait Pieces: Send {
    fn pieces(&mut self, frame: &[u8]) -> Vec<(bool, Vec<u8>)>;
}

/// Why watching ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum How {
    /// Both end lines came.
    EndLines,
    /// The stream closed (or failed) first.
    Closed,
    /// The command's exit is recorded but its log did not end within
    /// [`LOG_GRACE`] (the note is said unless the log was kept).
    Unended,
    /// rfs stopped the command and the kill's grace is over.
    GraceOver,
}

/// What watching found.
#[derive(Debug)]
pub(super) struct Watched {
    pub how: How,
    /// rfs stopped the command: whether by its timeout, and whether a
    /// process group was killed.
    pub stopped: Option<(bool, bool)>,
    /// The exit status the wrapper recorded, if it was read.
    pub recorded: Option<RecordedExit>,
}

/// The command watched: its sandbox, session and wrapper token.
pub(super) struct Watching<'a> {
    pub id: &'a str,
    pub sid: &'a str,
    pub token: &'a str,
}

/// Said when the log did not end with the command: the output after this
/// point is lost (unless the log was only held open, not removed).
pub(super) fn note_unended(
    recorded: Option<RecordedExit>,
    relay: &mut Relay,
    sink: &mut dyn OutputSink,
) {
    if !recorded.is_some_and(|r| r.log_kept) {
        relay.flush(sink);
        sink.stderr(LOG_UNENDED_NOTE.as_bytes());
    }
}

impl Api {
    /// Relay `ws`'s log into `sink` through the end scanners until it
    /// ends, rfs stops the command, or its recorded exit outlives the log.
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn watch_log(
        &self,
        ws: &mut Ws,
        split: &mut dyn Pieces,
        at: Watching<'_>,
        req: &ExecRequest,
        (out, err): (&mut EndScan, &mut EndScan),
        relay: &mut Relay,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<Watched> {
        let mut sup = Supervisor::new(req, KILL_GRACE);
        let mut killed = false;
        let mut log_grace: Option<Instant> = None;
        let mut recorded: Option<RecordedExit> = None;
        let mut next_check = Instant::now() + CHECK_EVERY;
        let how = loop {
            tokio::select! {
                msg = ws.next() => match msg {
                    Some(Ok(Message::Binary(b))) => feed(split.pieces(&b), out, err, relay, sink),
                    Some(Ok(Message::Text(t))) => feed(split.pieces(t.as_bytes()), out, err, relay, sink),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break How::Closed,
                    Some(Ok(_)) => {}
                },
                _ = tokio::time::sleep_until(next_check), if recorded.is_none() => {
                    next_check = Instant::now() + CHECK_EVERY;
                    recorded = self.recorded_exit(at.id, at.sid, at.token).await?;
                    if recorded.is_some() && log_grace.is_none() {
                        log_grace = Some(Instant::now() + LOG_GRACE);
                    }
                }
                // Stopping, the kill's grace alone bounds the log.
                _ = sleep_until(log_grace), if log_grace.is_some() && sup.stop().is_none() => break How::Unended,
                i = sup.next() => match i {
                    Intervention::Stop(_) => {
                        killed = self.kill_group(at.id, at.token).await?;
                        sup.killed();
                    }
                    Intervention::GraceOver => break How::GraceOver,
                },
            }
            if out.code().is_some() && err.code().is_some() {
                break How::EndLines;
            }
        };
        Ok(Watched {
            how,
            stopped: sup.stop().is_some().then(|| (sup.timed_out(), killed)),
            recorded,
        })
    }
}
