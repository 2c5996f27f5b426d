//! The environment a command in a sandbox starts with.

use super::*;

/// The PATH local sandboxes see: the host's standard system directories.
pub(super) fn host_path() -> &'static str {
    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
}

/// PATH, HOME and TMPDIR of every command (an isolated sandbox's own tmp
/// is its /tmp).
pub(super) fn base_env(home: &str, isolated: bool) -> Vec<(String, String)> {
    let tmp = if isolated {
        "/tmp".to_owned()
    } else {
        Path::new(home).with_file_name("tmp").display().to_string()
    };
    vec![
        ("PATH".to_owned(), host_path().to_owned()),
        ("HOME".to_owned(), home.to_owned()),
        ("TMPDIR".to_owned(), tmp),
    ]
}
