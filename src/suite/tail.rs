//! The last lines a proof printed, kept while it runs so that a failure
//! in the suite's summary shows them without opening its bundle.

use std::collections::VecDeque;
use std::sync::Mutex;

use rfs_evidence::events::{Event, Reporter, Stream};

/// How many lines are kept.
pub(crate) const LINES: usize = 15;
/// The longest line kept, in characters.
const WIDTH: usize = 240;

/// A [`Reporter`] that keeps the last [`LINES`] lines of step output
/// and of the script's prints.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    lines: Mutex<VecDeque<String>>,
    /// `--allow-dirty` shipped a working tree: the proof's evidence is
    /// not reproducible from a commit.
    working_tree: std::sync::atomic::AtomicBool,
    /// The run used a cache kept between runs, or its sandbox forked a
    /// setup's checkpoint that had: not reproducible from a commit.
    cache: std::sync::atomic::AtomicBool,
}

impl Tail {
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// Whether the run is not reproducible from its commit alone: it
    /// shipped a working tree (`--allow-dirty`), used a cache, or forked
    /// a setup that used one.
    pub(crate) fn not_reproducible(&self) -> bool {
        self.working_tree.load(std::sync::atomic::Ordering::Relaxed)
            || self.cache.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn push(&self, line: String) {
        let mut l = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if l.len() == LINES {
            l.pop_front();
        }
        let mut line: String = rfs_evidence::journal::inert_markdown::strip_ansi(&line);
        if line.chars().count() > WIDTH {
            line = line.chars().take(WIDTH).collect::<String>() + "…";
        }
        l.push_back(line);
    }
}

impl Reporter for Tail {
    fn event(&self, event: &Event) {
        match event {
            Event::Print { text } => self.push(format!("print: {text}")),
            Event::SourceResolved {
                working_tree: Some(_),
                ..
            } => self
                .working_tree
                .store(true, std::sync::atomic::Ordering::Relaxed),
            Event::CacheMount { .. } => {
                self.cache.store(true, std::sync::atomic::Ordering::Relaxed)
            }
            Event::PlacementForked(f) if !f.setup_caches.is_empty() => {
                self.cache.store(true, std::sync::atomic::Ordering::Relaxed)
            }
            _ => {}
        }
    }

    fn output(&self, step: &str, stream: Stream, line: &str) {
        let tag = match stream {
            Stream::Stdout => "",
            Stream::Stderr => " stderr",
        };
        self.push(format!("[{step}{tag}] {line}"));
    }
}
