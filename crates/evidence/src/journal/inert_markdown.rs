//! Untrusted text as inert Markdown. Every value EVIDENCE.md takes from
//! the journal (labels, names, commands, paths, provider messages,
//! output) is written in one of three forms, none of which can start a
//! line, a list item, a table cell, a link or HTML:
//! - [`code`]: a code span, when the text holds only characters that
//!   cannot end or break one (ids, hashes, plain paths);
//! - [`esc`]: inline text with the characters Markdown gives a meaning
//!   to mid-line backslash-escaped and control characters shown as
//!   symbols (it never starts a line: every use follows a label);
//! - [`fenced`]: a fenced block for multi-line text (commands, output),
//!   with a fence longer than any backtick run inside it.

/// A control character as its Unicode control picture (so text stays
/// on its line); `None` for any other character.
pub fn picture(c: char) -> Option<char> {
    match c {
        '\u{0}'..='\u{1f}' => Some(char::from_u32(0x2400 + c as u32).unwrap_or('\u{fffd}')),
        '\u{7f}' => Some('\u{2421}'),
        // Bidi controls and zero-width characters would make text read as
        // something it is not ("Trojan Source").
        c if c.is_control()
            || matches!(c, '\u{2028}' | '\u{2029}')
            || crate::validate::is_invisible(c) =>
        {
            Some('\u{fffd}')
        }
        _ => None,
    }
}

/// Inline text: `\` `` ` `` `*` `_` `[` `]` `<` `>` `|` `~` `&` `!` `#`
/// escaped, control characters (newlines included) shown as symbols.
/// Punctuation that means something only at the start of a line (`-`,
/// `+`, `.`, `(`, `:`) is left as it is.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '~' | '&' | '!' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(picture(c).unwrap_or(c)),
        }
    }
    out
}

/// A code span when `s` is made only of characters that cannot end or
/// break one (ids, hashes, plain paths); otherwise [`esc`].
pub fn code(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "._/:@+=-~".contains(c));
    if plain {
        format!("`{s}`")
    } else {
        esc(s)
    }
}

/// A one-line value as a code span if it can be one, else as a fenced
/// block on lines of its own (a command with a line end or a backtick).
pub fn command(s: &str) -> String {
    if !s.contains(['\n', '`', '\r']) && !s.is_empty() && s.chars().all(|c| picture(c).is_none()) {
        let pad = if s.starts_with(' ') || s.ends_with(' ') {
            " "
        } else {
            ""
        };
        format!("`{pad}{s}{pad}`")
    } else {
        format!("\n\n{}", fenced("sh", s))
    }
}

/// `text` in a fenced block of `lang`: ANSI escape sequences dropped,
/// control characters other than line ends and tabs shown as symbols,
/// and a fence longer than any backtick run in the text, so nothing
/// inside can end the block.
pub fn fenced(lang: &str, text: &str) -> String {
    let clean = strip_ansi(text);
    let mut body = String::with_capacity(clean.len());
    for c in clean.chars() {
        match c {
            '\n' | '\t' => body.push(c),
            c => body.push(picture(c).unwrap_or(c)),
        }
    }
    let longest = body.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = body.trim_end_matches('\n');
    format!("{fence}{lang}\n{body}\n{fence}\n")
}

/// `s` without ANSI escape sequences (CSI `ESC [ … final`, OSC `ESC ] …
/// BEL|ST`, and two-byte `ESC x`), as terminals would not show them.
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut it = s.chars().peekable();
    while let Some(c) = it.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match it.next() {
            Some('[') => {
                for c in it.by_ref() {
                    if ('\u{40}'..='\u{7e}').contains(&c) {
                        break;
                    }
                }
            }
            Some(']') => {
                while let Some(c) = it.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    if c == '\u{1b}' && it.peek() == Some(&'\\') {
                        it.next();
                        break;
                    }
                }
            }
            _ => {}
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaped_text_cannot_start_structure() {
        let hostile =
            "x |\n- outcome: completed\n# H [l](http://e) `c` <b> *e* 1. \\ &amp; \u{202E}";
        let e = esc(hostile);
        assert!(!e.contains('\n') && !e.contains('\u{202E}'));
        assert!(!fenced("text", "a\u{2066}b").contains('\u{2066}'));
        for ch in ['|', '`', '[', '<', '*', '#', '&'] {
            let unescaped = e
                .char_indices()
                .any(|(i, c)| c == ch && (i == 0 || e.as_bytes()[i - 1] != b'\\'));
            assert!(!unescaped, "{ch} unescaped in {e}");
        }
        assert_eq!(code("local-abc_1.2"), "`local-abc_1.2`");
        assert_eq!(code("a`b"), "a\\`b");
    }

    #[test]
    fn readable_text_stays_readable() {
        assert_eq!(
            esc("namespaces (auto (default): ok); network on"),
            "namespaces (auto (default): ok); network on"
        );
    }

    #[test]
    fn no_text_can_end_its_fence() {
        let text = "a\n```\nb ```` c\n\u{1b}[31mred\u{1b}[0m \u{7}";
        let f = fenced("text", text);
        let fence = f.lines().next().unwrap().trim_end_matches("text");
        assert_eq!(fence, "`````");
        assert_eq!(f.lines().filter(|l| l.starts_with(fence)).count(), 2, "{f}");
        assert!(f.contains("red \u{2407}"), "{f}");
        assert!(!f.contains('\u{1b}'), "{f}");
    }

    #[test]
    fn a_command_is_a_span_when_it_can_be_and_a_block_otherwise() {
        assert_eq!(command("cargo test"), "`cargo test`");
        assert!(command("a\nb").starts_with("\n\n```sh\na\nb\n```"));
        assert!(command("echo `x`").contains("```sh\necho `x`\n```"));
    }

    #[test]
    fn ansi_sequences_are_dropped() {
        assert_eq!(
            strip_ansi("\u{1b}[1;31mA\u{1b}[0m\u{1b}]0;title\u{7}B\u{1b}]8;;x\u{1b}\\C"),
            "ABC"
        );
    }
}
