//! The one supervisor of a running command, for every provider: its
//! timeout, the run's interrupt, and the grace period after a kill. A
//! provider's wait loop selects on its own sources (output, exit, polls)
//! and on [`Supervisor::next`], which says when to intervene
//! ([`Intervention`]); the provider does the kill its own way (a signal
//! to a local group, the shared kill script in a container or a remote
//! sandbox) and tells the supervisor with [`Supervisor::killed`].

use std::time::Duration;

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{sleep_until, ExecRequest};

/// Why a command is being stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// Its timeout passed.
    Timeout,
    /// The run was interrupted.
    Cancel,
}

/// What the supervisor asks the provider to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intervention {
    /// Stop the command (the first time only): kill it.
    Stop(Stop),
    /// The grace after the last kill is over: the command (or what holds
    /// its output) did not end; the provider kills again or stops waiting.
    GraceOver,
}

/// The timers and the stop decision of one command.
#[derive(Debug)]
pub struct Supervisor {
    deadline: Option<Instant>,
    cancel: CancellationToken,
    kill_grace: Duration,
    stop: Option<Stop>,
    grace: Option<Instant>,
    kills: u32,
}

impl Supervisor {
    /// Supervise the command of `req` (its timeout and cancellation),
    /// allowing `kill_grace` after each kill.
    pub fn new(req: &ExecRequest, kill_grace: Duration) -> Supervisor {
        Supervisor {
            deadline: req.timeout.map(|t| Instant::now() + t),
            cancel: req.cancel.clone(),
            kill_grace,
            stop: None,
            grace: None,
            kills: 0,
        }
    }

    /// The next intervention; pending while there is none to make (cancel
    /// safe: a select that drops it loses nothing).
    pub async fn next(&mut self) -> Intervention {
        let stopping = self.stop.is_some();
        tokio::select! {
            _ = sleep_until(self.deadline), if !stopping => {
                self.stop = Some(Stop::Timeout);
                Intervention::Stop(Stop::Timeout)
            }
            _ = self.cancel.cancelled(), if !stopping => {
                self.stop = Some(Stop::Cancel);
                Intervention::Stop(Stop::Cancel)
            }
            _ = sleep_until(self.grace), if self.grace.is_some() => {
                self.grace = None;
                Intervention::GraceOver
            }
            else => std::future::pending().await,
        }
    }

    /// A kill was sent: the grace period starts (again).
    pub fn killed(&mut self) {
        self.kills += 1;
        self.grace = Some(Instant::now() + self.kill_grace);
    }

    /// How many kills were sent.
    pub fn kills(&self) -> u32 {
        self.kills
    }

    /// Why the command is being stopped, if it is.
    pub fn stop(&self) -> Option<Stop> {
        self.stop
    }

    /// Whether the command is being stopped for its timeout.
    pub fn timed_out(&self) -> bool {
        self.stop == Some(Stop::Timeout)
    }

    /// Whether the command is being stopped for an interrupt.
    pub fn cancelled(&self) -> bool {
        self.stop == Some(Stop::Cancel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(timeout: Option<Duration>) -> ExecRequest {
        ExecRequest {
            argv: vec!["true".into()],
            cwd: "/".into(),
            env: vec![],
            timeout,
            cancel: CancellationToken::new(),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_stops_once_then_grace_ends_after_each_kill() {
        let mut s = Supervisor::new(&req(Some(Duration::from_secs(3))), Duration::from_secs(5));
        let t = Instant::now();
        assert_eq!(s.next().await, Intervention::Stop(Stop::Timeout));
        assert_eq!(t.elapsed(), Duration::from_secs(3));
        assert!(s.timed_out() && !s.cancelled());
        s.killed();
        assert_eq!(s.next().await, Intervention::GraceOver);
        assert_eq!(t.elapsed(), Duration::from_secs(8));
        s.killed();
        assert_eq!(s.next().await, Intervention::GraceOver);
        assert_eq!(s.kills(), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn an_interrupt_stops_as_cancel_and_nothing_else_is_pending() {
        let r = req(None);
        let mut s = Supervisor::new(&r, Duration::from_secs(5));
        r.cancel.cancel();
        assert_eq!(s.next().await, Intervention::Stop(Stop::Cancel));
        assert_eq!(s.stop(), Some(Stop::Cancel));
        // Stopping, not killed yet: no timer runs.
        let waited = tokio::time::timeout(Duration::from_secs(3600), s.next()).await;
        assert!(waited.is_err());
    }
}
