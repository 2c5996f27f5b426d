//! The shell text rfs sends through the toolbox. Session commands and PTY
//! input are *command lines* read by the sandbox's own shell (zsh on
//! Daytona's default image, bash or sh elsewhere), so every argument is
//! single-quoted, which all of them read the same way. Session exec has
//! no cwd or env (upstream issue 2605): the wrapper enters the directory,
//! exports the environment and runs the command in its own process group
//! (under `setsid`), recorded in `/tmp/.rfs-exec-TOKEN.pgid` so that a
//! timeout or Ctrl-C kills the whole group (with the kill script every shell-driven
//! provider shares, [`crate::provider::process_group`]). The toolbox keeps a session's log and exit code
//! under `$HOME/.daytona`, which a command may remove (`rm -rf "$HOME"`):
//! when that directory is gone at the command's end, the wrapper writes
//! the exit status to `/tmp/.rfs-exec-TOKEN.exit`, where rfs reads it.
//!
//! The wrapper's last word before the command starts is the line
//! `rfs-daytona:TOKEN:start` on stderr (which rfs strips). Its refusals
//! (`rfs-daytona:TOKEN:nocwd`, exit 125, ...) can only come before that
//! line: whatever follows it is the command's own output, so a command
//! that prints a refusal line (it can find the token in `/tmp` or in
//! `/proc`) and exits 125 is a failed command, never a refusal.

/// Non-PTY wrapper. Arguments: TOKEN SESSION_DIR CWD K=V... -- argv...
/// (SESSION_DIR: where the toolbox keeps this command's log and exit code;
/// when it is gone at the end, or unknown, the exit status also goes to
/// `/tmp/.rfs-exec-TOKEN.exit`).
const EXEC_SCRIPT: &str = r#"t=$1; x=$2; d=$3; shift 3
m=rfs-daytona:$t
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do export "$1" 2>/dev/null || { echo "$m:env" >&2; exit 125; }; shift; done
shift
cd -- "$d" 2>/dev/null || { echo "$m:nocwd" >&2; exit 125; }
command -v setsid >/dev/null 2>&1 || { echo "$m:nosetsid" >&2; exit 125; }
f=/tmp/.rfs-exec-$t.pgid
setsid sh -c '{ echo $$ > "$0"; } 2>/dev/null || { echo "$1:nopgid" >&2; exit 125; }; echo "$1:start" >&2; shift; exec "$@"' "$f" "$m" "$@" </dev/null &
wait $!
r=$?
rm -f "$f"
if [ -n "$x" ] && [ -d "$x" ]; then { echo "$r" > "$x/.rfs-exit-$t"; } 2>/dev/null
else { echo "$r" > "$f.exit.new" && mv -f "$f.exit.new" "/tmp/.rfs-exec-$t.exit"; } 2>/dev/null; fi
exit $r
"#;

/// PTY wrapper, run by the launcher the PTY's login shell is told to
/// `exec` (see [`pty_launcher`]), so that the command replaces it.
/// Arguments: TOKEN CWD K=V... -- argv...
/// It prints a marker (built with printf, so that the marker text appears
/// in no command line); everything before the marker is the shell's
/// prompt and echo and is dropped.
const PTY_SCRIPT: &str = r#"t=$1; d=$2; shift 2
while [ "$#" -gt 0 ] && [ "$1" != -- ]; do export "$1" 2>/dev/null; shift; done
shift
{ echo $$ > "/tmp/.rfs-exec-$t.pgid"; } 2>/dev/null
cd -- "$d" 2>/dev/null || { printf 'rfs-%s-%s\n' "$t" nocwd; exit 125; }
printf 'rfs-%s-%s\n' "$t" ready
exec "$@"
"#;

/// Exit status of the wrapper when it refused (its marker says why).
pub(super) const EXIT_SETUP: i32 = 125;

/// A fresh random token for one command.
pub(super) fn token() -> String {
    crate::provider::process_group::token()
}

