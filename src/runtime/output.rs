//! Where a step's output goes: redacted, line by line, to the step's log
//! file in the run's output dir (created on first output), to the reporter (prefixed by step name),
//! and into a bounded in-memory capture (head + tail) returned to the
//! script. A 100 MB output costs at most [`CAPTURE_HEAD`] + [`CAPTURE_TAIL`]
//! bytes of memory per stream.
//!
//! The logs of a run together (steps', spawned processes' and services',
//! both streams) keep at most the run's [`LogBudget`] on this machine's
//! disk (issue #43: a step wrote 600 MB of stderr into the bundle at
//! 45 MB/s, and steps have no default timeout). Past it a command's
//! output is still read — the command is never blocked, it keeps running
//! — but neither logged nor shown: its log ends at the bound, the console
//! says so once, and its journal fact says how much was dropped
//! ([`rfs_evidence::events::OutputCut`]). The in-memory capture (head and tail)
//! still sees everything.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::step_wrapper::{Gate, WrapperRefusal};
use rfs_evidence::events::{Reporter, Stream};
use rfs_evidence::secrets::Redactor;
use rfs_sandbox::provider::OutputSink;

/// Bytes kept from the start of each stream.
pub(crate) const CAPTURE_HEAD: usize = 512 * 1024;
/// Bytes kept from the end of each stream.
pub(crate) const CAPTURE_TAIL: usize = 512 * 1024;
/// A line longer than this is passed on in pieces.
const MAX_LINE: usize = 64 * 1024;

/// The run's bound on the bytes of log it keeps, shared by every sink.
#[derive(Debug)]
pub(crate) struct LogBudget {
    bound: u64,
    set_by: String,
    used: std::sync::atomic::AtomicU64,
}

/// The bound when the person sets none: 256 MiB, as a run's artifacts.
pub(crate) const DEFAULT_MAX_LOG_BYTES: u64 = 256 << 20;

impl LogBudget {
    pub(crate) fn new(bound: u64, set_by: &str) -> Self {
        LogBudget {
            bound,
            set_by: set_by.to_owned(),
            used: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Take up to `n` bytes of the budget; how many were granted.
    fn take(&self, n: u64) -> u64 {
        use std::sync::atomic::Ordering;
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            let grant = n.min(self.bound.saturating_sub(used));
            if grant == 0 {
                return 0;
            }
            match self.used.compare_exchange_weak(
                used,
                used + grant,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return grant,
                Err(now) => used = now,
            }
        }
    }
}

struct StreamOut {
    kind: Stream,
    /// Created on the first output (a silent stream leaves no file).
    log: Option<BufWriter<File>>,
    log_path: PathBuf,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
    line: Vec<u8>,
    error: Option<std::io::Error>,
    /// Bytes not logged: past the run's [`LogBudget`].
    dropped: u64,
}

impl StreamOut {
    fn new(kind: Stream, path: &Path) -> Self {
        StreamOut {
            kind,
            log: None,
            log_path: path.to_path_buf(),
            head: Vec::new(),
            tail: VecDeque::new(),
            total: 0,
            line: Vec::new(),
            error: None,
            dropped: 0,
        }
    }

    /// Log what of `b` the run's budget still allows; the rest is
    /// counted as dropped.
    fn write_log(&mut self, budget: &LogBudget, b: &[u8]) -> std::io::Result<()> {
        let granted = budget.take(b.len() as u64) as usize;
        self.dropped += (b.len() - granted) as u64;
        let b = &b[..granted];
        if b.is_empty() {
            return Ok(());
        }
        if self.log.is_none() {
            self.log = Some(BufWriter::new(rfs_evidence::out_dir::create_file(
                &self.log_path,
            )?));
        }
        self.log.as_mut().expect("created").write_all(b)
    }

    fn keep(&mut self, b: &[u8]) {
        self.total += b.len() as u64;
        let room = CAPTURE_HEAD.saturating_sub(self.head.len());
        let (h, t) = b.split_at(room.min(b.len()));
        self.head.extend_from_slice(h);
        self.tail.extend(t);
        let excess = self.tail.len().saturating_sub(CAPTURE_TAIL);
        self.tail.drain(..excess);
    }

