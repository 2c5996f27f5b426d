//! The in-sandbox wrapper every command goes through (steps and attached
//! sessions alike): `/bin/sh -c WRAPPER` (never a login shell) enters the
//! mapped cwd, checks that its physical path is inside the synced root,
//! then evaluates the command in that same shell (no second exec: a step
//! costs one shell start, like `sh -c COMMAND`). The command sees no
//! positional parameters and no wrapper variables. If the check fails the
//! command never starts.

/// Exit code when the cwd does not exist in the sandbox.
pub const EXIT_CWD_MISSING: i32 = 121;
/// Exit code when the cwd resolves outside the synced root.
pub const EXIT_CWD_ESCAPE: i32 = 122;

const SCRIPT: &str = r#"cd -P -- "$1" 2>/dev/null || { printf 'rfs-cwd-missing\n' >&2; exit 121; }
case "$PWD/" in "$2"/*) ;; *) printf 'rfs-cwd-escape %s\n' "$PWD" >&2; exit 122;; esac
c=$3; set --; eval "unset c; $c""#;

/// argv running `command` in `dir`, confined to `root` (physical paths).
pub fn argv(dir: &str, root: &str, command: &str) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        SCRIPT.into(),
        "rfs-wrapper".into(),
        dir.into(),
        root.into(),
        command.into(),
    ]
}

/// If the wrapper refused (by exit code and its own stderr marker), the
/// reason; `rel` is the cwd as the script named it.
pub fn refusal(
    exit: Option<i32>,
    stderr: &[u8],
    what: &str,
    rel: &str,
    remote_dir: &str,
    root: &str,
    sandbox_id: &str,
) -> Option<String> {
    let said = String::from_utf8_lossy(stderr);
    if !said.starts_with("rfs-cwd-") {
        return None;
    }
    let shown = if rel.is_empty() { "." } else { rel };
    match exit {
        Some(EXIT_CWD_MISSING) => Some(format!(
            "{what} refused: its cwd `{shown}` ({remote_dir}) does not exist in sandbox {sandbox_id}"
        )),
        Some(EXIT_CWD_ESCAPE) => Some(format!(
            "{what} refused: its cwd `{shown}` resolves to `{}` in sandbox {sandbox_id}, outside the synced root {root}",
            said.trim().trim_start_matches("rfs-cwd-escape ")
        )),
        _ => None,
    }
}
