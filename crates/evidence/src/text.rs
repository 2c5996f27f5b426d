//! Untrusted text as the console prints it. Step output, `print()`,
//! names, commit messages and messages quoted from a bundle reach a
//! terminal or a CI log, which take some characters as commands: an
//! escape sequence sets the clipboard (OSC 52) or the window title, a
//! bare `\r` overwrites what was shown (and ends a line for the GitHub
//! Actions runner), and a line starting with `::` is a workflow command
//! (`::error`, `::add-mask`, `::stop-commands`).
//!
//! So, as the file views do (EVIDENCE.md's [`fenced`] blocks): escape
//! sequences are dropped, every other control character (C0 but `\t`,
//! DEL, C1), a bare `\r` included, is shown as its control picture
//! ([`picture`]), and a line that would start with `::` (after blanks)
//! gets a `\` before it.
//!
//! [`fenced`]: crate::journal::inert_markdown::fenced

use crate::journal::inert_markdown::{picture, strip_ansi};

/// What a line that would start a workflow command begins with instead.
pub const DEFUSE: char = '\\';

/// One line of untrusted text: escape sequences dropped, every control
/// character (line ends too) shown as a symbol, and a leading `::`
/// defused. For text that is a whole line or starts one.
pub fn line(s: &str) -> String {
    defuse(inline(s))
}

/// Untrusted text inside a line rfs writes (a name after `PASS`, a
/// commit after `rfs:`): escape sequences dropped and every control
/// character, line ends too, shown as a symbol, so it cannot end the
/// line or draw over it.
pub fn inline(s: &str) -> String {
    strip_ansi(s)
        .chars()
        .map(|c| {
            if c == '\t' {
                c
            } else {
                picture(c).unwrap_or(c)
            }
        })
        .collect()
}

/// Untrusted text of several lines (output, `print()`, a commit
/// message, an error): each line as [`line`], joined with `\n`. A `\r`
/// before a line end is part of the line end (CRLF); any other `\r` is
/// shown.
pub fn block(s: &str) -> String {
    s.split('\n')
        .map(|l| line(l.strip_suffix('\r').unwrap_or(l)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// `s` with a `\` before it when, after blanks, it starts with `::`.
fn defuse(s: String) -> String {
    if s.trim_start().starts_with("::") {
        format!("{DEFUSE}{s}")
    } else {
        s
    }
}

/// The most characters of one untrusted value a message quotes.
pub const QUOTE_CHARS: usize = 200;

/// The most characters of a message built from untrusted input.
pub const MESSAGE_CHARS: usize = 2000;

/// An untrusted value quoted in a message: in double quotes with control
/// characters escaped, at most [`QUOTE_CHARS`] characters of it, then
/// `… (N bytes)` when there was more.
pub fn quote(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => format!("{s:?}"),
        Some((at, _)) => format!("{:?}… ({} bytes)", &s[..at], s.len()),
    }
}

/// An untrusted value named in a message without quotes (a path): as
/// [`inline`], at most [`QUOTE_CHARS`] characters of it, then
/// `… (N bytes)` when there was more.
pub fn clip(s: &str) -> String {
    match s.char_indices().nth(QUOTE_CHARS) {
        None => inline(s),
        Some((at, _)) => format!("{}… ({} bytes)", inline(&s[..at]), s.len()),
    }
}

/// A message that may hold untrusted input: control characters but line
/// ends shown as symbols, at most [`MESSAGE_CHARS`] characters, then
/// `… (N bytes)` when there was more.
pub fn bounded(message: &str) -> String {
    let cut = message
        .char_indices()
        .nth(MESSAGE_CHARS)
        .map_or(message.len(), |(at, _)| at);
    let mut out = block(&message[..cut]);
    if cut < message.len() {
        out.push_str(&format!("… ({} bytes)", message.len()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_untrusted_can_command_a_terminal_or_a_ci_runner() {
        let hostile =
            "innocent\r::error title=forged::x\u{1b}]52;c;aGk=\u{7}\u{1b}]0;t\u{7}\u{9b}2J\u{7f}";
        let l = line(hostile);
        assert!(
            !l.contains(['\r', '\u{1b}', '\u{7}', '\u{9b}', '\u{7f}', '\n']),
            "{l:?}"
        );
        assert!(l.starts_with("innocent␍::error"), "{l:?}");
        assert_eq!(line("  ::warning::w"), "\\  ::warning::w");
        let b = block("ok\r\n::add-mask::x\n  ::stop-commands::t\nplain\ta");
        assert_eq!(b, "ok\n\\::add-mask::x\n\\  ::stop-commands::t\nplain\ta");
        assert_eq!(inline("a\nb"), "a␊b");
    }

    #[test]
    fn quotes_and_messages_are_bounded() {
        let big = "x".repeat(100_000);
        let q = quote(&big);
        assert!(q.len() < 300 && q.ends_with("… (100000 bytes)"), "{q}");
        assert_eq!(quote("a\u{1b}b"), "\"a\\u{1b}b\"");
        let m = bounded(&format!("line 1: {big}"));
        assert!(m.len() < MESSAGE_CHARS + 100, "{}", m.len());
        assert!(m.ends_with("(100008 bytes)"), "{m}");
        assert_eq!(bounded("short\nmessage"), "short\nmessage");
    }
}
