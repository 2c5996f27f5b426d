//! The small `sh` programs rfs runs inside a container around user commands,
//! and the recognition of their (and the runtime's) setup failures.
//!
//! A command runs as `/bin/sh -c EXEC_SCRIPT rfs-exec TOKEN STDIN argv...`.
//! The wrapper
//! 1. checks that `argv[0]` is an executable file (on `PATH` or by path) and
//!    otherwise prints a marker line `rfs-wrapper:TOKEN:noexec` on stderr;
//! 2. records its process group id in `/tmp/.rfs-exec-TOKEN.pgid`. Docker
//!    (runc) starts every exec as a session leader, so the wrapper's own pid
//!    is the group id and the command runs as its foreground child; when the
//!    wrapper is not a group leader (another runtime), the command runs under
//!    `setsid` instead;
//! 3. when STDIN is not empty, takes its standard input from that path (the
//!    stream's lane, module `lane`), opened after the record is written so
//!    that a command stuck opening it can still be killed (`command exec`:
//!    a path that cannot be opened is a marker `…:nostdin`, not a shell
//!    that exits with a code the command could have meant);
//! 4. runs the command with `exec` (never a shell builtin) and removes the
//!    record when it ends.
//!
//! [`kill_argv`] (the protocol shared with every provider that runs
//! commands through a shell in the sandbox, [`crate::provider::process_group`])
//! is the second exec that kills the recorded group. The TOKEN is random
//! per command, so a marker cannot be produced by a user command by
//! accident.

