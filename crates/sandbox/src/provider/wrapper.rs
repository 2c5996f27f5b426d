//! The in-sandbox wrapper every step goes through (the runtime builds
//! its argv and reads its signals, see `rfs`'s `runtime::step_wrapper`),
//! which a provider may do natively (isolation `gvisor`'s agent; `local`
//! in namespaces, whose command start does the checks, see
//! `local::confine`): the command then starts with one shell instead of
//! two, and what it sees and what rfs reads off its stderr are the same.
//!
//! `/bin/sh -c SCRIPT rfs-wrapper DIR ROOT COMMAND NONCE` started in `/`:
//! `$HOME` (when set) and the synced root `ROOT` must be directories,
//! `cd -P -- DIR` must succeed and its physical path lie inside `ROOT`;
//! then `rfs-started:NONCE` (when `NONCE` is not empty) goes to stderr
//! and the shell becomes `/bin/sh -c -- COMMAND sh`. A failed check writes
//! `rfs-refused:NONCE:WHAT` and exits [`EXIT_CWD_MISSING`] (an escape:
//! `rfs-refused:NONCE:escape:PATH`, [`EXIT_CWD_ESCAPE`]).

/// Exit code when a check failed (root, cwd or home missing).
pub const EXIT_CWD_MISSING: i32 = 121;
/// Exit code when the cwd resolves outside the synced root.
pub const EXIT_CWD_ESCAPE: i32 = 122;
/// The wrapper's `$0`.
pub const NAME: &str = "rfs-wrapper";

/// The directory a wrapped command is started in: it exists in every
/// sandbox, so a removed home or root is named by the wrapper instead of
/// failing the start.
pub const START_DIR: &str = "/";

/// The wrapper (its positional parameters: DIR ROOT COMMAND NONCE).
pub const SCRIPT: &str = r#"__rfs_no() { printf 'rfs-refused:%s:%s\n' "$2" "$1" >&2; exit 121; }
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

/// A wrapped command's argv, taken apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wrapped<'a> {
    pub dir: &'a str,
    pub root: &'a str,
    pub command: &'a str,
    pub nonce: &'a str,
}

impl<'a> Wrapped<'a> {
    /// `argv` taken apart when it is exactly the wrapper's.
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
        ["/bin/sh", "-c", "--", self.command, "sh"]
            .map(String::from)
            .to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_wrappers_exact_argv_is_taken_apart() {
        let a = argv("/tmp", "/tmp", "echo hi", "n1");
        let w = Wrapped::parse(&a).unwrap();
        assert_eq!(
            (w.dir, w.root, w.command, w.nonce),
            ("/tmp", "/tmp", "echo hi", "n1")
        );
        let mut other = a.clone();
        other[2].push(' ');
        assert_eq!(Wrapped::parse(&other), None);
        assert_eq!(Wrapped::parse(&a[..7]), None);
        assert_eq!(w.command_argv(), ["/bin/sh", "-c", "--", "echo hi", "sh"]);
    }
}
