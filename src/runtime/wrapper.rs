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

/// Where a command runs, resolved and checked (by `Run::place_command`).
#[derive(Debug, Clone)]
pub struct Placement {
    pub sandbox_id: String,
    /// The sandbox user's home (an existing directory to start in).
    pub home: String,
    /// Relative to the synced root ("" = root).
    pub rel: String,
    pub remote_dir: String,
    pub physical_root: String,
    /// User env followed by the binding env.
    pub env: Vec<(String, String)>,
}

impl Placement {
    /// argv running `command` through the wrapper, confined to the root.
    pub fn argv(&self, command: &str) -> Vec<String> {
        vec![
            "/bin/sh".into(),
            "-c".into(),
            SCRIPT.into(),
            "rfs-wrapper".into(),
            self.remote_dir.clone(),
            self.physical_root.clone(),
            command.into(),
        ]
    }

    /// If the wrapper refused (by exit code and its own stderr marker),
    /// the reason; `what` names the command for the message.
    pub fn refusal(&self, exit: Option<i32>, stderr: &[u8], what: &str) -> Option<String> {
        let said = String::from_utf8_lossy(stderr);
        if !said.starts_with("rfs-cwd-") {
            return None;
        }
        let shown = if self.rel.is_empty() { "." } else { &self.rel };
        let (dir, id) = (&self.remote_dir, &self.sandbox_id);
        match exit {
            Some(EXIT_CWD_MISSING) => Some(format!(
                "{what} refused: its cwd `{shown}` ({dir}) does not exist in sandbox {id}"
            )),
            Some(EXIT_CWD_ESCAPE) => Some(format!(
                "{what} refused: its cwd `{shown}` resolves to `{}` in sandbox {id}, outside the synced root {}",
                said.trim().trim_start_matches("rfs-cwd-escape "),
                self.physical_root
            )),
            _ => None,
        }
    }
}