/// Shell function `__rfs_find NAME`: true when NAME is an executable file,
/// looked up on `PATH` unless it contains a slash.
const FIND_FN: &str = r#"__rfs_find() {
  case "$1" in
    */*) [ -f "$1" ] && [ -x "$1" ]; return ;;
  esac
  __rfs_ifs=$IFS; IFS=:
  for __rfs_d in $PATH; do
    if [ -f "${__rfs_d:-.}/$1" ] && [ -x "${__rfs_d:-.}/$1" ]; then IFS=$__rfs_ifs; return 0; fi
  done
  IFS=$__rfs_ifs; return 1
}
"#;

/// The command wrapper. Arguments: TOKEN STDIN argv...
const EXEC_SCRIPT: &str = r#"__rfs_t=$1; __rfs_in=$2; shift 2
__rfs_f=/tmp/.rfs-exec-$__rfs_t.pgid
__rfs_m=rfs-wrapper:$__rfs_t
__rfs_find "$1" || { echo "$__rfs_m:noexec" >&2; exit 127; }
__rfs_leader() {
  read -r __rfs_s < /proc/$$/stat || return 1
  __rfs_s=${__rfs_s##*) }
  set -- $__rfs_s
  [ "$3" = "$$" ]
}
if __rfs_leader; then
  { echo $$ > "$__rfs_f"; } 2>/dev/null || { echo "$__rfs_m:nopgid" >&2; exit 125; }
  [ -z "$__rfs_in" ] || { command exec < "$__rfs_in"; } 2>/dev/null \
    || { rm -f "$__rfs_f"; echo "$__rfs_m:nostdin" >&2; exit 125; }
  ( exec "$@" )
  __rfs_r=$?
else
  __rfs_find setsid || { echo "$__rfs_m:nosetsid" >&2; exit 125; }
  [ -z "$__rfs_in" ] || { command exec < "$__rfs_in"; } 2>/dev/null \
    || { echo "$__rfs_m:nostdin" >&2; exit 125; }
  # An asynchronous command's stdin is /dev/null before its own
  # redirections (POSIX), so `0<&0` would hand it /dev/null: keep it on 3.
  exec 3<&0
  setsid sh -c '{ echo $$ > "$0"; } 2>/dev/null || { echo "$1:nopgid" >&2; exit 125; }; shift; exec "$@"' "$__rfs_f" "$__rfs_m" "$@" 0<&3 3<&- &
  wait $!
  __rfs_r=$?
fi
rm -f "$__rfs_f"
exit $__rfs_r
"#;

/// PTY wrapper: record the session's group, then become the command.
/// Arguments: TOKEN argv...
const PTY_SCRIPT: &str = r#"{ echo $$ > "/tmp/.rfs-exec-$1.pgid"; } 2>/dev/null
stty cols "$2" rows "$3" 2>/dev/null
shift 3
exec "$@"
"#;

pub use crate::provider::process_group::{cleanup_argv, kill_argv, token, KILL_NOTHING_RECORDED};

/// The wrapped argv for a command; `stdin`, a path in the sandbox the
/// command's standard input is read from (instead of the exec's own).
pub(super) fn exec_argv(token: &str, stdin: Option<&str>, argv: &[String]) -> Vec<String> {
    let mut v = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        format!("{FIND_FN}{EXEC_SCRIPT}"),
        "rfs-exec".to_string(),
        token.to_string(),
        stdin.unwrap_or_default().to_string(),
    ];
    v.extend(argv.iter().cloned());
    v
}

/// The wrapped argv for a PTY session.
/// The terminal gets its size before the program starts (Docker applies
/// a resize only once the exec runs, too late for a program that reads its
/// size at start-up).
pub(super) fn pty_argv(token: &str, cols: u16, rows: u16, argv: &[String]) -> Vec<String> {
    let mut v = vec![
        "/bin/sh".to_string(),
        "-c".to_string(),
        PTY_SCRIPT.to_string(),
        "rfs-pty".to_string(),
        token.to_string(),
        cols.to_string(),
        rows.to_string(),
    ];
    v.extend(argv.iter().cloned());
    v
}

/// argv of a check that `program` is an executable (exit 0) or not (1).
pub(super) fn find_argv(program: &str) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        format!("{FIND_FN}__rfs_find \"$1\""),
        "rfs-find".into(),
        program.into(),
    ]
}

/// A setup failure reported by the wrapper itself: what was missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WrapperFailure {
    /// `argv[0]` is not an executable file.
    Executable,
    /// The process group could not be recorded in /tmp.
    PgidFile,
    /// The wrapper needed `setsid` and the image has none.
    Setsid,
    /// The path the command's standard input comes from cannot be opened.
    Stdin,
}

/// Recognise the wrapper's marker line for `token` at the start of `chunk`.
pub(super) fn wrapper_failure(token: &str, chunk: &[u8]) -> Option<WrapperFailure> {
    let text = std::str::from_utf8(chunk).ok()?;
    let rest = text.strip_prefix("rfs-wrapper:")?.strip_prefix(token)?;
    match rest.trim_end() {
        ":noexec" => Some(WrapperFailure::Executable),
        ":nopgid" => Some(WrapperFailure::PgidFile),
        ":nosetsid" => Some(WrapperFailure::Setsid),
        ":nostdin" => Some(WrapperFailure::Stdin),
        _ => None,
    }
}

/// A failure of the container runtime to start an exec (Docker reports it
/// as output text plus exit code 126).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum OciFailure {
    /// The working directory does not exist (or cannot be entered).
    Cwd(String),
    /// The executable does not exist.
    Executable(String),
    /// Anything else (unknown user, ...), in the runtime's words.
    Other(String),
}

/// True when `chunk` looks like the start of a runtime exec failure.
pub(super) fn looks_like_oci_failure(chunk: &[u8]) -> bool {
    chunk.starts_with(b"OCI runtime exec failed")
}

/// Classify the runtime's failure text.
pub(super) fn oci_failure(text: &[u8]) -> OciFailure {
    let text = String::from_utf8_lossy(text).trim().to_string();
    if text.contains("chdir to cwd") || text.contains("Cwd must be an absolute path") {
        OciFailure::Cwd(text)
    } else if text.contains("executable file not found")
        || (text.contains("exec: ") && text.contains("no such file or directory"))
    {
        OciFailure::Executable(text)
    } else {
        OciFailure::Other(text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_needs_the_exact_token() {
        assert_eq!(
            wrapper_failure("abc", b"rfs-wrapper:abc:noexec\n"),
            Some(WrapperFailure::Executable)
        );
        assert_eq!(wrapper_failure("abd", b"rfs-wrapper:abc:noexec\n"), None);
        assert_eq!(wrapper_failure("abc", b"rfs-wrapper:abc:other\n"), None);
        assert_eq!(
            wrapper_failure("abc", b"rfs-wrapper:abc:nostdin\n"),
            Some(WrapperFailure::Stdin)
        );
        assert_eq!(wrapper_failure("abc", b"hello"), None);
    }

    /// The wrapper run by this machine's `sh`, as a session leader (the
    /// way Docker starts an exec) or not (the `setsid` branch): a stdin
    /// path it cannot open is the `nostdin` marker and exit 125, never a
    /// shell exit code the command could have meant; one it can open is
    /// the command's standard input.
    #[test]
    fn a_stdin_path_that_cannot_be_opened_is_a_marker_not_an_exit_code() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("input");
        std::fs::write(&input, "from the lane\n").unwrap();
        let input = input.to_str().unwrap();
        let missing = dir.path().join("missing");
        let missing = missing.to_str().unwrap();
        for leader in [true, false] {
            let run = |stdin: &str| {
                let argv = exec_argv("tok", Some(stdin), &["cat".to_string()]);
                let mut cmd = match leader {
                    true => std::process::Command::new("setsid"),
                    false => std::process::Command::new(&argv[0]),
                };
                let args = if leader { &argv[..] } else { &argv[1..] };
                cmd.args(args)
                    .stdin(std::process::Stdio::null())
                    .output()
                    .unwrap()
            };
            let out = run(missing);
            assert_eq!(out.status.code(), Some(125), "leader {leader}: {out:?}");
            assert_eq!(
                wrapper_failure("tok", &out.stderr),
                Some(WrapperFailure::Stdin),
                "leader {leader}: {out:?}"
            );
            let out = run(input);
            assert!(out.status.success(), "leader {leader}: {out:?}");
            assert_eq!(out.stdout, b"from the lane\n");
        }
    }

    /// Bug: where the runtime does not start an exec as a session leader,
    /// the wrapper runs the command under `setsid` in the background, and
    /// a background command's stdin is /dev/null before its redirections,
    /// so `0<&0` gave it /dev/null instead of the exec's input (a streamed
    /// archive arrived empty). Run by this machine's `sh`, not a leader.
    #[test]
    fn a_command_run_under_setsid_reads_its_stdin_not_dev_null() {
        use std::io::Write;
        let argv = exec_argv("tok", None, &["cat".to_string()]);
        let mut child = std::process::Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"the exec's input\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        assert_eq!(out.stdout, b"the exec's input\n");
    }

    #[test]
    fn oci_texts_are_classified() {
        let cwd = b"OCI runtime exec failed: exec failed: unable to start container process: \
chdir to cwd (\"/nope\") set in config.json failed: no such file or directory: unknown";
        assert!(looks_like_oci_failure(cwd));
        assert!(matches!(oci_failure(cwd), OciFailure::Cwd(_)));
        let exe = b"OCI runtime exec failed: exec failed: unable to start container process: \
exec: \"nope\": executable file not found in $PATH: unknown";
        assert!(matches!(oci_failure(exe), OciFailure::Executable(_)));
        let user = b"OCI runtime exec failed: unable to find user x: no matching entries";
        assert!(matches!(oci_failure(user), OciFailure::Other(_)));
        assert!(!looks_like_oci_failure(b"hello"));
    }
}
