//! The [`Emulator`] seam and its implementation on `alacritty_terminal`.
//!
//! An emulator turns the byte stream a program writes to its terminal into a
//! [`Screen`], and collects the answers a real terminal would send back
//! (cursor position reports, device attributes, ...), which the session writes
//! to the program's input.

use std::sync::{Arc, Mutex};

use alacritty_terminal::event::{Event, EventListener, WindowSize};
use alacritty_terminal::grid::Dimensions;
use alacritty_terminal::index::{Column, Line};
use alacritty_terminal::term::cell::Flags;
use alacritty_terminal::term::{Config, Term, TermMode};
use alacritty_terminal::vte::ansi::{Processor, Rgb, Timeout};

use super::screen::Screen;

/// A terminal emulator as rfs uses it. Implementations must accept arbitrary
/// byte streams, including UTF-8 sequences and escape sequences split across
/// `feed` calls.
pub trait Emulator: Send {
    /// Process bytes the program wrote to the terminal.
    fn feed(&mut self, bytes: &[u8]);
    /// The visible screen now.
    fn snapshot(&self) -> Screen;
    /// Bytes the terminal must send back to the program (answers to queries
    /// such as `CSI 6 n` and `CSI c`), in order; drains them.
    fn take_replies(&mut self) -> Vec<u8>;
    /// Change the size (both must be at least 1).
    fn resize(&mut self, cols: u16, rows: u16);
    /// Whether the program enabled application cursor keys (`CSI ? 1 h`);
    /// arrow keys are then encoded `ESC O A` instead of `ESC [ A`.
    fn app_cursor(&self) -> bool;
}

/// Lines of scrollback the alacritty emulator keeps (only used to reflow on
/// resize; snapshots show the visible area only). Bounds memory.
const SCROLLBACK: usize = 200;

/// Size handed to `alacritty_terminal`.
struct Size {
    cols: usize,
    rows: usize,
}

impl Dimensions for Size {
    fn total_lines(&self) -> usize {
        self.rows
    }
    fn screen_lines(&self) -> usize {
        self.rows
    }
    fn columns(&self) -> usize {
        self.cols
    }
}

/// Events raised by the terminal while parsing, kept until `feed` returns.
#[derive(Clone, Default)]
pub struct Listener {
    events: Arc<Mutex<Vec<Event>>>,
}

impl EventListener for Listener {
    fn send_event(&self, event: Event) {
        if matches!(
            event,
            Event::PtyWrite(_) | Event::TextAreaSizeRequest(_) | Event::ColorRequest(..)
        ) {
            self.events
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(event);
        }
    }
}

/// Synchronized-update policy: never buffer (`CSI ? 2026 h` is ignored), so
/// every byte fed is visible in the next snapshot. Waits with `stable_ms`
/// cover programs that draw a frame in several writes.
#[derive(Default)]
struct NoSync;

impl Timeout for NoSync {
    fn set_timeout(&mut self, _: std::time::Duration) {}
    fn clear_timeout(&mut self) {}
    fn pending_timeout(&self) -> bool {
        false
    }
}

/// [`Emulator`] backed by `alacritty_terminal` (xterm-compatible; answers
/// DSR 5/6, DA1/DA2, text-area size and colour queries).
pub struct AlacrittyEmulator {
    term: Term<Listener>,
    parser: Processor<NoSync>,
    listener: Listener,
    replies: Vec<u8>,
    cols: u16,
    rows: u16,
}

impl AlacrittyEmulator {
    /// A blank `cols` x `rows` terminal (each clamped to at least 1).
    pub fn new(cols: u16, rows: u16) -> Self {
        let (cols, rows) = (cols.max(1), rows.max(1));
        let listener = Listener::default();
        let config = Config {
            scrolling_history: SCROLLBACK,
            ..Config::default()
        };
        let size = Size {
            cols: cols as usize,
            rows: rows as usize,
        };
        AlacrittyEmulator {
            term: Term::new(config, &size, listener.clone()),
            parser: Processor::new(),
            listener,
            replies: Vec::new(),
            cols,
            rows,
        }
    }

