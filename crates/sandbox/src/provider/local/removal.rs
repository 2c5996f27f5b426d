//! Removing a sandbox's folders: a step may have made any directory
//! read-only (`chmod -w`), which must not block the removal.

use std::path::Path;

/// Make every directory below `dir` writable so that removal cannot be
/// blocked by a step that ran `chmod -w`.
pub(super) fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            make_writable(&e.path());
        }
    }
}
