//! Where a step's output goes: redacted, line by line, to the step's log
//! file in the run's output dir (created on first output), to the reporter (prefixed by step name),
//! and into a bounded in-memory capture (head + tail) returned to the
//! script. A 100 MB output costs at most [`CAPTURE_HEAD`] + [`CAPTURE_TAIL`]
//! bytes of memory per stream.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::step_wrapper::{Gate, WrapperRefusal};
use crate::events::{Reporter, Stream};
use crate::provider::OutputSink;
use crate::secrets::Redactor;

/// Bytes kept from the start of each stream.
pub(crate) const CAPTURE_HEAD: usize = 512 * 1024;
/// Bytes kept from the end of each stream.
pub(crate) const CAPTURE_TAIL: usize = 512 * 1024;
/// A line longer than this is passed on in pieces.
const MAX_LINE: usize = 64 * 1024;

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
        }
    }

    fn write_log(&mut self, b: &[u8]) -> std::io::Result<()> {
        if self.log.is_none() {
            self.log = Some(BufWriter::new(crate::out_dir::create_file(&self.log_path)?));
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
        if self.total > kept {
            v.extend_from_slice(
                format!(
                    "\n[rfs: {} bytes elided; the full output is in {}]\n",
                    self.total - kept,
                    self.log_path.display()
                )
                .as_bytes(),
            );
        }
        v.extend(self.tail.iter());
        String::from_utf8_lossy(&v).into_owned()
    }
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
    ) -> Self {
        StepSink {
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
                s,
                &line,
            );
        }
    }

    /// Flush partial lines and the logs; returns the (stdout, stderr)
    /// captures.
    pub(crate) fn finish(self) -> std::io::Result<(String, String)> {
        self.finish_logged().map(|(out, err, _)| (out, err))
    }

    /// [`StepSink::finish`], and whether each log file (stdout, stderr)
    /// was written (a silent stream leaves none).
    pub(crate) fn finish_logged(mut self) -> std::io::Result<(String, String, [bool; 2])> {
        for s in [&mut self.out, &mut self.err] {
            if !s.line.is_empty() {
                let line = std::mem::take(&mut s.line);
                emit_line(
                    &self.name,
                    &self.redactor,
                    &*self.reporter,
                    self.tap.as_ref(),
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
        let logged = [self.out.log.is_some(), self.err.log.is_some()];
        Ok((self.out.captured(), self.err.captured(), logged))
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
    s: &mut StreamOut,
    raw: &[u8],
) {
    let red = r.redact(raw);
    if let Err(e) = s.write_log(&red) {
        s.error.get_or_insert(e);
    }
    s.keep(&red);
    let text = String::from_utf8_lossy(&red);
    rep.output(name, s.kind, text.trim_end_matches('\n'));
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
