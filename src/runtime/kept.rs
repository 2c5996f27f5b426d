//! The mark `--keep` leaves: a run that kept its sandbox says so under
//! rfs's state folder, and `rfs ps` reads it to tell a kept sandbox from
//! one whose run died.

/// The marker a run leaves when `--keep` keeps sandbox `id` (a run
/// killed before its end leaves none): `<state>/kept/<id>`. `None` for an
/// id that is not a plain file name.
fn kept_marker(state: &std::path::Path, id: &str) -> Option<std::path::PathBuf> {
    let plain = !id.is_empty()
        && !id.starts_with('.')
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    plain.then(|| state.join("kept").join(id))
}

/// Say that `--keep` kept sandbox `id` at the end of its run.
pub(super) fn mark_kept(state: &std::path::Path, id: &str) {
    if let Some(m) = kept_marker(state, id) {
        if let Some(dir) = m.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        let _ = std::fs::write(m, b"");
    }
}

/// Whether a run kept sandbox `id` on purpose (see [`mark_kept`]).
pub(crate) fn was_kept(state: &std::path::Path, id: &str) -> bool {
    kept_marker(state, id).is_some_and(|m| m.is_file())
}
