//! The in-sandbox protocol for a command's process group, shared by every
//! provider that runs commands through a shell inside the sandbox (docker,
//! daytona, and the next one): the wrapper records the group id of the
//! command in `/tmp/.rfs-exec-TOKEN.pgid` before it starts (TOKEN random
//! per command), and a second command, [`kill_argv`], kills that group
//! (and any process of the same session that moved to another group) and
//! waits until they are gone. The record is removed when the command ends.

/// Kill the group recorded for TOKEN and wait until its processes are gone.
/// Exit 0: killed (or ended); 3: no group recorded within 2 s; 4: processes
/// survived SIGKILL for 5 s.
pub const KILL_SCRIPT: &str = r#"f=/tmp/.rfs-exec-$1.pgid
i=0
while [ ! -s "$f" ]; do
  i=$((i+1)); [ "$i" -gt 40 ] && exit 3
  sleep 0.05
done
p=$(cat "$f") || exit 3
case "$p" in ''|*[!0-9]*) exit 3 ;; esac
kill -9 -"$p" 2>/dev/null
i=0
while :; do
  left=0; zombies=0
  for d in /proc/[0-9]*; do
    read -r s < "$d/stat" 2>/dev/null || continue
    s=${s##*) }
    set -- $s
    [ "$4" = "$p" ] || continue
    if [ "$1" = Z ]; then zombies=1; else left=1; kill -9 "${d#/proc/}" 2>/dev/null; fi
  done
  [ "$left" = 0 ] && { [ "$zombies" = 0 ] || [ "$i" -ge 20 ]; } && break
  i=$((i+1))
  [ "$i" -gt 100 ] && exit 4
  sleep 0.05
done
rm -f "$f"
exit 0
"#;

/// Exit status of the kill script when no group was recorded.
pub const KILL_NOTHING_RECORDED: i32 = 3;

/// A fresh random token for one command.
pub fn token() -> String {
    uuid::Uuid::new_v4().simple().to_string()
}

/// Where the group of the command with `token` is recorded.
pub fn pgid_path(token: &str) -> String {
    format!("/tmp/.rfs-exec-{token}.pgid")
}

/// argv of the command that kills the group recorded for `token`.
pub fn kill_argv(token: &str) -> Vec<String> {
    vec![
        "/bin/sh".into(),
        "-c".into(),
        KILL_SCRIPT.into(),
        "rfs-kill".into(),
        token.into(),
    ]
}

/// argv that removes the group record of `token`.
pub fn cleanup_argv(token: &str) -> Vec<String> {
    vec!["rm".into(), "-f".into(), pgid_path(token)]
}
