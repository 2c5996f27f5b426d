//! Replaying a recording (asciicast v2, as [`super::asciicast`] writes
//! it) through the emulator, to see the screens a session showed: the one
//! each `assert_screen` saw, the last, and frames for a player.

use std::collections::BTreeMap;

use super::styled::StyledScreen;
use super::{AlacrittyEmulator, Emulator};

use super::MAX_SIDE;

/// One event of a recording.
#[derive(Debug, Clone, PartialEq)]
enum Event {
    Output(f64, String),
    Resize(u16, u16),
    Marker(String),
}

/// A recording read back: its size and its events.
#[derive(Debug, Clone)]
pub struct Recording {
    cols: u16,
    rows: u16,
    events: Vec<Event>,
}

/// The screen an assertion saw, as far as the recording shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AssertScreen {
    /// A screen whose digest is the journaled one.
    Matched(StyledScreen),
    /// No screen after the assertion's marker had the journaled digest
    /// (the recording was redacted, or cut): the last one before the next
    /// marker.
    NotFound(StyledScreen),
}

/// What a session showed.
#[derive(Debug, Clone)]
pub struct Replayed {
    /// By assertion number.
    pub at_assert: BTreeMap<u32, AssertScreen>,
    /// The screen when the recording ends.
    pub last: StyledScreen,
    /// (seconds, screen), at least `interval` apart, at most `max` (the
    /// last screen always among them).
    pub frames: Vec<(f64, StyledScreen)>,
}

impl Recording {
    /// Parse `text` (a header line, then one event per line). A last line
    /// cut short (a run killed mid-write) is left out; anything else that
    /// does not parse is an error.
    pub fn parse(text: &str) -> Result<Recording, String> {
        let mut lines = text.split_terminator('\n');
        let header: serde_json::Value = lines
            .next()
            .and_then(|l| serde_json::from_str(l).ok())
            .ok_or("the recording has no asciicast header")?;
        let size = |k: &str| {
            header[k]
                .as_u64()
                .and_then(|v| u16::try_from(v).ok())
                .filter(|v| (1..=MAX_SIDE).contains(v))
                .ok_or(format!(
                    "the recording's header has no valid {k} (1 to {MAX_SIDE})"
                ))
        };
        let (cols, rows) = (size("width")?, size("height")?);
        let lines: Vec<&str> = lines.collect();
        let cut = !text.ends_with('\n');
        let mut events = vec![];
        for (i, line) in lines.iter().enumerate() {
            let v: serde_json::Value = match serde_json::from_str(line) {
                Ok(v) => v,
                Err(_) if cut && i + 1 == lines.len() => break,
                Err(e) => return Err(format!("line {} of the recording: {e}", i + 2)),
            };
            let (t, code, data) = (v[0].as_f64(), v[1].as_str(), v[2].as_str());
            match (t, code, data) {
                (Some(t), Some("o"), Some(d)) => events.push(Event::Output(t, d.to_owned())),
                (Some(_), Some("r"), Some(d)) => {
                    if let Some((c, r)) = d.split_once('x') {
                        match (c.parse::<u16>(), r.parse::<u16>()) {
                            (Ok(c @ 1..=MAX_SIDE), Ok(r @ 1..=MAX_SIDE)) => {
                                events.push(Event::Resize(c, r))
                            }
                            _ => {
                                return Err(format!(
                                    "line {} of the recording resizes to {d}",
                                    i + 2
                                ))
                            }
                        }
                    }
                }
                (Some(_), Some("m"), Some(d)) => events.push(Event::Marker(d.to_owned())),
                (Some(_), Some(_), Some(_)) => {}
                _ => return Err(format!("line {} of the recording is not an event", i + 2)),
            }
        }
        Ok(Recording { cols, rows, events })
    }

    /// The largest screen (cells) the recording shows.
    pub fn max_area(&self) -> u64 {
        let area = |c: u16, r: u16| u64::from(c) * u64::from(r);
        self.events
            .iter()
            .filter_map(|e| match e {
                Event::Resize(c, r) => Some(area(*c, *r)),
                _ => None,
            })
            .chain([area(self.cols, self.rows)])
            .max()
            .unwrap_or(1)
    }