    fn captured(&self) -> String {
        let kept = (self.head.len() + self.tail.len()) as u64;
        let mut v = self.head.clone();
        if self.total > kept && self.dropped == 0 {
            v.extend_from_slice(
                format!(
                    "\n[rfs: {} bytes elided; the full output is in {}]\n",
                    self.total - kept,
                    self.log_path.display()
                )
                .as_bytes(),
            );
        } else if self.total > kept {
            v.extend_from_slice(
                format!(
                    "\n[rfs: {} bytes elided; {} keeps the output up to the run's log bound, {} bytes past it were not kept]\n",
                    self.total - kept,
                    self.log_path.display(),
                    self.dropped
                )
                .as_bytes(),
            );
        }
        v.extend(self.tail.iter());
        String::from_utf8_lossy(&v).into_owned()
    }
}

/// What a finished sink kept.
pub(crate) struct Finished {
    pub(crate) stdout: String,
    pub(crate) stderr: String,
    /// Whether each log file (stdout, stderr) was written.
    pub(crate) logged: [bool; 2],
    /// What was not kept, past the run's log bound.
    pub(crate) cut: Option<rfs_evidence::events::OutputCut>,
}

/// The sink a step's attempt writes into.
pub(crate) struct StepSink {
    name: String,
    /// Reads the in-sandbox wrapper's signals off stderr (held back from
    /// logs and console); taken by [`StepSink::close_wrapper`].
    gate: Option<Gate>,
    redactor: Redactor,
    reporter: Arc<dyn Reporter>,
    out: StreamOut,
    err: StreamOut,
    /// Sees every line as it is logged (redacted): a background process's
    /// waiters ([`super::spawn`]).
    tap: Option<LineTap>,
    budget: Arc<LogBudget>,
}

/// A receiver of a sink's lines, as they are logged (redacted).
pub(crate) type LineTap = Arc<dyn Fn(Stream, &str) + Send + Sync>;

impl StepSink {
    /// Logs go to `<dir>/<stem>.stdout.log` and `<dir>/<stem>.stderr.log`.
    pub(crate) fn new(
        name: &str,
        dir: &Path,
        stem: &str,
        nonce: &str,
        redactor: Redactor,
        reporter: Arc<dyn Reporter>,
        budget: Arc<LogBudget>,
    ) -> Self {
        StepSink {
            budget,
            name: name.to_owned(),
            gate: Some(Gate::new(nonce)),
            redactor,
            reporter,
            out: StreamOut::new(Stream::Stdout, &dir.join(format!("{stem}.stdout.log"))),
            err: StreamOut::new(Stream::Stderr, &dir.join(format!("{stem}.stderr.log"))),
            tap: None,
        }
    }

    /// The same sink for a command that runs without rfs's in-sandbox
    /// wrapper (a service's container): nothing on stderr is held back.
    pub(crate) fn without_wrapper(mut self) -> Self {
        self.gate = None;
        self
    }

    /// The same sink, every line also handed to `tap`.
    pub(crate) fn with_tap(mut self, tap: LineTap) -> Self {
        self.tap = Some(tap);
        self
    }

    fn feed(&mut self, which: Stream, chunk: &[u8]) {
        let s = match which {
            Stream::Stdout => &mut self.out,
            Stream::Stderr => &mut self.err,
        };
        s.line.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(nl) = s.line[start..].iter().position(|b| *b == b'\n') {
            let end = start + nl + 1;
            let line = s.line[start..end].to_vec();
            emit_line(
                &self.name,
                &self.redactor,
                &*self.reporter,
                self.tap.as_ref(),
                &self.budget,
                s,
                &line,
            );
            start = end;
        }
        s.line.drain(..start);
        if s.line.len() > MAX_LINE {
            let line = std::mem::take(&mut s.line);
            emit_line(
                &self.name,
                &self.redactor,
                &*self.reporter,
                self.tap.as_ref(),
                &self.budget,
                s,
                &line,
            );
        }
    }

    /// Flush partial lines and the logs; returns what of the output was
    /// not kept (past the run's log bound).
    pub(crate) fn finish(self) -> std::io::Result<Option<rfs_evidence::events::OutputCut>> {
        self.finish_logged().map(|f| f.cut)
    }

