//! [`StyledScreen`]: the visible screen with each cell's style (colours,
//! bold, italic, underline, inverse), read from the emulator's own grid,
//! so a report can draw exactly what the terminal held. Its text is the
//! plain [`Screen`](super::Screen)'s, cell for cell.

use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::Flags;
use alacritty_terminal::term::TermMode;
use alacritty_terminal::vte::ansi::{Color, NamedColor};

use super::emulator::{palette, AlacrittyEmulator};

/// An sRGB colour.
pub type Rgb = [u8; 3];

/// One cell (a wide character's second cell is not listed: the wide
/// cell has `width` 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StyledCell {
    /// The character and any combining marks (a blank is `" "`).
    pub text: String,
    /// Columns it takes: 1, or 2 for a wide character.
    pub width: u8,
    /// `None`: the terminal's default.
    pub fg: Option<Rgb>,
    pub bg: Option<Rgb>,
    pub bold: bool,
    pub italic: bool,
    pub underline: bool,
    /// Foreground and background swapped when drawn.
    pub inverse: bool,
}

impl StyledCell {
    /// The same look (what may share one run of text).
    pub fn same_style(&self, o: &StyledCell) -> bool {
        (
            self.fg,
            self.bg,
            self.bold,
            self.italic,
            self.underline,
            self.inverse,
        ) == (o.fg, o.bg, o.bold, o.italic, o.underline, o.inverse)
    }

    /// A blank in the default style.
    fn is_plain_blank(&self) -> bool {
        self.text == " " && self.same_style(&StyledCell::blank())
    }

    fn blank() -> StyledCell {
        StyledCell {
            text: " ".into(),
            width: 1,
            fg: None,
            bg: None,
            bold: false,
            italic: false,
            underline: false,
            inverse: false,
        }
    }
}

/// The visible screen, styled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StyledScreen {
    /// One row per screen line, left to right; trailing blanks in the
    /// default style are dropped.
    pub rows: Vec<Vec<StyledCell>>,
    /// (row, column), 0-based.
    pub cursor: (u16, u16),
    pub cursor_visible: bool,
    pub cols: u16,
    pub lines: u16,
}

#[cfg(test)]
impl StyledScreen {
    /// Row `i`'s text, as [`Screen::lines`](super::Screen) has it.
    pub fn row_text(&self, i: usize) -> String {
        self.rows
            .get(i)
            .map(|r| r.iter().map(|c| c.text.as_str()).collect::<String>())
            .unwrap_or_default()
            .trim_end_matches(' ')
            .to_owned()
    }

    /// The text, one line per row (as [`Screen::text`](super::Screen)).
    pub fn text(&self) -> String {
        (0..self.rows.len())
            .map(|i| self.row_text(i))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl AlacrittyEmulator {
    /// The visible screen with each cell's style.
    pub fn styled(&self) -> StyledScreen {
        let term = self.term();
        let grid = term.grid();
        let cols = grid.columns();
        let colour = |c: Color| -> Option<Rgb> {
            let index = match c {
                Color::Spec(rgb) => return Some([rgb.r, rgb.g, rgb.b]),
                Color::Indexed(i) => i as usize,
                Color::Named(n) => match n {
                    NamedColor::Foreground
                    | NamedColor::Background
                    | NamedColor::BrightForeground
                    | NamedColor::DimForeground
                    | NamedColor::Cursor => return None,
                    n if (n as usize) < 16 => n as usize,
                    // The dim colours (DimBlack..DimWhite) as their base.
                    n => (n as usize).saturating_sub(NamedColor::DimBlack as usize) % 8,
                },
            };
            let rgb = term.colors()[index].unwrap_or_else(|| palette(index));
            Some([rgb.r, rgb.g, rgb.b])
        };
        let mut rows = Vec::with_capacity(grid.screen_lines());
        for line in 0..grid.screen_lines() {
            let row = &grid[Line(line as i32)];
            let mut cells = Vec::with_capacity(cols);
            for col in 0..cols {
                let cell = &row[Column(col)];
                if cell.flags.contains(Flags::WIDE_CHAR_SPACER) {
                    continue;
                }
                let mut text = String::new();
                if cell.flags.contains(Flags::LEADING_WIDE_CHAR_SPACER) || cell.c == '\t' {
                    text.push(' ');
                } else {
                    text.push(cell.c);
                    if let Some(marks) = cell.zerowidth() {
                        text.extend(marks.iter());
                    }
                }
                cells.push(StyledCell {
                    text,
                    width: if cell.flags.contains(Flags::WIDE_CHAR) {
                        2
                    } else {
                        1
                    },
                    fg: colour(cell.fg),
                    bg: colour(cell.bg),
                    bold: cell.flags.intersects(Flags::BOLD | Flags::DIM_BOLD),
                    italic: cell.flags.contains(Flags::ITALIC),
                    underline: cell.flags.intersects(Flags::ALL_UNDERLINES),
                    inverse: cell.flags.contains(Flags::INVERSE),
                });
            }
            while cells.last().is_some_and(StyledCell::is_plain_blank) {
                cells.pop();
            }
            rows.push(cells);
        }
        let cursor = grid.cursor.point;
        StyledScreen {
            rows,
            cursor: (cursor.line.0.max(0) as u16, cursor.column.0 as u16),
            cursor_visible: term.mode().contains(TermMode::SHOW_CURSOR),
            cols: cols as u16,
            lines: grid.screen_lines() as u16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::terminal::Emulator;

    fn screen(bytes: &[u8]) -> (AlacrittyEmulator, StyledScreen) {
        let mut e = AlacrittyEmulator::new(20, 4);
        e.feed(bytes);
        let s = e.styled();
        (e, s)
    }

    #[test]
    fn the_styled_text_is_the_plain_screen_cell_for_cell() {
        for bytes in [
            &b"\x1b[1;31mred\x1b[0m plain  \r\nnext"[..],
            "wide 漢字 x\r\n\x1b[44m bg \x1b[0m  \r\n\ttab".as_bytes(),
            b"\x1b[?1049h\x1b[2;3Halt screen",
            "e\u{301}\u{301} combining".as_bytes(),
        ] {
            let (e, s) = screen(bytes);
            assert_eq!(
                s.text(),
                e.snapshot().text(),
                "{:?}",
                String::from_utf8_lossy(bytes)
            );
        }
    }

    #[test]
    fn colours_bold_and_inverse_are_read_from_the_cells() {
        let (_, s) = screen(b"\x1b[1;31mR\x1b[0m\x1b[38;2;1;2;3mS\x1b[7mI\x1b[0m\x1b[38;5;196mX");
        let r = &s.rows[0];
        assert!(r[0].bold && r[0].fg == Some([205, 0, 0]), "{:?}", r[0]);
        assert_eq!(r[1].fg, Some([1, 2, 3]));
        assert!(r[2].inverse);
        assert_eq!(r[3].fg, Some([255, 0, 0]));
        assert_eq!(s.cursor, (0, 4));
        let (_, s) = screen("漢".as_bytes());
        assert_eq!((s.rows[0][0].width, s.rows[0].len()), (2, 1));
    }

    #[test]
    fn a_hidden_cursor_is_hidden() {
        let (_, s) = screen(b"\x1b[?25l");
        assert!(!s.cursor_visible);
        let (_, s) = screen(b"x");
        assert!(s.cursor_visible);
    }
}
