//! Secrets assembled on the screen. The recording's bytes are redacted
//! ([`StreamRedactor`](crate::secrets::StreamRedactor)), but a terminal
//! draws more than its bytes say: a typo fixed with Backspace
//! (`hunter2X`, `\b`, `2`) or a line drawn over after `\r` shows a secret
//! whose bytes never came in one piece. So the recorder keeps an emulator
//! of what it recorded, reads the text each row draws after every output
//! event, and appends to that event a sequence that paints `*` over every
//! secret on screen (cursor and style saved and restored). Whatever
//! replays the recording — the report's screens and player, asciinema —
//! draws the masked screen.

use super::emulator::{AlacrittyEmulator, Emulator};
use super::screen::{cell_width, Screen};
use crate::secrets::Redactor;

/// What paints over a secret's cells.
const MASK: char = '*';

/// The recorded screen, watched for secrets.
pub struct ScreenRedactor {
    emulator: AlacrittyEmulator,
    redactor: Redactor,
    seq: Seq,
}

impl std::fmt::Debug for ScreenRedactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScreenRedactor").finish_non_exhaustive()
    }
}

impl ScreenRedactor {
    pub fn new(cols: u16, rows: u16, redactor: Redactor) -> Self {
        ScreenRedactor {
            emulator: AlacrittyEmulator::new(cols, rows),
            redactor,
            seq: Seq::Ground,
        }
    }

    /// Another secret to paint over from now on.
    pub fn add(&mut self, value: &str) {
        self.redactor.add(value);
    }

    pub fn resize(&mut self, cols: u16, rows: u16) {
        self.emulator.resize(cols, rows);
    }

    /// Feed recorded output; what to append to it so that no secret is
    /// drawn (empty when none is, or while the output stops inside an
    /// escape sequence: the mask then waits for the next event).
    pub fn after_output(&mut self, text: &str) -> String {
        self.emulator.feed(text.as_bytes());
        let _ = self.emulator.take_replies();
        for c in text.chars() {
            self.seq = self.seq.next(c);
        }
        if self.seq != Seq::Ground {
            return String::new();
        }
        self.mask()
    }

    /// At the end of the recording: a sequence left open is cancelled
    /// (`CAN`) so that the last mask is drawn.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if self.seq != Seq::Ground {
            out.push('\u{18}');
            self.emulator.feed(b"\x18");
            self.seq = Seq::Ground;
        }
        let mask = self.mask();
        if mask.is_empty() {
            return String::new();
        }
        out + mask.as_str()
    }

    /// The sequence painting over every secret on screen now (fed to the
    /// emulator too).
    fn mask(&mut self) -> String {
        let cells = secret_cells(&self.emulator.snapshot(), &self.redactor);
        if cells.is_empty() {
            return String::new();
        }
        // Save cursor and style, paint in the default style, restore.
        let mut out = String::from("\u{1b}7\u{1b}[0m");
        for (row, col, n) in cells {
            out.push_str(&format!("\u{1b}[{};{}H", row + 1, col + 1));
            out.extend(std::iter::repeat_n(MASK, n));
        }
        out.push_str("\u{1b}8");
        self.emulator.feed(out.as_bytes());
        let _ = self.emulator.take_replies();
        out
    }
}

/// Where secrets are drawn on `screen`: (row, column, cells). A line
/// soft-wrapped onto the next is read as one, so a secret across the
/// break is found too.
fn secret_cells(screen: &Screen, redactor: &Redactor) -> Vec<(u16, u16, usize)> {
    let mut out = vec![];
    let mut row = 0u16;
    while (row as usize) < screen.lines.len() {
        // One logical line: its text, and for each char its byte offset
        // and cell.
        let mut text = String::new();
        let mut at: Vec<(usize, u16, u16, usize)> = vec![];
        loop {
            let line = screen.match_line(row);
            let mut col = 0u16;
            for c in line.chars() {
                let w = cell_width(c.encode_utf8(&mut [0; 4]));
                at.push((text.len(), row, col, w));
                text.push(c);
                col = col.saturating_add(w as u16);
            }
            let wrapped = screen.is_wrapped(row);
            row += 1;
            if !wrapped || row as usize >= screen.lines.len() {
                break;
            }
        }
        for found in redactor.find(text.as_bytes()) {
            let mut cells: Vec<(u16, u16, usize)> = vec![];
            for &(_, r, c, w) in at
                .iter()
                .filter(|(b, ..)| found.contains(b))
                .filter(|(.., w)| *w > 0)
            {
                match cells.last_mut() {
                    Some((lr, lc, n)) if *lr == r && *lc as usize + *n == c as usize => *n += w,
                    _ => cells.push((r, c, w)),
                }
            }
            out.extend(cells);
        }
    }
    out
}

