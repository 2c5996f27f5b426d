//! Uploading a file into a `local` sandbox: the path the sandbox sees
//! (below its home or its `/tmp`) is mapped to the sandbox's folder on
//! the host, and the file is placed there by descriptor beneath that
//! folder ([`crate::untrusted_tree::place_file`]): the home is the
//! sandbox's to change, so a folder on the way may be a link it planted,
//! which is refused, never followed onto the host.

use std::path::{Component, Path, PathBuf};

use super::{io_err, LocalProvider, HOME_INSIDE};
use crate::provider::{ProviderError, ProviderResult};

impl LocalProvider {
    pub(super) async fn upload_file(
        &self,
        id: &str,
        local: &Path,
        remote_path: &str,
    ) -> ProviderResult<()> {
        let info = self.info(id)?;
        let dir = self.dir(id)?;
        let tmp_inside = if info.home == HOME_INSIDE {
            PathBuf::from("/tmp")
        } else {
            dir.join("tmp")
        };
        let (layer, rel) = place(Path::new(remote_path), Path::new(&info.home), &tmp_inside)
            .ok_or_else(|| {
                ProviderError::Invalid(format!(
                    "upload target {remote_path} is not below sandbox {id}'s home ({}) or its /tmp",
                    info.home
                ))
            })?;
        let (root, local) = (dir.join(layer), local.to_path_buf());
        tokio::task::spawn_blocking(move || {
            let root = crate::untrusted_tree::open_root(&root)?;
            crate::untrusted_tree::place_file(&root, &rel, &local)
        })
        .await
        .map_err(|e| ProviderError::Io(e.to_string()))?
        .map_err(|e| io_err(&format!("copying into sandbox {id} at {remote_path}"), e))
    }
}

/// The sandbox's folder (`home` or `tmp`) and the path below it of
/// `remote`, a path inside the sandbox: `None` when it is below neither
/// or is not a plain path (`..`, `.`).
fn place(remote: &Path, home: &Path, tmp: &Path) -> Option<(&'static str, PathBuf)> {
    let (layer, rest) = match remote.strip_prefix(home) {
        Ok(rest) => ("home", rest),
        Err(_) => ("tmp", remote.strip_prefix(tmp).ok()?),
    };
    let plain = rest.components().all(|c| matches!(c, Component::Normal(_)));
    (plain && rest.file_name().is_some()).then(|| (layer, rest.to_path_buf()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_upload_lands_below_the_home_or_tmp_and_nowhere_else() {
        let (home, tmp) = (Path::new(HOME_INSIDE), Path::new("/tmp"));
        let at = |r: &str| place(Path::new(r), home, tmp);
        assert_eq!(at("/home/rfs/a/b.tar"), Some(("home", "a/b.tar".into())));
        assert_eq!(at("/tmp/x"), Some(("tmp", "x".into())));
        for refused in [
            "/home/rfs",
            "/home/rfs/../etc/passwd",
            "/home/other/x",
            "/etc/passwd",
            "/tmp",
            "relative/x",
        ] {
            assert_eq!(at(refused), None, "{refused}");
        }
    }
}
