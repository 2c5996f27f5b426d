//! Screen assertion patterns and their (pure) matching logic.
//!
//! All rows and columns are **0-based** cell coordinates on the visible
//! screen; a negative row counts from the bottom (`-1` is the last line).
//! A [`Pattern`] says *what* must be on screen (text or regex, optionally
//! restricted to a row or a rectangular region, and/or a cursor position)
//! and *how to wait* for it (timeout, `absent`, `stable`); the waiting itself
//! is done by `TerminalSession::wait_for`.

use std::time::Duration;

use regex::Regex;
use serde::Deserialize;

use super::screen::Screen;
use super::TerminalError;

/// Default time a wait may take.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// What text to look for.
#[derive(Debug, Clone)]
pub enum Matcher {
    /// The text must be contained (may span lines via `\n`).
    Text(String),
    /// The regex must match somewhere (lines are joined with `\n`, so `^`/`$`
    /// need `(?m)` to anchor at line boundaries).
    Regex(Regex),
}

/// A rectangle of the screen: `rows` lines starting at `row` (negative counts
/// from the bottom), `cols` cells starting at column `col`. Parts outside the
/// screen are ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Region {
    pub row: i32,
    pub col: u16,
    pub rows: u16,
    pub cols: u16,
}

/// A screen assertion.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// Text to find; `None` when only the cursor is asserted.
    pub matcher: Option<Matcher>,
    /// Search only this line (0-based; negative counts from the bottom).
    pub row: Option<i32>,
    /// Search only this rectangle.
    pub region: Option<Region>,
    /// The cursor must be at `(row, col)` (0-based).
    pub cursor: Option<(u16, u16)>,
    /// Invert the wait: the pattern must NOT match at any point during
    /// `timeout`; the wait succeeds when the timeout elapses.
    pub absent: bool,
    /// The screen must be unchanged for this long (while matching) before
    /// the match counts.
    pub stable: Option<Duration>,
    /// How long to wait.
    pub timeout: Duration,
}

/// Where a pattern matched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Match {
    /// Screen row (0-based) where the match starts.
    pub row: u16,
    /// Cell column (0-based) where the match starts.
    pub col: u16,
    /// The matched text (`""` for cursor-only patterns).
    pub text: String,
}

