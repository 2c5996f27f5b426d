//! Where a command's output goes as it arrives ([`OutputSink`]): kept
//! whole for rfs's own small commands ([`Collect`]), or kept up to a
//! bound that is said when passed ([`BoundedCollect`]) for anything a
//! sandbox could make endless.

use tokio_util::sync::CancellationToken;

use super::ProviderError;

/// Receives a command's output as it arrives.
pub trait OutputSink: Send {
    fn stdout(&mut self, chunk: &[u8]);
    fn stderr(&mut self, chunk: &[u8]);
}

/// A sink that keeps everything in memory; for small internal commands only.
#[derive(Default, Debug)]
pub struct Collect {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

impl OutputSink for Collect {
    fn stdout(&mut self, chunk: &[u8]) {
        self.stdout.extend_from_slice(chunk);
    }
    fn stderr(&mut self, chunk: &[u8]) {
        self.stderr.extend_from_slice(chunk);
    }
}

/// The most rfs reads of each output stream of a probe it runs in a
/// sandbox (a command whose answer is a line or two).
pub const PROBE_OUTPUT: usize = 64 * 1024;

/// The most rfs reads of a listing or report of a synced tree a sandbox
/// sends (the source verifier's report, a re-sync's listing): a line per
/// entry, so far more than any tree rfs syncs needs.
pub const TREE_REPORT_OUTPUT: usize = 256 << 20;

/// The most rfs reads of such a command's stderr (a tool may warn once
/// per entry).
pub const TREE_REPORT_STDERR: usize = 16 << 20;

/// A [`Collect`] that keeps at most `max_stdout` and `max_stderr` bytes
/// of a command's output: past either it keeps nothing more, records
/// which bound was passed and cancels `stop` (the command's cancellation,
/// so the provider kills it instead of streaming on).
#[derive(Debug)]
pub struct BoundedCollect {
    pub out: Collect,
    max_stdout: usize,
    max_stderr: usize,
    stop: CancellationToken,
    passed: Option<(&'static str, usize)>,
}

impl BoundedCollect {
    pub fn new(max_stdout: usize, max_stderr: usize, stop: CancellationToken) -> Self {
        BoundedCollect {
            out: Collect::default(),
            max_stdout,
            max_stderr,
            stop,
            passed: None,
        }
    }

    /// The stream (`stdout`, `stderr`) whose bound was passed, and that
    /// bound; `None` while within both.
    pub fn passed(&self) -> Option<(&'static str, usize)> {
        self.passed
    }

    /// The error of `helper` when a bound was passed.
    pub fn error(&self, helper: &str) -> Option<ProviderError> {
        self.passed
            .map(|(stream, bound)| ProviderError::OutputBound {
                helper: helper.to_owned(),
                stream,
                bound: bound as u64,
            })
    }

    fn keep(
        buf: &mut Vec<u8>,
        chunk: &[u8],
        max: usize,
        name: &'static str,
        passed: &mut Option<(&'static str, usize)>,
        stop: &CancellationToken,
    ) {
        if passed.is_some() {
            return;
        }
        if buf.len() + chunk.len() > max {
            *passed = Some((name, max));
            stop.cancel();
            return;
        }
        buf.extend_from_slice(chunk);
    }
}

impl OutputSink for BoundedCollect {
    fn stdout(&mut self, chunk: &[u8]) {
        let max = self.max_stdout;
        Self::keep(
            &mut self.out.stdout,
            chunk,
            max,
            "stdout",
            &mut self.passed,
            &self.stop,
        );
    }
    fn stderr(&mut self, chunk: &[u8]) {
        let max = self.max_stderr;
        Self::keep(
            &mut self.out.stderr,
            chunk,
            max,
            "stderr",
            &mut self.passed,
            &self.stop,
        );
    }
}