    fn answer_events(&mut self) {
        let events = std::mem::take(
            &mut *self
                .listener
                .events
                .lock()
                .unwrap_or_else(|e| e.into_inner()),
        );
        for event in events {
            match event {
                Event::PtyWrite(text) => self.replies.extend_from_slice(text.as_bytes()),
                Event::TextAreaSizeRequest(format) => {
                    let size = WindowSize {
                        num_lines: self.rows,
                        num_cols: self.cols,
                        cell_width: CELL_WIDTH,
                        cell_height: CELL_HEIGHT,
                    };
                    self.replies.extend_from_slice(format(size).as_bytes());
                }
                Event::ColorRequest(index, format) => {
                    let rgb = self.term.colors()[index].unwrap_or_else(|| default_color(index));
                    self.replies.extend_from_slice(format(rgb).as_bytes());
                }
                _ => {}
            }
        }
    }
}

/// Nominal cell size in pixels reported to programs that ask (`CSI 14 t`).
const CELL_WIDTH: u16 = 8;
const CELL_HEIGHT: u16 = 16;

/// xterm's default colour for palette `index` (0..256), foreground (256),
/// background (257) and cursor (258); anything else reads as the foreground.
pub fn palette(index: usize) -> Rgb {
    default_color(index)
}

fn default_color(index: usize) -> Rgb {
    const ANSI: [(u8, u8, u8); 16] = [
        (0, 0, 0),
        (205, 0, 0),
        (0, 205, 0),
        (205, 205, 0),
        (0, 0, 238),
        (205, 0, 205),
        (0, 205, 205),
        (229, 229, 229),
        (127, 127, 127),
        (255, 0, 0),
        (0, 255, 0),
        (255, 255, 0),
        (92, 92, 255),
        (255, 0, 255),
        (0, 255, 255),
        (255, 255, 255),
    ];
    let (r, g, b) = match index {
        0..16 => ANSI[index],
        16..232 => {
            let i = index - 16;
            let level = |v: usize| if v == 0 { 0 } else { (55 + v * 40) as u8 };
            (level(i / 36), level((i / 6) % 6), level(i % 6))
        }
        232..=255 => {
            let v = (8 + (index - 232) * 10) as u8;
            (v, v, v)
        }
        257 => (0, 0, 0),
        _ => (229, 229, 229),
    };
    Rgb { r, g, b }
}

impl AlacrittyEmulator {
    /// The terminal (for [`AlacrittyEmulator::styled`]).
    pub fn term(&self) -> &Term<Listener> {
        &self.term
    }
}

impl Emulator for AlacrittyEmulator {
    fn feed(&mut self, bytes: &[u8]) {
        self.parser.advance(&mut self.term, bytes);
        self.answer_events();
    }

    fn snapshot(&self) -> Screen {
        let grid = self.term.grid();
        let cols = grid.columns();
        let mut lines = Vec::with_capacity(grid.screen_lines());
        let mut wrapped = Vec::with_capacity(grid.screen_lines());
        for row in 0..grid.screen_lines() {
            let row = &grid[Line(row as i32)];
            wrapped.push(cols > 0 && row[Column(cols - 1)].flags.contains(Flags::WRAPLINE));
            let mut text = String::with_capacity(cols);
            for col in 0..cols {
                let cell = &row[Column(col)];
                if cell
                    .flags
                    .intersects(Flags::WIDE_CHAR_SPACER | Flags::LEADING_WIDE_CHAR_SPACER)
                {
                    if cell.flags.contains(Flags::LEADING_WIDE_CHAR_SPACER) {
                        text.push(' ');
                    }
                    continue;
                }
                // Tab stops leave '\t' in the cells they cross; they show blank.
                text.push(if cell.c == '\t' { ' ' } else { cell.c });
                if let Some(marks) = cell.zerowidth() {
                    text.extend(marks.iter());
                }
            }
            let trimmed = text.trim_end_matches(' ').len();
            text.truncate(trimmed);
            lines.push(text);
        }
        let cursor = grid.cursor.point;
        Screen {
            lines,
            wrapped,
            cursor: (cursor.line.0.max(0) as u16, cursor.column.0 as u16),
            cols: self.cols,
            rows: self.rows,
            alt_screen: self.term.mode().contains(TermMode::ALT_SCREEN),
        }
    }

