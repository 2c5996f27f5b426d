//! The in-sandbox wrapper every command of a run goes through (steps,
//! background processes, attached sessions): its shell script and argv,
//! which any provider runs as it runs any command, and what a provider
//! that can do the wrapper's checks itself needs to recognise it
//! ([`Wrapped::parse`]; `local` in namespaces, saving a shell per
//! command, see [`super::local`]).
//!
//! `/bin/sh -c WRAPPER rfs-wrapper DIR ROOT COMMAND NONCE` (never a login
//! shell) starts in [`START_DIR`] (which exists in every sandbox), checks
//! that `$HOME` and the synced root exist, enters the mapped cwd, checks
//! that its physical path is inside the root, then replaces itself
//! (`exec`, same process) with `/bin/sh -c COMMAND sh`
//! ([`Wrapped::command_argv`]). On stderr it says `rfs-refused:NONCE:WHAT`
//! (exit [`EXIT_REFUSED`], [`EXIT_ESCAPE`] for an escape) or, right
//! before the command, `rfs-started:NONCE` (see the runtime's gate).

/// Exit code when a check failed (root, cwd or home missing).
pub const EXIT_REFUSED: i32 = 121;
/// Exit code when the cwd resolves outside the synced root.
pub const EXIT_ESCAPE: i32 = 122;

/// The directory a wrapped command is started in: it exists in every
/// sandbox, so a removed home or root is named by the wrapper instead of
/// failing the start.
pub const START_DIR: &str = "/";

/// The wrapper's `$0`.
const NAME: &str = "rfs-wrapper";

/// The wrapper. A provider doing its checks itself must do exactly these,
/// in this order, as the command's process (no privilege the command
/// lacks), and leave the command the environment this leaves it: `PWD`
/// the physical cwd and `OLDPWD` the start directory (`cd` exports both).
const SCRIPT: &str = r#"__rfs_no() { printf 'rfs-refused:%s:%s\n' "$2" "$1" >&2; exit 121; }
[ -z "${HOME-}" ] || [ -d "$HOME" ] || __rfs_no home "$4"
[ -d "$2" ] || __rfs_no root "$4"
cd -P -- "$1" 2>/dev/null || __rfs_no cwd "$4"
case "$PWD/" in "$2"/*) ;; *) printf 'rfs-refused:%s:escape:%s\n' "$4" "$PWD" >&2; exit 122;; esac
[ -z "$4" ] || printf 'rfs-started:%s\n' "$4" >&2
unset -f __rfs_no
exec /bin/sh -c -- "$3" sh"#;

/// argv running `command` through the wrapper in `dir` (an absolute path
/// in the sandbox), confined to `root`; its signals carry `nonce` (none
/// when empty).
pub fn argv(dir: &str, root: &str, command: &str, nonce: &str) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        SCRIPT.into(),
        NAME.into(),
        dir.into(),
        root.into(),
        command.into(),
        nonce.into(),
    ]
}

/// A command wrapped by [`argv`], taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wrapped<'a> {
    pub dir: &'a str,
    pub root: &'a str,
    pub command: &'a str,
    pub nonce: &'a str,
}

impl<'a> Wrapped<'a> {
    /// `argv` if it is exactly what [`argv`] makes (the same script).
    pub fn parse(argv: &'a [String]) -> Option<Wrapped<'a>> {
        match argv {
            [sh, c, script, name, dir, root, command, nonce]
                if sh == "/bin/sh" && c == "-c" && script == SCRIPT && name == NAME =>
            {
                Some(Wrapped {
                    dir,
                    root,
                    command,
                    nonce,
                })
            }
            _ => None,
        }
    }

    /// What the wrapper replaces itself with once its checks passed.
    pub fn command_argv(&self) -> Vec<String> {
        vec![
            "/bin/sh".into(),
            "-c".into(),
            "--".into(),
            self.command.into(),
            "sh".into(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_wrappers_own_argv_is_taken_apart() {
        let a = argv("/h/src/sub", "/h/src", "make test", "n1");
        let w = Wrapped::parse(&a).unwrap();
        assert_eq!(
            (w.dir, w.root, w.command, w.nonce),
            ("/h/src/sub", "/h/src", "make test", "n1")
        );
        assert_eq!(w.command_argv(), ["/bin/sh", "-c", "--", "make test", "sh"]);
        let mut other = a.clone();
        other[2].push(' ');
        assert_eq!(Wrapped::parse(&other), None);
        assert_eq!(Wrapped::parse(&a[..7]), None);
        assert_eq!(Wrapped::parse(&["/bin/sh".into(), "-c".into()]), None);
    }
}
