//! `--color auto|always|never`, honouring `NO_COLOR` and `CLICOLOR_FORCE`
//! (<https://no-color.org>, <https://bixense.com/clicolors/>): an explicit
//! flag wins; under `auto`, a non-empty `NO_COLOR` turns colour off, then
//! a `CLICOLOR_FORCE` other than empty or `0` turns it on, else colour is
//! used when stderr is a terminal.

/// The `--color` flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

/// Whether to colour output.
pub(crate) fn enabled(
    choice: ColorChoice,
    stderr_is_tty: bool,
    env: impl Fn(&str) -> Option<String>,
) -> bool {
    match choice {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            if env("NO_COLOR").is_some_and(|v| !v.is_empty()) {
                false
            } else if env("CLICOLOR_FORCE").is_some_and(|v| !v.is_empty() && v != "0") {
                true
            } else {
                stderr_is_tty
            }
        }
    }
}

/// [`enabled`] for this process.
pub(crate) fn decide(choice: ColorChoice) -> bool {
    use std::io::IsTerminal;
    enabled(choice, std::io::stderr().is_terminal(), |k| {
        std::env::var(k).ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn flags_win_over_the_environment() {
        assert!(enabled(
            ColorChoice::Always,
            false,
            with(&[("NO_COLOR", "1")])
        ));
        assert!(!enabled(
            ColorChoice::Never,
            true,
            with(&[("CLICOLOR_FORCE", "1")])
        ));
    }

    #[test]
    fn auto_honours_no_color_then_clicolor_force_then_the_terminal() {
        assert!(!enabled(
            ColorChoice::Auto,
            true,
            with(&[("NO_COLOR", "1")])
        ));
        assert!(!enabled(
            ColorChoice::Auto,
            false,
            with(&[("NO_COLOR", "x"), ("CLICOLOR_FORCE", "1")])
        ));
        assert!(enabled(
            ColorChoice::Auto,
            false,
            with(&[("CLICOLOR_FORCE", "1")])
        ));
        assert!(!enabled(
            ColorChoice::Auto,
            false,
            with(&[("CLICOLOR_FORCE", "0")])
        ));
        assert!(enabled(ColorChoice::Auto, true, with(&[("NO_COLOR", "")])));
        assert!(!enabled(ColorChoice::Auto, false, with(&[])));
    }
}
