//! Checks of path-, name- and env-shaped input, in one place: the script
//! boundary (option parsing) and the providers (defence in depth) call the
//! same functions, so a rule cannot drift between them. Anything echoed
//! back in a message goes through [`shown`].

/// Why a path-, name- or env-shaped input is refused. Values are kept
/// raw; the messages show them through [`shown`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    #[error("an environment variable name is empty")]
    EnvNameEmpty,
    #[error(
        "environment variable name {} is not a valid name (letters, digits and `_`, not starting with a digit)",
        shown(.0)
    )]
    EnvNameInvalid(String),
    #[error("the value of environment variable {} contains a NUL byte", shown(.0))]
    EnvValueNul(String),
    /// `what` names the input ("its cwd", "a step name", ...).
    #[error("{what} is empty")]
    Empty { what: &'static str },
    #[error("{what} {} contains a NUL byte", shown(.value))]
    Nul { what: &'static str, value: String },
    #[error("{what} {} contains a line break", shown(.value))]
    LineBreak { what: &'static str, value: String },
    #[error("{what} {} contains control characters", shown(.value))]
    ControlCharacters { what: &'static str, value: String },
    /// Bidi overrides and isolates, zero-width characters and the BOM:
    /// text that displays as something other than what it is.
    #[error("{what} {} contains the invisible character U+{:04X} (bidi controls, zero-width characters and byte-order marks make a name read as something it is not)", shown(.value), *.ch as u32)]
    Invisible {
        what: &'static str,
        value: String,
        ch: char,
    },
    /// A destination that is not a plain relative path (`..`, absolute,
    /// empty).
    #[error(
        "{what} {} must be a relative path below the sandbox home without `..`",
        shown(.value)
    )]
    NotBelowHome { what: &'static str, value: String },
}

/// Why an environment variable name is refused, if it is.
///
/// Names follow POSIX (`[A-Za-z_][A-Za-z0-9_]*`): a shell silently drops
/// other names from the environment, so a name with a space, a `=` or a
/// NUL would be accepted here and never reach the command.
pub fn env_name(name: &str) -> Result<(), InputError> {
    let mut chars = name.chars();
    let ok = match chars.next() {
        None => return Err(InputError::EnvNameEmpty),
        Some(c) => c.is_ascii_alphabetic() || c == '_',
    } && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(InputError::EnvNameInvalid(name.to_owned()))
    }
}

/// Why an environment variable (name and value) is refused, if it is.
pub fn env_var(name: &str, value: &str) -> Result<(), InputError> {
    env_name(name)?;
    if value.contains('\0') {
        return Err(InputError::EnvValueNul(name.to_owned()));
    }
    Ok(())
}

/// Why a path-shaped input (`what` names it: "cwd", "dest", ...) is
/// refused, if it is: empty, or containing a NUL byte or a line break.
pub fn path(what: &'static str, p: &str) -> Result<(), InputError> {
    if p.is_empty() {
        return Err(InputError::Empty { what });
    }
    let value = || p.to_owned();
    if p.contains('\0') {
        return Err(InputError::Nul {
            what,
            value: value(),
        });
    }
    if p.contains(['\n', '\r']) {
        return Err(InputError::LineBreak {
            what,
            value: value(),
        });
    }
    Ok(())
}

/// Why a name (step name, label key, ...) is refused, if it is: empty or
/// blank, or containing control characters.
pub fn name(what: &'static str, n: &str) -> Result<(), InputError> {
    let value = || n.to_owned();
    // Before the blank check: U+0085 and U+2028 are also white space,
    // and a name made of one is a line break, not "empty".
    if n.chars().any(char::is_control) {
        return Err(InputError::ControlCharacters {
            what,
            value: value(),
        });
    }
    if n.contains(is_line_break) {
        return Err(InputError::LineBreak {
            what,
            value: value(),
        });
    }
    if let Some(ch) = n.chars().find(|c| is_invisible(*c)) {
        return Err(InputError::Invisible {
            what,
            value: value(),
            ch,
        });
    }
    if n.trim().is_empty() {
        return Err(InputError::Empty { what });
    }
    Ok(())
}

/// Every character Unicode treats as ending a line.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r' | '\u{0B}' | '\u{0C}' | '\u{85}' | '\u{2028}' | '\u{2029}'
    )
}

/// Characters that change how text displays without showing themselves:
/// bidi embeddings, overrides, isolates and marks, zero-width characters,
/// the word joiner and invisible operators, and the byte-order mark.
pub fn is_invisible(c: char) -> bool {
    matches!(
        c,
        '\u{200B}'..='\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{2069}'
            | '\u{061C}'
            | '\u{FEFF}'
    )
}

/// `s` as it may be echoed in a message or on a terminal: in backticks,
/// or, when it holds control characters (NUL, escapes, line breaks),
/// quoted with them escaped.
pub fn shown(s: &str) -> String {
    let hidden = |c: char| c.is_control() || is_invisible(c) || is_line_break(c);
    if !s.chars().any(hidden) {
        return format!("`{s}`");
    }
    // Rust's quoting escapes control characters; whatever invisible
    // character it leaves as it is gets escaped here, so none is echoed raw.
    format!("{s:?}")
        .chars()
        .map(|c| {
            if hidden(c) {
                format!("\\u{{{:x}}}", c as u32)
            } else {
                c.to_string()
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_names_follow_posix() {
        assert!(env_name("PATH").is_ok());
        assert!(env_name("_x1").is_ok());
        for bad in ["", "A B", "A=B", "1A", "A\0", "A-B", "É"] {
            assert!(env_name(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            env_var("A", "x\0y"),
            Err(InputError::EnvValueNul("A".into()))
        );
        assert_eq!(env_name(""), Err(InputError::EnvNameEmpty));
    }

    #[test]
    fn paths_and_names_refuse_nul_and_empty() {
        assert!(path("cwd", "a/b").is_ok());
        assert_eq!(path("cwd", ""), Err(InputError::Empty { what: "cwd" }));
        assert!(path("cwd", "a\0b").unwrap_err().to_string().contains("\\0"));
        assert!(name("step name", " ").is_err());
        assert!(matches!(
            name("step name", "a\u{1b}[2J"),
            Err(InputError::ControlCharacters { .. })
        ));
        assert_eq!(shown("a\0b"), "\"a\\0b\"");
        assert_eq!(shown("a b"), "`a b`");
    }

    #[test]
    fn bidi_and_zero_width_characters_in_names_are_refused_and_shown_escaped() {
        for bad in [
            "build\u{202E}txt.exe",
            "a\u{200B}b",
            "\u{FEFF}step",
            "x\u{2066}y",
        ] {
            let e = name("a step name", bad).unwrap_err();
            assert!(matches!(e, InputError::Invisible { .. }), "{bad:?}: {e}");
            let text = e.to_string();
            assert!(!text.contains(bad), "shown raw: {text}");
            assert!(text.contains("\\u{"), "{text}");
        }
    }

    #[test]
    fn u2028_and_u0085_in_a_name_are_line_breaks_not_empty() {
        for bad in ["\u{2028}", "a\u{2029}b"] {
            assert!(
                matches!(name("a step name", bad), Err(InputError::LineBreak { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            name("a step name", "\u{85}"),
            Err(InputError::ControlCharacters { .. })
        ));
        assert_eq!(name("x", " "), Err(InputError::Empty { what: "x" }));
    }
}