    /// What replaying costs, in cell operations at most: every byte (and
    /// every event) may touch the whole screen (`ESC [ 2 J` clears it in
    /// 4 bytes), and every output event while an assertion waits hashes
    /// it.
    pub fn cost(&self) -> u64 {
        let bytes: u64 = self
            .events
            .iter()
            .map(|e| match e {
                Event::Output(_, d) => d.len() as u64 + 1,
                _ => 1,
            })
            .sum();
        bytes.saturating_mul(self.max_area())
    }

    /// The output events a player's frames are taken after: at least
    /// `interval` seconds apart, then at most `max` of them, evenly
    /// spread (chosen from the timestamps, before anything is replayed).
    fn frame_events(&self, interval: f64, max: usize) -> std::collections::BTreeSet<usize> {
        let mut picked = vec![];
        let mut last: Option<f64> = None;
        for (i, e) in self.events.iter().enumerate() {
            if let Event::Output(t, _) = e {
                if last.is_none_or(|l| t - l >= interval) {
                    picked.push(i);
                    last = Some(*t);
                }
            }
        }
        thin(picked, max).into_iter().collect()
    }

    /// Replay the recording: the screen each assertion saw (`digests`:
    /// its journaled screen digest by assertion number), the last screen
    /// and at most `max` frames `interval` seconds apart. `budget` is the
    /// work (cell operations, see [`Recording::cost`]) the caller still
    /// allows; a recording that costs more is not replayed.
    pub fn replay(
        &self,
        digests: &BTreeMap<u32, String>,
        interval: f64,
        max: usize,
        budget: &mut u64,
    ) -> Result<Replayed, String> {
        let cost = self.cost();
        if cost > *budget {
            return Err(format!(
                "it is too large to replay for the report ({} events on a screen of up to {} cells)",
                self.events.len(),
                self.max_area()
            ));
        }
        *budget -= cost;
        let at_frames = self.frame_events(interval, max);
        let mut e = AlacrittyEmulator::new(self.cols, self.rows);
        let mut at_assert = BTreeMap::new();
        let mut pending: Option<u32> = None;
        let mut frames: Vec<(f64, StyledScreen)> = vec![];
        let mut last_t = 0.0;
        let check = |e: &AlacrittyEmulator,
                     pending: &mut Option<u32>,
                     at: &mut BTreeMap<u32, AssertScreen>| {
            if let Some(k) = *pending {
                if digests.get(&k) == Some(&e.snapshot().digest()) {
                    at.insert(k, AssertScreen::Matched(e.styled()));
                    *pending = None;
                }
            }
        };
        for (i, ev) in self.events.iter().enumerate() {
            match ev {
                Event::Output(t, data) => {
                    e.feed(data.as_bytes());
                    let _ = e.take_replies();
                    check(&e, &mut pending, &mut at_assert);
                    last_t = *t;
                    if at_frames.contains(&i) {
                        frames.push((*t, e.styled()));
                    }
                }
                Event::Resize(c, r) => {
                    e.resize(*c, *r);
                    check(&e, &mut pending, &mut at_assert);
                }
                Event::Marker(label) => {
                    if let Some(k) = pending.take() {
                        at_assert.insert(k, AssertScreen::NotFound(e.styled()));
                    }
                    pending = assert_number(label);
                    check(&e, &mut pending, &mut at_assert);
                }
            }
        }
        if let Some(k) = pending {
            at_assert.insert(k, AssertScreen::NotFound(e.styled()));
        }
        let last = e.styled();
        if frames.last().is_none_or(|(_, s)| *s != last) {
            if frames.len() >= max.max(1) {
                frames.pop();
            }
            frames.push((last_t, last.clone()));
        }
        Ok(Replayed {
            at_assert,
            last,
            frames,
        })
    }
}

/// `k` of a marker `assert {k}: …`.
fn assert_number(label: &str) -> Option<u32> {
    label
        .strip_prefix("assert ")?
        .split_once(':')?
        .0
        .parse()
        .ok()
}

