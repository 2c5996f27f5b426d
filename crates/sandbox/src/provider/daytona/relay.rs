//! Relaying a command's output to the sink as it arrives (see [`Relay`]).

use super::logs::{EndScan, Logs};
use super::shell_text::{self, Refusal};
use crate::provider::OutputSink;

/// Passes output to the sink as it arrives, holding back stderr while it
/// may still be the wrapper's refusal marker, and keeping the first bytes
/// of output for rfs's own error messages.
pub struct Relay {
    marker: String,
    /// The wrapper's line saying the command starts (stripped).
    start: String,
    holding: bool,
    held: Vec<u8>,
    head: Vec<u8>,
    /// Bytes of cumulative logs already relayed (polling).
    out_seen: usize,
    err_seen: usize,
}

/// How much output is kept for error messages.
const HEAD: usize = 4096;

impl Relay {
    pub fn new(token: &str) -> Self {
        Relay {
            marker: shell_text::marker(token),
            start: shell_text::start_line(token),
            holding: true,
            held: vec![],
            head: vec![],
            out_seen: 0,
            err_seen: 0,
        }
    }

    fn keep_head(&mut self, b: &[u8]) {
        let n = (HEAD - self.head.len().min(HEAD)).min(b.len());
        self.head.extend_from_slice(&b[..n]);
    }

    /// New stdout bytes.
    pub fn stdout(&mut self, b: &[u8], sink: &mut dyn OutputSink) {
        self.keep_head(b);
        sink.stdout(b);
    }

    /// New stderr bytes. Until the wrapper's start line, stderr can only
    /// be the wrapper's (a refusal, held until the end); the start line is
    /// dropped and everything after it is the command's output.
    pub fn stderr(&mut self, b: &[u8], sink: &mut dyn OutputSink) {
        if !self.holding {
            self.keep_head(b);
            sink.stderr(b);
            return;
        }
        self.held.extend_from_slice(b);
        let start = self.start.as_bytes();
        if self.held.starts_with(start) {
            self.held.drain(..start.len());
            self.flush(sink);
            return;
        }
        let n = self.held.len().min(start.len());
        if self.held[..n] == start[..n] {
            // Maybe the start line, not complete yet.
            return;
        }
        let m = self.marker.as_bytes();
        let n = self.held.len().min(m.len());
        if self.held[..n] != m[..n] {
            // Not the wrapper's: everything held is output.
            self.flush(sink);
        }
        // Else the wrapper's refusal line (held until the end).
    }

    /// The new part of cumulative logs (polling).
    pub fn feed(&mut self, logs: &Logs, sink: &mut dyn OutputSink) {
        if logs.stdout.len() > self.out_seen {
            let b = logs.stdout[self.out_seen..].to_vec();
            self.out_seen = logs.stdout.len();
            self.stdout(&b, sink);
        }
        if logs.stderr.len() > self.err_seen {
            let b = logs.stderr[self.err_seen..].to_vec();
            self.err_seen = logs.stderr.len();
            self.stderr(&b, sink);
        }
    }

    /// The wrapper's refusal, if held stderr is one.
    pub fn refusal(&self, token: &str) -> Option<Refusal> {
        if self.holding {
            shell_text::refusal(token, &self.held)
        } else {
            None
        }
    }

    /// Release whatever stderr is held.
    pub fn flush(&mut self, sink: &mut dyn OutputSink) {
        self.holding = false;
        if !self.held.is_empty() {
            let held = std::mem::take(&mut self.held);
            self.keep_head(&held);
            sink.stderr(&held);
        }
    }

    /// The first bytes of output (both streams, as they came).
    pub fn head(&self) -> String {
        String::from_utf8_lossy(&self.head).into_owned()
    }
}

/// Pass stream pieces through the end scanners to the relay.
pub fn feed(
    pieces: Vec<(bool, Vec<u8>)>,
    out: &mut EndScan,
    err: &mut EndScan,
    relay: &mut Relay,
    sink: &mut dyn OutputSink,
) {
    for (is_err, b) in pieces {
        if is_err {
            let b = err.push(&b);
            if !b.is_empty() {
                relay.stderr(&b, sink);
            }
        } else {
            let b = out.push(&b);
            if !b.is_empty() {
                relay.stdout(&b, sink);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::Collect;

    #[test]
    fn relay_holds_back_only_the_wrappers_marker() {
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        r.stdout(b"a", &mut sink);
        r.stderr(b"rfs-day", &mut sink);
        assert_eq!(sink.stderr, b"");
        r.stdout(b"b", &mut sink);
        r.stderr(b"X more", &mut sink);
        assert_eq!(
            (sink.stdout.as_slice(), sink.stderr.as_slice()),
            (&b"ab"[..], &b"rfs-dayX more"[..])
        );
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        r.stderr(b"rfs-daytona:tk:nocwd\n", &mut sink);
        assert!(sink.stderr.is_empty());
        assert_eq!(r.refusal("tk"), Some(Refusal::Cwd));
        r.flush(&mut sink);
        r.stderr(b"warning\n", &mut sink);
        assert_eq!(sink.stderr, b"rfs-daytona:tk:nocwd\nwarning\n");
    }

    #[test]
    fn a_refusal_line_after_the_start_line_is_the_commands_output() {
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        r.stderr(b"rfs-daytona:tk:st", &mut sink);
        assert!(sink.stderr.is_empty());
        r.stderr(b"art\nrfs-daytona:tk:nocwd\n", &mut sink);
        assert_eq!(r.refusal("tk"), None);
        r.flush(&mut sink);
        assert_eq!(sink.stderr, b"rfs-daytona:tk:nocwd\n");
        assert_eq!(r.head(), "rfs-daytona:tk:nocwd\n");
    }

    #[test]
    fn polled_logs_are_relayed_once() {
        let mut sink = Collect::default();
        let mut r = Relay::new("tk");
        let mut logs = Logs {
            stdout: b"one\n".to_vec(),
            stderr: b"e".to_vec(),
        };
        r.feed(&logs, &mut sink);
        logs.stdout.extend_from_slice(b"two\n");
        r.feed(&logs, &mut sink);
        r.flush(&mut sink);
        assert_eq!(sink.stdout, b"one\ntwo\n");
        assert_eq!(sink.stderr, b"e");
    }
}