impl Pattern {
    fn with(matcher: Option<Matcher>) -> Self {
        Pattern {
            matcher,
            row: None,
            region: None,
            cursor: None,
            absent: false,
            stable: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// Wait for `text` to be on screen.
    pub fn text(text: impl Into<String>) -> Self {
        Self::with(Some(Matcher::Text(text.into())))
    }

    /// Wait for a regex match on screen.
    pub fn regex(re: &str) -> Result<Self, TerminalError> {
        let re = Regex::new(re).map_err(|e| TerminalError::Pattern(format!("bad regex: {e}")))?;
        Ok(Self::with(Some(Matcher::Regex(re))))
    }

    /// Wait for the cursor to be at `(row, col)`.
    pub fn cursor_at(row: u16, col: u16) -> Self {
        let mut p = Self::with(None);
        p.cursor = Some((row, col));
        p
    }

    /// Restrict to one line (negative counts from the bottom).
    pub fn on_row(mut self, row: i32) -> Self {
        self.row = Some(row);
        self
    }

    /// Restrict to a rectangle.
    pub fn in_region(mut self, region: Region) -> Self {
        self.region = Some(region);
        self
    }

    /// Also require the cursor at `(row, col)`.
    pub fn with_cursor(mut self, row: u16, col: u16) -> Self {
        self.cursor = Some((row, col));
        self
    }

    /// Require the pattern to stay away for the whole timeout.
    pub fn absent(mut self) -> Self {
        self.absent = true;
        self
    }

    /// Require the screen to be unchanged for `d` before a match counts.
    pub fn stable_for(mut self, d: Duration) -> Self {
        self.stable = Some(d);
        self
    }

    /// Set the timeout.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = d;
        self
    }

    /// Does `screen` satisfy the pattern right now? (Ignores `absent`,
    /// `stable` and `timeout`, which are about time.)
    pub fn matches(&self, screen: &Screen) -> Option<Match> {
        if let Some(cursor) = self.cursor {
            if screen.cursor != cursor {
                return None;
            }
        }
        let Some(matcher) = &self.matcher else {
            return Some(Match {
                row: screen.cursor.0,
                col: screen.cursor.1,
                text: String::new(),
            });
        };

        // The searched lines: (screen row, first column, text).
        let mut lines: Vec<(u16, u16, String)> = Vec::new();
        let restricted = self.region.is_some();
        if let Some(region) = self.region {
            let top = if region.row < 0 {
                screen.content_rows() as i32 + region.row
            } else {
                region.row
            };
            for r in top.max(0)..(top + region.rows as i32).min(screen.rows as i32) {
                let r = r as u16;
                lines.push((r, region.col, screen.crop(r, region.col, region.cols)));
            }
        } else if let Some(row) = self.row {
            let r = screen.resolve(row)?;
            lines.push((r, 0, screen.match_line(r)));
        } else {
            for r in 0..screen.rows {
                lines.push((r, 0, screen.match_line(r)));
            }
        }
        // Lines are joined with `\n`, except where the terminal soft-wrapped
        // a line: there the text continues (as a user reads it).
        let joins: Vec<&str> = lines
            .iter()
            .map(|(r, _, _)| {
                if restricted || !screen.is_wrapped(*r) {
                    "\n"
                } else {
                    ""
                }
            })
            .collect();
        let mut haystack = String::new();
        for (i, (_, _, l)) in lines.iter().enumerate() {
            haystack.push_str(l);
            if i + 1 < lines.len() {
                haystack.push_str(joins[i]);
            }
        }
        let (start, end) = match matcher {
            Matcher::Text(t) => {
                let at = haystack.find(t.as_str())?;
                (at, at + t.len())
            }
            Matcher::Regex(re) => {
                let m = re.find(&haystack)?;
                (m.start(), m.end())
            }
        };

        // Map the byte offset back to a (row, col).
        let mut offset = 0;
        for (i, (row, col0, text)) in lines.iter().enumerate() {
            let end_of_line = offset + text.len();
            if start < end_of_line || (start == end_of_line && !joins[i].is_empty()) {
                let prefix = &text[..start - offset];
                let width = super::screen::cell_width(prefix);
                return Some(Match {
                    row: *row,
                    col: col0.saturating_add(width as u16),
                    text: haystack[start..end].to_string(),
                });
            }
            offset = end_of_line + joins[i].len();
        }
        None
    }

    /// Short human description, used in failure messages.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match &self.matcher {
            Some(Matcher::Text(t)) => parts.push(format!("text {t:?}")),
            Some(Matcher::Regex(r)) => parts.push(format!("regex /{}/", r.as_str())),
            None => {}
        }
        if let Some(r) = self.row {
            parts.push(format!("on row {r}"));
        }
        if let Some(g) = self.region {
            parts.push(format!(
                "in region [row {}, col {}, {} rows, {} cols]",
                g.row, g.col, g.rows, g.cols
            ));
        }
        if let Some((r, c)) = self.cursor {
            parts.push(format!("with cursor at row {r} col {c}"));
        }
        if let Some(s) = self.stable {
            parts.push(format!("stable for {} ms", s.as_millis()));
        }
        if self.absent {
            parts.push("to stay absent".into());
        }
        parts.join(" ")
    }
}

/// A pattern as written in a script or config (serde-friendly form of
/// [`Pattern`]); validate with [`PatternSpec::compile`].
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PatternSpec {
    /// Contained text.
    pub text: Option<String>,
    /// Regular expression (Rust `regex` syntax).
    pub regex: Option<String>,
    /// Restrict to one line, 0-based; negative counts from the bottom.
    pub row: Option<i32>,
    /// `[row, col, rows, cols]`, 0-based; row may be negative.
    pub region: Option<[i32; 4]>,
    /// `[row, col]`, 0-based.
    pub cursor: Option<[i64; 2]>,
    /// Must NOT appear during the whole timeout.
    #[serde(default)]
    pub absent: bool,
    /// Screen unchanged for this many milliseconds before the match counts.
    pub stable_ms: Option<u64>,
    /// Seconds; default 10.
    pub timeout: Option<f64>,
}

