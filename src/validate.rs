//! Checks of path-, name- and env-shaped input, in one place: the script
//! boundary (option parsing) and the providers (defence in depth) call the
//! same functions, so a rule cannot drift between them. Anything echoed
//! back in a message goes through [`shown`].

/// Why an environment variable name is refused, if it is.
///
/// Names follow POSIX (`[A-Za-z_][A-Za-z0-9_]*`): a shell silently drops
/// other names from the environment, so a name with a space, a `=` or a
/// NUL would be accepted here and never reach the command.
pub fn env_name(name: &str) -> Result<(), String> {
    let mut chars = name.chars();
    let ok = match chars.next() {
        None => return Err("an environment variable name is empty".into()),
        Some(c) => c.is_ascii_alphabetic() || c == '_',
    } && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "environment variable name {} is not a valid name (letters, digits and `_`, not starting with a digit)",
            shown(name)
        ))
    }
}

/// Why an environment variable (name and value) is refused, if it is.
pub fn env_var(name: &str, value: &str) -> Result<(), String> {
    env_name(name)?;
    if value.contains('\0') {
        return Err(format!(
            "the value of environment variable `{name}` contains a NUL byte"
        ));
    }
    Ok(())
}

/// Why a path-shaped input (`what` names it: "cwd", "dest", ...) is
/// refused, if it is: empty, or containing a NUL byte or a line break.
pub fn path(what: &str, p: &str) -> Result<(), String> {
    if p.is_empty() {
        return Err(format!("{what} is empty"));
    }
    if p.contains('\0') {
        return Err(format!("{what} {} contains a NUL byte", shown(p)));
    }
    if p.contains(['\n', '\r']) {
        return Err(format!("{what} {} contains a line break", shown(p)));
    }
    Ok(())
}

/// Why a name (step name, label key, ...) is refused, if it is: empty or
/// blank, or containing control characters.
pub fn name(what: &str, n: &str) -> Result<(), String> {
    if n.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if n.chars().any(char::is_control) {
        return Err(format!("{what} {} contains control characters", shown(n)));
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
        assert!(env_var("A", "x\0y").is_err());
    }

    #[test]
    fn paths_and_names_refuse_nul_and_empty() {
        assert!(path("cwd", "a/b").is_ok());
        assert!(path("cwd", "").is_err());
        assert!(path("cwd", "a\0b").unwrap_err().contains("\\0"));
        assert!(name("step name", " ").is_err());
        assert!(name("step name", "a\u{1b}[2J").is_err());
        assert_eq!(shown("a\0b"), "\"a\\0b\"");
        assert_eq!(shown("a b"), "`a b`");
    }
}