/// `s` as one single-quoted shell word.
pub(super) fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// A command line running `argv` (each word quoted).
pub(super) fn join(argv: &[String]) -> String {
    argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

/// Refuse environment names the wrapper cannot export.
pub(super) fn check_env(env: &[(String, String)]) -> Result<(), crate::provider::ProviderError> {
    for (k, v) in env {
        crate::validate::env_var(k, v)
            .map_err(|e| crate::provider::ProviderError::Invalid(e.to_string()))?;
    }
    Ok(())
}

fn args(token: &str, cwd: &str, env: &[(String, String)], argv: &[String]) -> Vec<String> {
    let mut v = vec![token.to_owned(), cwd.to_owned()];
    v.extend(env.iter().map(|(k, val)| format!("{k}={val}")));
    v.push("--".into());
    v.extend(argv.iter().cloned());
    v
}

/// The session command line running `argv` in `cwd` with `env`;
/// `session_dir`: the toolbox's directory of this command's session, if
/// known.
pub(super) fn exec_line(
    token: &str,
    session_dir: Option<&str>,
    cwd: &str,
    env: &[(String, String)],
    argv: &[String],
) -> String {
    let mut v = vec![
        "/bin/sh".into(),
        "-c".into(),
        EXEC_SCRIPT.into(),
        "rfs-exec".into(),
    ];
    let mut rest = args(token, cwd, env, argv);
    rest.insert(1, session_dir.unwrap_or_default().to_owned());
    v.extend(rest);
    join(&v)
}

/// Where the PTY launcher for `token` is uploaded.
pub(super) fn pty_launcher_path(token: &str) -> String {
    format!("/tmp/.rfs-pty-{token}.sh")
}

/// The PTY launcher: a script that removes itself, then `exec`s the
/// wrapper with its arguments (cwd, env, argv). It is uploaded, not
/// typed, so that what the login shell echoes stays one short line
/// whatever the environment holds: a line editor echoes a typed line one
/// byte at a time, and a long one (every `K=V` of the environment) came
/// back as a thousand one-byte frames, enough to make the daemon drop the
/// connection as a slow consumer before the command even started.
pub(super) fn pty_launcher(
    token: &str,
    cwd: &str,
    env: &[(String, String)],
    argv: &[String],
) -> String {
    let mut v = vec![
        "/bin/sh".into(),
        "-c".into(),
        PTY_SCRIPT.into(),
        "rfs-pty".into(),
    ];
    v.extend(args(token, cwd, env, argv));
    format!("rm -f -- \"$0\"\nexec {}\n", join(&v))
}

/// The line typed into a PTY's shell: run the uploaded launcher.
pub(super) fn pty_line(token: &str) -> String {
    format!("exec /bin/sh {}\n", quote(&pty_launcher_path(token)))
}

/// The PTY marker that ends the shell's preamble.
pub(super) fn pty_ready(token: &str) -> String {
    format!("rfs-{token}-ready")
}

/// The PTY marker for a missing cwd.
pub(super) fn pty_nocwd(token: &str) -> String {
    format!("rfs-{token}-nocwd")
}

/// The command line printing the exit status the wrapper recorded for
/// `token`; fails while there is none. Recorded in the session's
/// directory (removed with the session), it is followed by a line `kept`:
/// the toolbox's log is still there, held open by a process the command
/// left running. Recorded in `/tmp` (the command removed the session's
/// directory), it is removed once read.
pub(super) fn exit_status_line(token: &str, session_dir: Option<&str>) -> String {
    let f = quote(&format!("/tmp/.rfs-exec-{token}.exit"));
    match session_dir {
        Some(d) => {
            let k = quote(&format!("{d}/.rfs-exit-{token}"));
            format!("{{ cat {k} 2>/dev/null && echo kept; }} || {{ cat {f} && rm -f {f}; }}")
        }
        None => format!("cat {f} && rm -f {f}"),
    }
}

/// The command line that kills the group recorded for `token`.
pub(super) fn kill_line(token: &str) -> String {
    join(&crate::provider::process_group::kill_argv(token))
}

/// Exit status of the kill script when no group was recorded.
pub use crate::provider::process_group::KILL_NOTHING_RECORDED;

/// What the wrapper's marker line says went wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    Cwd,
    Env,
    Setsid,
    PgidFile,
}

/// The wrapper's marker prefix for `token`.
pub(super) fn marker(token: &str) -> String {
    format!("rfs-daytona:{token}:")
}

/// The line the wrapper prints on stderr right before the command starts.
pub(super) fn start_line(token: &str) -> String {
    format!("{}start\n", marker(token))
}

