//! Following a session command's output: the toolbox's
//! `…/logs?follow=true` WebSocket streams the multiplexed log as it grows
//! (frames of `\x01\x01\x01` stdout / `\x02\x02\x02` stderr lines). The
//! command prints end lines with its exit code on both streams (see
//! [`super::logs::end_lines`]): once both are in, the step is over and rfs
//! closes the stream itself. The daemon would close it only about a
//! second after the last output (it looks for the exit code after 50
//! empty reads 20 ms apart: apps/daemon/internal/util/log_reader.go).
//! Without end lines (a stream that closes first) rfs reads the exit code
//! once. No output is fetched twice. While following (the watch loop is
//! [`super::log_watch`]'s), rfs asks periodically for the exit status the wrapper records in `/tmp` when
//! the command removed the toolbox's session directory, whose log then
//! never ends.

use std::time::Duration;

use tokio::time::Instant;

use super::http::enc;
use super::log_watch::{note_unended, How, Pieces, Watching, LOG_GRACE};
use super::logs::{EndScan, StreamDemux};
use super::relay::{feed, Relay};
use super::ws::Ws;
use super::Api;
use crate::provider::{ExecRequest, OutputSink, ProviderResult};

/// Which command: toolbox base, sandbox, session, command id, wrapper token.
#[derive(Clone, Copy)]
pub struct Target<'a> {
    pub base: &'a str,
    pub id: &'a str,
    pub sid: &'a str,
    pub cmd: &'a str,
    pub token: &'a str,
}

impl<'a> Target<'a> {
    /// (base, id, sid, cmd, token).
    #[allow(clippy::type_complexity)]
    pub fn parts(&self) -> (&'a str, &'a str, &'a str, &'a str, &'a str) {
        (self.base, self.id, self.sid, self.cmd, self.token)
    }
}

/// How a followed command ended.
pub enum Followed {
    /// The command ended (exit code, if the toolbox gave one).
    Ended(Option<i32>),
    /// rfs stopped it (timeout: `true`) and whether a group was killed.
    Stopped { timed_out: bool, killed: bool },
}

impl Api {
    /// Open the follow stream of a session command; `None` when the
    /// server does not follow (the caller polls instead).
    pub async fn open_follow(&self, base: &str, id: &str, sid: &str, cmd: &str) -> Option<Ws> {
        let url = format!(
            "{base}/process/session/{}/command/{}/logs?follow=true",
            enc(sid),
            enc(cmd)
        );
        self.ws_connect("follow command output", id, &url)
            .await
            .ok()
    }

    /// Relay a followed command's output into `sink` until it ends or
    /// rfs stops it.
    pub async fn follow_command(
        &self,
        mut ws: Ws,
        at: Target<'_>,
        req: &ExecRequest,
        relay: &mut Relay,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<Followed> {
        let (base, id, sid, cmd, token) = at.parts();
        let mut demux = StreamDemux::default();
        let (mut out, mut err) = (EndScan::new(token), EndScan::new(token));
        let w = self
            .watch_log(
                &mut ws,
                &mut demux,
                Watching { id, sid, token },
                req,
                (&mut out, &mut err),
                relay,
                sink,
            )
            .await?;
        feed(demux.finish(), &mut out, &mut err, relay, sink);
        let _ = ws.close(None).await;
        if let Some((timed_out, killed)) = w.stopped {
            return Ok(Followed::Stopped { timed_out, killed });
        }
        let recorded = w.recorded;
        if matches!(w.how, How::Unended | How::GraceOver) {
            // A log held open by a process the command left running ends
            // the step as on every provider, without a note; a log the
            // command removed is said.
            note_unended(recorded, relay, sink);
            return Ok(Followed::Ended(recorded.map(|r| r.code)));
        }
        if let (Some(code), Some(_)) = (out.code(), err.code()) {
            return Ok(Followed::Ended(Some(code)));
        }
        // The stream closes once the exit code is in; a server that closed
        // early gets a few more reads (bounded) before the recorded status.
        let end = Instant::now() + LOG_GRACE;
        loop {
            if let Some(code) = self.status(base, id, sid, cmd).await? {
                return Ok(Followed::Ended(Some(code)));
            }
            if Instant::now() >= end {
                // The log ended with the command: the toolbox's status is
                // the one that counts; the wrapper's own record only where
                // the command removed the toolbox's session (never to
                // stand in for a status the toolbox lost).
                let recorded = match recorded {
                    Some(r) => Some(r),
                    None => self.recorded_exit(id, sid, token).await?,
                };
                return Ok(Followed::Ended(
                    recorded.filter(|r| !r.log_kept).map(|r| r.code),
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Pieces for StreamDemux {
    fn pieces(&mut self, frame: &[u8]) -> Vec<(bool, Vec<u8>)> {
        self.push(frame)
    }
}
