//! The last lines a proof printed, kept while it runs so that a failure
//! in the suite's summary shows them without opening its bundle.

use std::collections::VecDeque;
use std::sync::Mutex;

use crate::events::{Event, Reporter, Stream};

/// How many lines are kept.
pub(crate) const LINES: usize = 15;
/// The longest line kept, in characters.
const WIDTH: usize = 240;

/// A [`Reporter`] that keeps the last [`LINES`] lines of step output
/// and of the script's prints.
#[derive(Debug, Default)]
pub(crate) struct Tail {
    lines: Mutex<VecDeque<String>>,
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

    fn push(&self, line: String) {
        let mut l = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        if l.len() == LINES {
            l.pop_front();
        }
        let mut line: String = crate::journal::markdown::strip_ansi(&line);
        if line.chars().count() > WIDTH {
            line = line.chars().take(WIDTH).collect::<String>() + "…";
        }
        l.push_back(line);
    }
}

impl Reporter for Tail {
    fn event(&self, event: &Event) {
        if let Event::Print { text } = event {
            self.push(format!("print: {text}"));
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