/// Recognise the wrapper's marker line at the start of `stderr`.
pub(super) fn refusal(token: &str, stderr: &[u8]) -> Option<Refusal> {
    let text = std::str::from_utf8(stderr).ok()?;
    let rest = text.strip_prefix(&marker(token))?;
    match rest.lines().next()?.trim() {
        "nocwd" => Some(Refusal::Cwd),
        "env" => Some(Refusal::Env),
        "nosetsid" => Some(Refusal::Setsid),
        "nopgid" => Some(Refusal::PgidFile),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn sh(line: &str) -> std::process::Output {
        Command::new("/bin/sh")
            .arg("-c")
            .arg(line)
            .output()
            .unwrap()
    }

    #[test]
    fn quoting_survives_the_shell() {
        let nasty = "a'b \"c\" $HOME `x` \\n\nline2 ;|&";
        let out = sh(&format!("printf %s {}", quote(nasty)));
        assert_eq!(String::from_utf8_lossy(&out.stdout), nasty);
    }

    #[test]
    fn exec_line_sets_cwd_env_and_keeps_streams_apart() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().to_str().unwrap();
        let t = format!("tok1-{}", token());
        let line = exec_line(
            &t,
            Some(d),
            d,
            &[("A".into(), "1".into()), ("A".into(), "it's 2".into())],
            &[
                "/bin/sh".into(),
                "-c".into(),
                "pwd; echo \"$A\"; echo err >&2; exit 7".into(),
            ],
        );
        let out = sh(&line);
        assert_eq!(out.status.code(), Some(7));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.ends_with("it's 2\n"), "{stdout}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("{}err\n", start_line(&t))
        );
        assert!(!std::path::Path::new(&format!("/tmp/.rfs-exec-{t}.pgid")).exists());
        // The toolbox's session directory is there: no status file in /tmp.
        assert!(!std::path::Path::new(&format!("/tmp/.rfs-exec-{t}.exit")).exists());
    }

    #[test]
    fn a_removed_session_dir_leaves_the_exit_status_in_tmp() {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session");
        std::fs::create_dir(&session).unwrap();
        let token = format!("tok-{}", token());
        let line = exec_line(
            &token,
            Some(session.to_str().unwrap()),
            dir.path().to_str().unwrap(),
            &[],
            &[
                "/bin/sh".into(),
                "-c".into(),
                "rm -rf session; exit 4".into(),
            ],
        );
        assert_eq!(sh(&line).status.code(), Some(4));
        let f = format!("/tmp/.rfs-exec-{token}.exit");
        let recorded = std::fs::read_to_string(&f);
        let _ = std::fs::remove_file(&f);
        assert_eq!(recorded.unwrap(), "4\n");
    }

    #[test]
    fn a_missing_cwd_is_the_wrappers_refusal() {
        let line = exec_line("tok2", None, "/nonexistent/rfs", &[], &["true".into()]);
        let out = sh(&line);
        assert_eq!(out.status.code(), Some(EXIT_SETUP));
        assert_eq!(refusal("tok2", &out.stderr), Some(Refusal::Cwd));
        assert_eq!(refusal("other", &out.stderr), None);
    }

    #[test]
    fn the_typed_pty_line_stays_short_and_the_launcher_runs_and_removes_itself() {
        let dir = tempfile::tempdir().unwrap();
        let t = format!("tok3-{}", token());
        let big = "x".repeat(5000);
        let launcher = pty_launcher(
            &t,
            dir.path().to_str().unwrap(),
            &[("BIG".into(), big.clone()), ("Q".into(), "it's".into())],
            &[
                "/bin/sh".into(),
                "-c".into(),
                "pwd; echo \"${#BIG} $Q\"".into(),
            ],
        );
        let path = pty_launcher_path(&t);
        std::fs::write(&path, launcher).unwrap();
        let line = pty_line(&t);
        assert!(line.len() < 80, "{line}");
        let out = sh(&line);
        let _ = std::fs::remove_file(format!("/tmp/.rfs-exec-{t}.pgid"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            stdout,
            format!("{}\n{}\n5000 it's\n", pty_ready(&t), dir.path().display())
        );
        assert!(!std::path::Path::new(&path).exists(), "the launcher stayed");
    }

    #[test]
    fn bad_env_names_are_refused() {
        assert!(check_env(&[("OK_1".into(), "x".into())]).is_ok());
        assert!(check_env(&[("1X".into(), "x".into())]).is_err());
        assert!(check_env(&[("A=B".into(), "x".into())]).is_err());
        assert!(check_env(&[("".into(), "x".into())]).is_err());
    }
}
