//! Deciding what a line of input means: a meta-command, an expression that
//! is still open (continue on the next line), or a whole input to evaluate.
//! Openness is decided by Rhai's own parser: an input whose parse error is
//! at its very end (unexpected end, missing closing token, unterminated
//! back-tick string) is incomplete; any other parse error is reported at
//! once.

use rhai::{Engine, ParseErrorType, Position};

/// What the parser says about an input.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Parsed {
    /// Compiles: evaluate it.
    Complete,
    /// More is needed (open bracket, block or string).
    Incomplete,
    /// Wrong whatever follows: report the compile error now.
    Invalid,
}

/// Classify `text` (possibly several lines).
pub(crate) fn classify(engine: &Engine, text: &str) -> Parsed {
    if text.trim().is_empty() {
        return Parsed::Complete;
    }
    let Err(e) = engine.compile(text) else {
        return Parsed::Complete;
    };
    let pos = e.position();
    match e.err_type() {
        ParseErrorType::UnexpectedEOF => Parsed::Incomplete,
        ParseErrorType::BadInput(rhai::LexError::UnterminatedString) => {
            // Back-tick strings span lines; a quoted string does not.
            if char_at(text, pos) == Some('`') {
                Parsed::Incomplete
            } else {
                Parsed::Invalid
            }
        }
        _ if at_end(text, pos) => Parsed::Incomplete,
        _ => Parsed::Invalid,
    }
}

/// The character at a (1-based) Rhai position.
fn char_at(text: &str, pos: Position) -> Option<char> {
    let line = text.lines().nth(pos.line()?.checked_sub(1)?)?;
    line.chars().nth(pos.position()?.checked_sub(1)?)
}

/// Is `pos` past the last non-blank character of `text`?
fn at_end(text: &str, pos: Position) -> bool {
    let Some(line) = pos.line() else {
        return true;
    };
    let trimmed = text.trim_end();
    let last_line = trimmed.lines().count().max(1);
    let last_len = trimmed
        .lines()
        .last()
        .map(|l| l.chars().count())
        .unwrap_or(0);
    match line.cmp(&last_line) {
        std::cmp::Ordering::Greater => true,
        std::cmp::Ordering::Less => false,
        std::cmp::Ordering::Equal => pos.position().is_none_or(|c| c > last_len),
    }
}

/// A meta-command (`:name args`), if the input is one.
pub(crate) fn meta(text: &str) -> Option<(&str, &str)> {
    let t = text.trim();
    let rest = t.strip_prefix(':')?;
    if rest.is_empty() || !rest.starts_with(|c: char| c.is_ascii_alphabetic()) {
        return None;
    }
    Some(match rest.split_once(char::is_whitespace) {
        Some((name, args)) => (name, args.trim()),
        None => (rest, ""),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(text: &str) -> Parsed {
        classify(&Engine::new_raw(), text)
    }

    #[test]
    fn open_brackets_blocks_and_backtick_strings_are_incomplete() {
        for t in [
            "let x = [",
            "let x = [1,\n2,",
            "fn f(a) {",
            "if true {\n  print(1);",
            "let m = #{ a: 1,",
            "foo(1,",
            "let x = 1 +",
            "let s = `two\nlines",
            "let x = (1 + 2",
        ] {
            assert_eq!(c(t), Parsed::Incomplete, "{t:?}");
        }
    }

    #[test]
    fn complete_but_invalid_inputs_are_reported_at_once() {
        for t in ["let x = 1 1;", "let = 3;", "let s = \"open", "1 +* 2", "}"] {
            assert_eq!(c(t), Parsed::Invalid, "{t:?}");
        }
    }

    #[test]
    fn whole_inputs_are_complete() {
        for t in [
            "let x = [1, 2];",
            "x",
            "fn f(a) { a }",
            "",
            "let s = `a\nb`;",
        ] {
            assert_eq!(c(t), Parsed::Complete, "{t:?}");
        }
    }

    #[test]
    fn meta_commands_parse_name_and_arguments() {
        assert_eq!(meta(":journal 5"), Some(("journal", "5")));
        assert_eq!(meta("  :quit "), Some(("quit", "")));
        assert_eq!(meta(":save  a b.rhai"), Some(("save", "a b.rhai")));
        assert_eq!(meta("x :y"), None);
        assert_eq!(meta("::"), None);
    }
}
