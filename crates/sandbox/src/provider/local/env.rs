//! The environment a command in a sandbox starts with.

use super::*;

/// The PATH local sandboxes see: the host's standard system directories.
pub(super) fn host_path() -> &'static str {
    "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
}

/// PATH, HOME and TMPDIR of every command (an isolated sandbox's own tmp
/// is its /tmp), and the proxy variables of one behind rfs's egress proxy.
pub(super) fn base_env(home: &str, init: Option<&namespace_init::Init>) -> Vec<(String, String)> {
    let isolated = init.is_some();
    let tmp = if isolated {
        "/tmp".to_owned()
    } else {
        Path::new(home).with_file_name("tmp").display().to_string()
    };
    let mut env = vec![
        ("PATH".to_owned(), host_path().to_owned()),
        ("HOME".to_owned(), home.to_owned()),
        ("TMPDIR".to_owned(), tmp),
    ];
    if init.is_some_and(|i| i.egress.get().is_some()) {
        env.extend(egress::proxy_env());
    }
    env
}