    fn take_replies(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.replies)
    }

    fn resize(&mut self, cols: u16, rows: u16) {
        let (cols, rows) = (cols.max(1), rows.max(1));
        self.cols = cols;
        self.rows = rows;
        self.term.resize(Size {
            cols: cols as usize,
            rows: rows as usize,
        });
    }

    fn app_cursor(&self) -> bool {
        self.term.mode().contains(TermMode::APP_CURSOR)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(cols: u16, rows: u16, bytes: &[u8]) -> AlacrittyEmulator {
        let mut e = AlacrittyEmulator::new(cols, rows);
        e.feed(bytes);
        e
    }

    #[test]
    fn plain_text_and_cursor() {
        let e = feed(20, 4, b"hello\r\nworld");
        let s = e.snapshot();
        assert_eq!(s.lines, vec!["hello", "world", "", ""]);
        assert_eq!(s.cursor, (1, 5));
        assert!(!s.alt_screen);
    }

    #[test]
    fn utf8_split_across_feeds() {
        let bytes = "a中é😀".as_bytes();
        for split in 0..bytes.len() {
            let mut e = AlacrittyEmulator::new(20, 2);
            e.feed(&bytes[..split]);
            e.feed(&bytes[split..]);
            assert_eq!(e.snapshot().lines[0], "a中é😀", "split at {split}");
            assert_eq!(e.snapshot().cursor, (0, 6), "split at {split}");
        }
    }

    #[test]
    fn answers_cursor_position_and_device_attributes() {
        let mut e = feed(20, 5, b"\x1b[3;4Hx\x1b[6n");
        assert_eq!(e.take_replies(), b"\x1b[3;5R");
        assert!(e.take_replies().is_empty());
        e.feed(b"\x1b[c");
        assert_eq!(e.take_replies(), b"\x1b[?6c");
        e.feed(b"\x1b[5n");
        assert_eq!(e.take_replies(), b"\x1b[0n");
    }

    #[test]
    fn answers_size_and_colour_queries() {
        let mut e = feed(30, 7, b"\x1b[18t");
        assert_eq!(e.take_replies(), b"\x1b[8;7;30t");
        e.feed(b"\x1b]11;?\x07");
        let reply = String::from_utf8(e.take_replies()).unwrap();
        assert!(reply.starts_with("\x1b]11;rgb:0000/0000/0000"), "{reply:?}");
    }

    #[test]
    fn alt_screen_and_app_cursor_flags() {
        let mut e = feed(10, 3, b"main\x1b[?1049h\x1b[?1halt");
        let s = e.snapshot();
        assert!(s.alt_screen);
        assert!(e.app_cursor());
        // 1049 keeps the cursor where it was (col 4), like xterm.
        assert_eq!(s.lines[0], "    alt");
        e.feed(b"\x1b[?1049l");
        assert_eq!(e.snapshot().lines[0], "main");
    }

    #[test]
    fn tabs_render_as_spaces_and_resize_changes_size() {
        let mut e = feed(20, 3, b"a\tb");
        assert_eq!(e.snapshot().lines[0], "a       b");
        e.resize(40, 10);
        let s = e.snapshot();
        assert_eq!((s.cols, s.rows, s.lines.len()), (40, 10, 10));
    }
}
