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
    if n.trim().is_empty() {
        return Err(InputError::Empty { what });
    }
    if n.chars().any(char::is_control) {
        return Err(InputError::ControlCharacters {
            what,
            value: n.to_owned(),
        });
    }
    Ok(())
}

/// `s` as it may be echoed in a message or on a terminal: in backticks,
/// or, when it holds control characters (NUL, escapes, line breaks),
/// quoted with them escaped.
pub fn shown(s: &str) -> String {
    if s.chars().any(char::is_control) {
        format!("{s:?}")
    } else {
        format!("`{s}`")
    }
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
}