/// Where the recorded output stands in the escape-sequence grammar (as
/// far as a mask needs: at rest or not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seq {
    Ground,
    Esc,
    EscIntermediate,
    Csi,
    /// OSC, DCS, SOS, PM, APC: up to BEL or `ESC \`.
    Str,
    StrEsc,
}

impl Seq {
    fn next(self, c: char) -> Seq {
        if matches!(c, '\u{18}' | '\u{1a}') {
            return Seq::Ground;
        }
        match self {
            Seq::Ground => {
                if c == '\u{1b}' {
                    Seq::Esc
                } else {
                    Seq::Ground
                }
            }
            Seq::Esc => match c {
                '[' => Seq::Csi,
                ']' | 'P' | 'X' | '^' | '_' => Seq::Str,
                '\u{1b}' => Seq::Esc,
                ' '..='/' => Seq::EscIntermediate,
                '\u{0}'..='\u{1f}' => Seq::Esc,
                _ => Seq::Ground,
            },
            Seq::EscIntermediate => match c {
                '\u{1b}' => Seq::Esc,
                '0'..='~' => Seq::Ground,
                _ => Seq::EscIntermediate,
            },
            Seq::Csi => match c {
                '\u{1b}' => Seq::Esc,
                '@'..='~' => Seq::Ground,
                _ => Seq::Csi,
            },
            Seq::Str => match c {
                '\u{7}' => Seq::Ground,
                '\u{1b}' => Seq::StrEsc,
                _ => Seq::Str,
            },
            Seq::StrEsc => match c {
                '\\' => Seq::Ground,
                c => Seq::Esc.next(c),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watched(secret: &str) -> ScreenRedactor {
        let mut r = Redactor::default();
        r.add(secret);
        ScreenRedactor::new(20, 3, r)
    }

    /// Replays `events` (each with what the redactor appends) and gives
    /// the screen a player would show.
    fn played(s: &mut ScreenRedactor, events: &[&str]) -> String {
        let mut e = AlacrittyEmulator::new(20, 3);
        for ev in events {
            let extra = s.after_output(ev);
            e.feed(ev.as_bytes());
            e.feed(extra.as_bytes());
        }
        e.feed(s.finish().as_bytes());
        e.snapshot().text()
    }

    #[test]
    fn a_secret_assembled_by_backspace_or_carriage_return_is_painted_over() {
        let mut s = watched("hunter22");
        let shown = played(&mut s, &["$ echo hunter2X", "\u{8}\u{1b}[K", "2"]);
        assert!(!shown.contains("hunter22"), "{shown}");
        assert!(shown.contains("$ echo ********"), "{shown}");
        let mut s = watched("hunter22");
        let shown = played(&mut s, &["xxxxxx22\r", "hunter\r\nok"]);
        assert_eq!(shown, "********\nok\n", "{shown}");
    }

    #[test]
    fn a_secret_across_a_soft_wrap_is_painted_over_on_both_rows() {
        let mut s = watched("abcdefgh");
        let shown = played(&mut s, &["0123456789012345abcd", "efgh"]);
        assert!(shown.starts_with("0123456789012345****\n****"), "{shown}");
    }

    #[test]
    fn the_mask_waits_for_an_escape_sequence_to_end() {
        let mut s = watched("hunter22");
        assert!(s.after_output("hunter22\u{1b}[3").is_empty());
        assert!(!s.after_output("1mx").is_empty());
        let mut s = watched("hunter22");
        assert!(s.after_output("hunter22\u{1b}]0;title").is_empty());
        assert!(s.finish().starts_with('\u{18}'));
    }
}