impl PatternSpec {
    /// Check the spec and build a [`Pattern`].
    pub fn compile(&self) -> Result<Pattern, TerminalError> {
        let bad = |m: String| TerminalError::Pattern(m);
        let mut p = match (&self.text, &self.regex, self.cursor) {
            (Some(_), Some(_), _) => return Err(bad("give either text or regex, not both".into())),
            (Some(t), None, _) if t.is_empty() => return Err(bad("text must not be empty".into())),
            (Some(t), None, _) => Pattern::text(t.clone()),
            (None, Some(r), _) => Pattern::regex(r)?,
            (None, None, Some(_)) => Pattern::with(None),
            (None, None, None) => {
                return Err(bad("a pattern needs text, regex or cursor".into()));
            }
        };
        if self.row.is_some() && self.region.is_some() {
            return Err(bad("give either row or region, not both".into()));
        }
        p.row = self.row;
        if let Some([row, col, rows, cols]) = self.region {
            let nonneg = |v: i32, what: &str| {
                u16::try_from(v)
                    .map_err(|_| bad(format!("region {what} must be 0..65535, got {v}")))
            };
            p.region = Some(Region {
                row,
                col: nonneg(col, "col")?,
                rows: nonneg(rows, "rows")?,
                cols: nonneg(cols, "cols")?,
            });
        }
        if let Some([row, col]) = self.cursor {
            let conv = |v: i64| {
                u16::try_from(v)
                    .map_err(|_| bad(format!("cursor position must be 0..65535, got {v}")))
            };
            p.cursor = Some((conv(row)?, conv(col)?));
        }
        p.absent = self.absent;
        if self.absent && self.stable_ms.is_some() {
            return Err(bad("absent and stable_ms cannot be combined".into()));
        }
        if let Some(ms) = self.stable_ms.filter(|ms| *ms > 86_400_000) {
            return Err(bad(format!("stable_ms must be 0..86400000, got {ms}")));
        }
        p.stable = self.stable_ms.map(Duration::from_millis);
        if let Some(t) = self.timeout {
            if !(0.0..=86_400.0).contains(&t) {
                return Err(bad(format!("timeout must be 0..86400 seconds, got {t}")));
            }
            p.timeout = Duration::from_secs_f64(t);
        }
        Ok(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(lines: &[&str], cursor: (u16, u16)) -> Screen {
        Screen {
            lines: lines.iter().map(|s| s.to_string()).collect(),
            wrapped: vec![false; lines.len()],
            cursor,
            cols: 20,
            rows: lines.len() as u16,
            alt_screen: false,
        }
    }

    fn spec(json: &str) -> Result<Pattern, TerminalError> {
        serde_json::from_str::<PatternSpec>(json).unwrap().compile()
    }

    #[test]
    fn text_anywhere_reports_position() {
        let s = screen(&["$ ls", "a中 file.txt", ""], (2, 0));
        let m = Pattern::text("file").matches(&s).unwrap();
        assert_eq!((m.row, m.col, m.text.as_str()), (1, 4, "file"));
        assert!(Pattern::text("nope").matches(&s).is_none());
        // Text spanning lines.
        assert!(Pattern::text("ls\na").matches(&s).is_some());
    }

    #[test]
    fn row_restricts_and_counts_from_bottom() {
        let s = screen(&["top", "mid", "bottom"], (0, 0));
        assert!(Pattern::text("bottom").on_row(-1).matches(&s).is_some());
        assert!(Pattern::text("bottom").on_row(2).matches(&s).is_some());
        assert!(Pattern::text("bottom").on_row(0).matches(&s).is_none());
        assert!(Pattern::text("top").on_row(-3).matches(&s).is_some());
        assert!(Pattern::text("top").on_row(-4).matches(&s).is_none());
        assert!(Pattern::text("top").on_row(3).matches(&s).is_none());
    }

    #[test]
    fn region_crops_by_cells() {
        let s = screen(&["abcdef", "gh中jkl", "mnopqr"], (0, 0));
        let r = |row, col, rows, cols| Region {
            row,
            col,
            rows,
            cols,
        };
        let m = Pattern::text("中j")
            .in_region(r(1, 2, 1, 3))
            .matches(&s)
            .unwrap();
        assert_eq!((m.row, m.col), (1, 2));
        assert!(Pattern::text("cd")
            .in_region(r(0, 2, 2, 2))
            .matches(&s)
            .is_some());
        assert!(Pattern::text("bc")
            .in_region(r(0, 2, 2, 2))
            .matches(&s)
            .is_none());
        assert!(Pattern::text("jk")
            .in_region(r(0, 2, 2, 2))
            .matches(&s)
            .is_none());
        assert!(Pattern::text("op")
            .in_region(r(-1, 2, 5, 2))
            .matches(&s)
            .is_some());
        let m = Pattern::regex("^k")
            .unwrap()
            .in_region(r(1, 5, 1, 9))
            .matches(&s)
            .unwrap();
        assert_eq!((m.row, m.col), (1, 5));
    }

    #[test]
    fn regex_and_cursor() {
        let s = screen(&["count: 42", "> "], (1, 2));
        let m = Pattern::regex(r"count: (\d+)")
            .unwrap()
            .matches(&s)
            .unwrap();
        assert_eq!(m.text, "count: 42");
        assert!(Pattern::regex("(?m)^> $").unwrap().matches(&s).is_some());
        assert!(Pattern::cursor_at(1, 2).matches(&s).is_some());
        assert!(Pattern::cursor_at(1, 3).matches(&s).is_none());
        assert!(Pattern::text("42").with_cursor(0, 0).matches(&s).is_none());
        assert!(Pattern::regex("(").is_err());
    }

    #[test]
    fn spec_compiles_and_validates() {
        let p = spec(r#"{"text":"ok","row":-1,"stable_ms":50,"timeout":2.5}"#).unwrap();
        assert_eq!(p.row, Some(-1));
        assert_eq!(p.stable, Some(Duration::from_millis(50)));
        assert_eq!(p.timeout, Duration::from_millis(2500));
        let p = spec(r#"{"regex":"a+","region":[0,1,2,3],"absent":true}"#).unwrap();
        assert!(p.absent);
        assert_eq!(p.timeout, DEFAULT_TIMEOUT);
        assert_eq!(
            p.region,
            Some(Region {
                row: 0,
                col: 1,
                rows: 2,
                cols: 3
            })
        );
        assert_eq!(spec(r#"{"cursor":[3,4]}"#).unwrap().cursor, Some((3, 4)));
        for bad in [
            r#"{}"#,
            r#"{"text":""}"#,
            r#"{"text":"a","regex":"b"}"#,
            r#"{"text":"a","row":1,"region":[0,0,1,1]}"#,
            r#"{"text":"a","region":[0,-1,1,1]}"#,
            r#"{"cursor":[-1,0]}"#,
            r#"{"text":"a","timeout":-1}"#,
            r#"{"text":"a","absent":true,"stable_ms":5}"#,
            r#"{"regex":"("}"#,
        ] {
            assert!(spec(bad).is_err(), "{bad} should be rejected");
        }
        assert!(serde_json::from_str::<PatternSpec>(r#"{"txt":"a"}"#).is_err());
    }

    #[test]
    fn describe_mentions_the_parts() {
        let p = Pattern::text("x").on_row(-1).absent();
        let d = p.describe();
        assert!(
            d.contains("\"x\"") && d.contains("row -1") && d.contains("absent"),
            "{d}"
        );
    }

    #[test]
    fn text_matches_across_a_soft_wrap_but_not_a_hard_break() {
        let mut s = screen(&["abcdefghijklmnopqrst", "uvwxyz", "end", "x"], (3, 0));
        s.wrapped[0] = true;
        let m = Pattern::text("rstuvw").matches(&s).unwrap();
        assert_eq!((m.row, m.col), (0, 17));
        let m = Pattern::text("uvw").matches(&s).unwrap();
        assert_eq!((m.row, m.col), (1, 0));
        assert!(Pattern::text("xyzend").matches(&s).is_none());
        assert!(Pattern::text("rstuvw").on_row(0).matches(&s).is_none());
    }
}
