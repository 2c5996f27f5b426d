//! An asciicast v2 recorder (<https://docs.asciinema.org/manual/asciicast/v2>).
//!
//! The file is NDJSON: a header object on the first line, then one event
//! `[seconds_since_start, code, data]` per line, with code `o` (output),
//! `i` (input), `r` (resize, data `"COLSxROWS"`) or `m` (marker). Events go
//! straight to a buffered file; call [`AsciicastWriter::flush`] after each
//! batch so the stream on disk is never far behind.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::Instant;

use serde::Serialize;

use super::screen_redact::ScreenRedactor;
use crate::secrets::{Redactor, StreamRedactor};

/// The header line of a recording.
#[derive(Debug, Clone, Serialize)]
pub struct Header {
    /// Always 2.
    pub version: u8,
    pub width: u16,
    pub height: u16,
    /// Unix time (seconds) the recording started.
    pub timestamp: u64,
    /// Environment of interest; asciinema reads `TERM` (and `SHELL`).
    pub env: std::collections::BTreeMap<String, String>,
    /// The recorded command line.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

impl Header {
    /// A header stamped with the current time.
    pub fn new(width: u16, height: u16, term: &str, command: Option<String>) -> Self {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        Header {
            version: 2,
            width,
            height,
            timestamp,
            env: [("TERM".to_string(), term.to_string())].into(),
            command,
            title: None,
        }
    }
}

/// Turns a byte stream into valid UTF-8 text, holding back an incomplete
/// trailing sequence until the next chunk (invalid bytes become U+FFFD).
#[derive(Default, Debug)]
struct Utf8Stream {
    pending: Vec<u8>,
}

impl Utf8Stream {
    fn decode(&mut self, bytes: &[u8]) -> String {
        let mut buf = std::mem::take(&mut self.pending);
        buf.extend_from_slice(bytes);
        let mut out = String::with_capacity(buf.len());
        let mut rest = &buf[..];
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    break;
                }
                Err(e) => {
                    let (valid, after) = rest.split_at(e.valid_up_to());
                    // SAFETY-free: `valid` was just checked by from_utf8.
                    out.push_str(std::str::from_utf8(valid).unwrap_or_default());
                    match e.error_len() {
                        Some(n) => {
                            out.push('\u{FFFD}');
                            rest = &after[n..];
                        }
                        None => {
                            self.pending = after.to_vec();
                            break;
                        }
                    }
                }
            }
        }
        out
    }
}

/// Writes an asciicast v2 file as events happen.
#[derive(Debug)]
pub struct AsciicastWriter {
    file: BufWriter<File>,
    start: Instant,
    last: f64,
    output: Utf8Stream,
    input: Utf8Stream,
    /// Known secrets never reach the file (output and input streams are
    /// redacted separately, so a secret split across chunks is caught).
    redact_output: StreamRedactor,
    redact_input: StreamRedactor,
    /// With a redactor: the recorded screen, so that a secret drawn from
    /// pieces (Backspace, `\r`) is painted over in the recording too.
    screen: Option<ScreenRedactor>,
    /// The size now (for the screen redactor).
    size: (u16, u16),
}

impl AsciicastWriter {
    /// Create (truncate) `path` and write the header.
    pub fn create(path: &Path, header: &Header) -> io::Result<Self> {
        let file = crate::out_dir::create_file(path)?;
        let mut w = AsciicastWriter {
            file: BufWriter::with_capacity(64 * 1024, file),
            start: Instant::now(),
            last: 0.0,
            output: Utf8Stream::default(),
            input: Utf8Stream::default(),
            redact_output: StreamRedactor::default(),
            redact_input: StreamRedactor::default(),
            screen: None,
            size: (header.width, header.height),
        };
        serde_json::to_writer(&mut w.file, header)?;
        w.file.write_all(b"\n")?;
        w.file.flush()?;
        Ok(w)
    }

    /// Seconds since the recording started; never decreases.
    fn now(&mut self) -> f64 {
        let t = self.start.elapsed().as_secs_f64();
        // Round to microseconds as printed, then keep it monotonic.
        let t = (t * 1e6).round() / 1e6;
        self.last = self.last.max(t);
        self.last
    }

    fn event(&mut self, code: &str, data: &str) -> io::Result<()> {
        let t = self.now();
        write!(self.file, "[{t:.6}, ")?;
        serde_json::to_writer(&mut self.file, code)?;
        self.file.write_all(b", ")?;
        serde_json::to_writer(&mut self.file, data)?;
        self.file.write_all(b"]\n")
    }

    /// Redact every value `redactor` knows (and, via [`Self::add_secret`],
    /// learns later) in everything recorded from now on.
    pub fn redact_with(&mut self, redactor: &Redactor) {
        self.redact_output = StreamRedactor::new(redactor.clone());
        self.redact_input = StreamRedactor::new(redactor.clone());
        let (cols, rows) = self.size;
        self.screen = Some(ScreenRedactor::new(cols, rows, redactor.clone()));
    }

    /// Another secret to redact from now on.
    pub fn add_secret(&mut self, value: &str) {
        self.redact_output.add(value);
        self.redact_input.add(value);
        if let Some(s) = self.screen.as_mut() {
            s.add(value);
        }
    }