/// At most `max` of `frames`, evenly spread, the first and last kept.
fn thin<T>(frames: Vec<T>, max: usize) -> Vec<T> {
    let n = frames.len();
    if n <= max {
        return frames;
    }
    if max < 2 {
        return frames.into_iter().skip(n - max).collect();
    }
    let keep: std::collections::BTreeSet<usize> =
        (0..max).map(|i| i * (n - 1) / (max - 1)).collect();
    frames
        .into_iter()
        .enumerate()
        .filter(|(i, _)| keep.contains(i))
        .map(|(_, f)| f)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::asciicast::{AsciicastWriter, Header};

    fn cast(write: impl FnOnce(&mut AsciicastWriter)) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.cast");
        let mut w = AsciicastWriter::create(&path, &Header::new(20, 3, "xterm", None)).unwrap();
        write(&mut w);
        w.flush().unwrap();
        drop(w);
        std::fs::read_to_string(path).unwrap()
    }

    fn digest_of(bytes: &[u8]) -> String {
        let mut e = AlacrittyEmulator::new(20, 3);
        e.feed(bytes);
        e.snapshot().digest()
    }

    #[test]
    fn each_assertion_finds_the_screen_with_its_digest_after_its_marker() {
        let text = cast(|w| {
            w.output(b"$ ").unwrap();
            w.marker("assert 1: text \"hello\"").unwrap();
            w.output(b"hel").unwrap();
            w.output(b"lo\r\n$ ").unwrap();
            w.marker("assert 2: text \"never\"").unwrap();
            w.output(b"bye").unwrap();
        });
        let r = Recording::parse(&text).unwrap();
        let digests = BTreeMap::from([
            (1, digest_of(b"$ hello\r\n$ ")),
            (2, "not-a-digest".to_owned()),
        ]);
        let out = r.replay(&digests, 0.0, 100, &mut u64::MAX.clone()).unwrap();
        match &out.at_assert[&1] {
            AssertScreen::Matched(s) => assert_eq!(s.row_text(0), "$ hello"),
            other => panic!("{other:?}"),
        }
        match &out.at_assert[&2] {
            AssertScreen::NotFound(s) => assert_eq!(s.row_text(1), "$ bye"),
            other => panic!("{other:?}"),
        }
        assert_eq!(out.last.row_text(1), "$ bye");
    }

    #[test]
    fn frames_are_bounded_and_end_with_the_last_screen() {
        let text = cast(|w| {
            for i in 0..50 {
                w.output(format!("{i} ").as_bytes()).unwrap();
            }
        });
        let out = Recording::parse(&text)
            .unwrap()
            .replay(&BTreeMap::new(), 0.0, 10, &mut u64::MAX.clone())
            .unwrap();
        assert_eq!(out.frames.len(), 10);
        assert_eq!(out.frames.last().unwrap().1, out.last);
    }

    #[test]
    fn a_cut_last_line_is_left_out_and_garbage_is_an_error() {
        let text = cast(|w| w.output(b"ok").unwrap());
        let cut = format!("{text}[0.5, \"o\", \"tru");
        assert_eq!(Recording::parse(&cut).unwrap().events.len(), 1);
        assert!(Recording::parse(&format!("{text}not json\n")).is_err());
        assert!(Recording::parse("").is_err());
    }

    /// A few KB of `ESC [ 2 J` on a large screen was gigabytes of frames
    /// and hours of clearing: the work is priced before anything runs.
    #[test]
    fn a_recording_that_would_cost_more_than_the_budget_is_not_replayed() {
        let mut text = String::from("{\"version\":2,\"width\":1000,\"height\":1000}\n");
        for i in 0..2000 {
            text.push_str(&format!("[{}.0, \"o\", \"\\u001b[44m\\u001b[2J\"]\n", i));
        }
        let r = Recording::parse(&text).unwrap();
        let mut budget = 1_000_000_000;
        let e = r
            .replay(&BTreeMap::new(), 0.1, 60, &mut budget)
            .unwrap_err();
        assert!(e.contains("too large to replay"), "{e}");
        assert_eq!(budget, 1_000_000_000, "nothing was spent");
    }

    #[test]
    fn a_recording_claiming_a_giant_screen_is_refused_before_any_grid_exists() {
        let huge = "{\"version\":2,\"width\":65535,\"height\":65535}\n";
        assert!(Recording::parse(huge).unwrap_err().contains("width"));
        let text = cast(|w| w.output(b"ok").unwrap());
        let resize = format!("{text}[0.5, \"r\", \"60000x60000\"]\n");
        assert!(Recording::parse(&resize).unwrap_err().contains("resizes"));
    }
}
