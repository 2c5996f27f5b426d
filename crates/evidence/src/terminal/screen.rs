//! [`Screen`]: an immutable text snapshot of a terminal's visible area.
//!
//! Coordinates everywhere in `rfs::terminal` are **0-based**: row 0 is the top
//! line of the visible screen, column 0 the leftmost cell.

use std::fmt::Write as _;

use sha2::{Digest, Sha256};
use unicode_width::UnicodeWidthChar;

/// The visible screen of a terminal at one instant.
///
/// `rows` holds exactly `self.rows` strings, one per screen line, top first.
/// Each string is the line's text with trailing spaces trimmed, the spacer
/// cells behind wide (CJK, emoji) characters removed, and combining marks
/// attached to the character they modify. Attributes (colours, bold) are not
/// part of the snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Screen {
    /// Screen lines, top first; `rows.len() == self.rows as usize`.
    pub lines: Vec<String>,
    /// `wrapped[i]`: line `i` was soft-wrapped, its text continues on line
    /// `i + 1` (patterns match across such breaks).
    pub wrapped: Vec<bool>,
    /// Cursor position as `(row, col)`, 0-based, in cells.
    pub cursor: (u16, u16),
    /// Width in cells.
    pub cols: u16,
    /// Height in lines.
    pub rows: u16,
    /// Whether the alternate screen (e.g. `CSI ? 1049 h`) is active.
    pub alt_screen: bool,
}

impl Screen {
    /// The screen's text: all lines joined with `\n` (no trailing newline).
    pub fn text(&self) -> String {
        self.lines.join("\n")
    }

    /// Line `n`, 0-based from the top; a negative `n` counts up from the
    /// bottom of the content (`-1` is the last line that holds text or the
    /// cursor — the prompt line of a shell, the bottom row of a full-screen
    /// program). `None` when out of range.
    pub fn line(&self, n: i32) -> Option<&str> {
        let idx = self.resolve(n)?;
        self.lines.get(idx as usize).map(String::as_str)
    }

    /// Whether line `row` continues on the next line (soft wrap).
    pub fn is_wrapped(&self, row: u16) -> bool {
        self.wrapped.get(row as usize).copied().unwrap_or(false)
    }

    /// Rows down to the bottom of the content: the last row holding text
    /// or the cursor, plus one.
    pub fn content_rows(&self) -> u16 {
        let last_text = self.lines.iter().rposition(|l| !l.is_empty());
        let last = last_text.map_or(self.cursor.0, |t| (t as u16).max(self.cursor.0));
        (last + 1).min(self.rows)
    }

    /// Resolve a row index: negative counts up from the content bottom.
    pub fn resolve(&self, n: i32) -> Option<u16> {
        let idx = if n < 0 {
            self.content_rows() as i32 + n
        } else {
            n
        };
        (0..self.rows as i32).contains(&idx).then_some(idx as u16)
    }

    /// Line `row` as matched by patterns: the cursor's line extends with
    /// blanks up to the cursor, so a prompt's trailing space (`$ `) is
    /// there to match.
    pub fn match_line(&self, row: u16) -> String {
        let mut line = self.lines.get(row as usize).cloned().unwrap_or_default();
        if self.is_wrapped(row) {
            // A soft-wrapped line is full: keep its trailing blanks.
            let width = cell_width(&line);
            line.extend(std::iter::repeat_n(
                ' ',
                (self.cols as usize).saturating_sub(width),
            ));
        } else if row == self.cursor.0 {
            let width = cell_width(&line);
            let want = self.cursor.1 as usize;
            if width < want {
                line.extend(std::iter::repeat_n(' ', want - width));
            }
        }
        line
    }

    /// SHA-256 (lower-case hex) of [`Screen::text`]. Stable across runs and
    /// independent of the cursor and the alternate-screen flag.
    pub fn digest(&self) -> String {
        hex::encode(Sha256::digest(self.text().as_bytes()))
    }

    /// The whole screen rendered for humans (used in error messages): a
    /// header with size, cursor and screen buffer, then every line prefixed by
    /// its 0-based row number, framed so trailing spaces stay visible.
    pub fn dump(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "screen {}x{} (cols x rows), cursor at row {} col {}{}",
            self.cols,
            self.rows,
            self.cursor.0,
            self.cursor.1,
            if self.alt_screen {
                ", alternate screen"
            } else {
                ""
            }
        );
        let width = self.rows.saturating_sub(1).to_string().len();
        for (i, line) in self.lines.iter().enumerate() {
            let mark = if i == self.cursor.0 as usize {
                '>'
            } else {
                ' '
            };
            let _ = writeln!(out, "{mark}{i:>width$} |{line}");
        }
        out
    }

    /// The text of line `row` between cell columns `col` and `col + cols`
    /// (exclusive). A wide character is included when its first cell is in
    /// range. Returns `""` for rows out of range.
    pub fn crop(&self, row: u16, col: u16, cols: u16) -> String {
        let Some(line) = self.lines.get(row as usize) else {
            return String::new();
        };
        let end = col as usize + cols as usize;
        let mut out = String::new();
        let mut at = 0usize;
        for ch in line.chars() {
            let w = ch.width().unwrap_or(0);
            // Zero-width characters belong to the preceding cell.
            let cell = if w == 0 { at.saturating_sub(1) } else { at };
            if cell >= col as usize && cell < end {
                out.push(ch);
            }
            at += w;
        }
        out
    }
}

/// Width of `text` in terminal cells (wide characters take two, combining
/// marks none).
pub fn cell_width(text: &str) -> usize {
    text.chars().map(|c| c.width().unwrap_or(0)).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn screen(lines: &[&str]) -> Screen {
        Screen {
            lines: lines.iter().map(|s| s.to_string()).collect(),
            wrapped: vec![false; lines.len()],
            cursor: (1, 2),
            cols: 10,
            rows: lines.len() as u16,
            alt_screen: false,
        }
    }

    #[test]
    fn negative_lines_count_from_bottom() {
        let s = screen(&["a", "b", "c"]);
        assert_eq!(s.line(0), Some("a"));
        assert_eq!(s.line(-1), Some("c"));
        assert_eq!(s.line(-3), Some("a"));
        assert_eq!(s.line(-4), None);
        assert_eq!(s.line(3), None);
    }

    #[test]
    fn dump_has_row_numbers_and_cursor() {
        let s = screen(&["hello", "world", ""]);
        let d = s.dump();
        assert!(d.contains("cursor at row 1 col 2"), "{d}");
        assert!(d.contains(" 0 |hello"), "{d}");
        assert!(d.contains(">1 |world"), "{d}");
    }

    #[test]
    fn digest_depends_on_text_only() {
        let a = screen(&["x", "y"]);
        let mut b = a.clone();
        b.cursor = (0, 0);
        assert_eq!(a.digest(), b.digest());
        b.lines[1] = "z".into();
        assert_ne!(a.digest(), b.digest());
        assert_eq!(a.digest().len(), 64);
    }

    #[test]
    fn crop_counts_cells_not_chars() {
        let s = screen(&["a中b\u{301}cd"]);
        // cells: a=0, 中=1-2, b́=3, c=4, d=5
        assert_eq!(s.crop(0, 1, 2), "中");
        assert_eq!(s.crop(0, 3, 2), "b\u{301}c");
        assert_eq!(s.crop(0, 0, 1), "a");
        assert_eq!(cell_width("a中"), 3);
    }
}