    /// [`StepSink::finish`], with the (stdout, stderr) captures and
    /// whether each log file was written (a silent stream leaves none).
    pub(crate) fn finish_logged(mut self) -> std::io::Result<Finished> {
        for s in [&mut self.out, &mut self.err] {
            if !s.line.is_empty() {
                let line = std::mem::take(&mut s.line);
                emit_line(
                    &self.name,
                    &self.redactor,
                    &*self.reporter,
                    self.tap.as_ref(),
                    &self.budget,
                    s,
                    &line,
                );
            }
            if let Some(log) = s.log.as_mut() {
                log.flush()?;
            }
            if let Some(e) = s.error.take() {
                return Err(e);
            }
        }
        let dropped = self.out.dropped + self.err.dropped;
        Ok(Finished {
            stdout: self.out.captured(),
            stderr: self.err.captured(),
            logged: [self.out.log.is_some(), self.err.log.is_some()],
            cut: (dropped > 0).then(|| rfs_evidence::events::OutputCut {
                bound_bytes: self.budget.bound,
                set_by: self.budget.set_by.clone(),
                bytes_dropped: dropped,
            }),
        })
    }

    /// Once the command ended with `exit`: what the in-sandbox wrapper
    /// refused, if it did (the command never started). Stderr the gate
    /// still held is the command's and is passed on.
    pub(crate) fn close_wrapper(&mut self, exit: Option<i32>) -> Option<WrapperRefusal> {
        match self.gate.take()?.finish(exit) {
            Ok(held) => {
                if !held.is_empty() {
                    self.feed(Stream::Stderr, &held);
                }
                None
            }
            Err(r) => Some(r),
        }
    }
}

fn emit_line(
    name: &str,
    r: &Redactor,
    rep: &dyn Reporter,
    tap: Option<&LineTap>,
    budget: &LogBudget,
    s: &mut StreamOut,
    raw: &[u8],
) {
    let red = r.redact(raw);
    let was_dropping = s.dropped > 0;
    if let Err(e) = s.write_log(budget, &red) {
        s.error.get_or_insert(e);
    }
    s.keep(&red);
    let text = String::from_utf8_lossy(&red);
    if s.dropped == 0 {
        rep.output(name, s.kind, text.trim_end_matches('\n'));
    } else if !was_dropping {
        rep.warning(&format!(
            "`{name}`: its {} is cut: the run's logs reached their bound of {} ({}); the command keeps running, what it prints past the bound is neither kept nor shown",
            match s.kind {
                Stream::Stdout => "stdout",
                Stream::Stderr => "stderr",
            },
            rfs_sandbox::provider::limits::show_bytes(budget.bound),
            budget.set_by
        ));
    }
    if let Some(tap) = tap {
        tap(s.kind, text.trim_end_matches('\n'));
    }
}

impl OutputSink for StepSink {
    fn stdout(&mut self, chunk: &[u8]) {
        self.feed(Stream::Stdout, chunk);
    }
    fn stderr(&mut self, chunk: &[u8]) {
        // The wrapper's signal lines are rfs's own, not the command's.
        let mine = match self.gate.as_mut() {
            Some(g) => g.stderr(chunk),
            None => chunk.to_vec(),
        };
        if !mine.is_empty() {
            self.feed(Stream::Stderr, &mine);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression (issue #43): every log a run kept was whole; the logs of
    /// a run now share one bound, each cut where the bound is reached,
    /// and each sink says how much of its output was not kept.
    #[test]
    fn a_runs_logs_together_stop_at_its_bound_and_say_what_was_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let budget = Arc::new(LogBudget::new(1000, "the test"));
        let sink = |stem: &str| {
            StepSink::new(
                stem,
                dir.path(),
                stem,
                "nonce",
                Redactor::default(),
                Arc::new(rfs_evidence::events::Silent),
                budget.clone(),
            )
            .without_wrapper()
        };
        let mut first = sink("first");
        first.stdout(b"0123456789\n");
        first.stderr(&[b'x'; 1500]);
        let first = first.finish_logged().unwrap();
        let mut second = sink("second");
        second.stdout(b"hello\n");
        let second = second.finish_logged().unwrap();
        let size = |f: &str| std::fs::metadata(dir.path().join(f)).map(|m| m.len());
        assert_eq!(size("first.stdout.log").unwrap(), 11);
        assert_eq!(size("first.stderr.log").unwrap(), 989);
        assert!(size("second.stdout.log").is_err());
        assert_eq!(second.logged, [false, false]);
        let cut = first.cut.unwrap();
        assert_eq!(
            (cut.bound_bytes, cut.bytes_dropped, cut.set_by.as_str()),
            (1000, 511, "the test")
        );
        assert_eq!(second.cut.unwrap().bytes_dropped, 6);
        // What the script gets still has everything it would have.
        assert_eq!(first.stderr.len(), 1500);
        assert!(second.stdout.contains("hello"));
    }
}