    /// Write what the redactors still hold back (the streams ended).
    pub fn end_streams(&mut self) -> io::Result<()> {
        let out = self.redact_output.finish();
        self.output_redacted(&out)?;
        if let Some(mask) = self.screen.as_mut().map(ScreenRedactor::finish) {
            if !mask.is_empty() {
                self.event("o", &mask)?;
            }
        }
        let inp = self.redact_input.finish();
        self.input_redacted(&inp)
    }

    /// Program output. Partial UTF-8 sequences (and possible starts of a
    /// secret) are carried to the next call.
    pub fn output(&mut self, bytes: &[u8]) -> io::Result<()> {
        let bytes = self.redact_output.push(bytes);
        self.output_redacted(&bytes)
    }

    fn output_redacted(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut text = self.output.decode(bytes);
        if text.is_empty() {
            return Ok(());
        }
        // In the same event, so no replay ever shows the screen unmasked.
        if let Some(s) = self.screen.as_mut() {
            let mask = s.after_output(&text);
            text.push_str(&mask);
        }
        self.event("o", &text)
    }

    /// Input sent to the program.
    pub fn input(&mut self, bytes: &[u8]) -> io::Result<()> {
        let bytes = self.redact_input.push(bytes);
        self.input_redacted(&bytes)
    }

    fn input_redacted(&mut self, bytes: &[u8]) -> io::Result<()> {
        let text = self.input.decode(bytes);
        if text.is_empty() {
            return Ok(());
        }
        self.event("i", &text)
    }

    /// The terminal was resized.
    pub fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        self.size = (cols, rows);
        if let Some(s) = self.screen.as_mut() {
            s.resize(cols, rows);
        }
        self.event("r", &format!("{cols}x{rows}"))
    }

    /// A named marker (asciinema shows these as chapter points).
    pub fn marker(&mut self, label: &str) -> io::Result<()> {
        self.event("m", label)
    }

    /// Push buffered events to the file.
    pub fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn utf8_stream_holds_partial_sequences() {
        let mut s = Utf8Stream::default();
        let bytes = "é中".as_bytes();
        assert_eq!(s.decode(&bytes[..1]), "");
        assert_eq!(s.decode(&bytes[1..3]), "é");
        assert_eq!(s.decode(&bytes[3..]), "中");
        assert_eq!(s.decode(b"a\xffb"), "a\u{FFFD}b");
    }

    #[test]
    fn file_is_valid_asciicast_v2() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.cast");
        let header = Header::new(80, 24, "xterm-256color", Some("sh".into()));
        let mut w = AsciicastWriter::create(&path, &header).unwrap();
        w.output(b"hello \xe4").unwrap();
        w.output(b"\xb8\xad\r\n\x1b[1mbold\x1b[0m").unwrap();
        w.input(b"ls\r").unwrap();
        w.resize(100, 30).unwrap();
        w.marker("step 1").unwrap();
        w.flush().unwrap();

        let text = std::fs::read_to_string(&path).unwrap();
        let mut lines = text.lines();
        let head: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(head["version"], 2);
        assert_eq!(head["width"], 80);
        assert_eq!(head["height"], 24);
        assert_eq!(head["env"]["TERM"], "xterm-256color");
        assert_eq!(head["command"], "sh");
        assert!(head["timestamp"].as_u64().unwrap() > 1_600_000_000);

        let events: Vec<Value> = lines.map(|l| serde_json::from_str(l).unwrap()).collect();
        let codes: Vec<&str> = events.iter().map(|e| e[1].as_str().unwrap()).collect();
        assert_eq!(codes, ["o", "o", "i", "r", "m"]);
        assert_eq!(events[0][2], "hello ");
        assert_eq!(events[1][2], "中\r\n\x1b[1mbold\x1b[0m");
        assert_eq!(events[3][2], "100x30");
        assert_eq!(events[4][2], "step 1");
        let times: Vec<f64> = events.iter().map(|e| e[0].as_f64().unwrap()).collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "{times:?}");
    }

    #[test]
    fn secrets_never_reach_the_recording_and_it_still_parses() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rec.cast");
        let mut w = AsciicastWriter::create(&path, &Header::new(80, 24, "xterm", None)).unwrap();
        let mut r = Redactor::default();
        r.add("s3cr3t-value");
        w.redact_with(&r);
        w.input(b"echo s3cr3t-").unwrap();
        w.input(b"value\r").unwrap();
        w.output(b"s3cr3").unwrap();
        w.output(b"t-value\r\n").unwrap();
        w.add_secret("typed-later");
        w.output(b"typed-la").unwrap();
        w.end_streams().unwrap();
        w.flush().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("s3cr3t"), "{text}");
        let events: Vec<Value> = text
            .lines()
            .skip(1)
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let all: String = events.iter().map(|e| e[2].as_str().unwrap()).collect();
        assert!(
            all.contains("echo [REDACTED]\r") && all.contains("[REDACTED]\r\n"),
            "{all}"
        );
        assert!(
            all.ends_with("typed-la"),
            "an unfinished secret is flushed as is: {all}"
        );
    }
}
