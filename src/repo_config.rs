//! `rfs.toml`: a repository's own settings, so a team's provider, image
//! and limits live next to its proofs. It sits at the root of the git
//! repository that holds the current directory (or in a folder between
//! the two: the nearest wins). Precedence everywhere: a flag beats the
//! environment, which beats `rfs.toml`, which beats rfs's default.
//! Unknown keys are refused, as a misspelt flag is.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// The file's name.
pub use rfs_sandbox::source::repo::SETTINGS_FILE as FILE;

/// The most bytes read of it.
const MAX_BYTES: u64 = 64 * 1024;

/// What `rfs.toml` may set.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoConfig {
    /// `local`, `docker` or `daytona` (after `--provider` and
    /// `RELAYFLOWS_SANDBOX_PROVIDER`).
    pub provider: Option<String>,
    /// The docker image (after `--image` and `RFS_DOCKER_IMAGE`).
    pub image: Option<String>,
    /// The Daytona snapshot (after `--snapshot` and
    /// `RELAYFLOWS_SANDBOX_SNAPSHOT`).
    pub snapshot: Option<String>,
    /// `auto`, `namespaces` or `none` (after `--isolation` and
    /// `RFS_LOCAL_ISOLATION`).
    pub isolation: Option<String>,
    /// Seconds (after `--max-lifetime`).
    pub max_lifetime: Option<u64>,
    /// The folder `rfs test` runs when given no path, relative to this
    /// file (default `proofs`).
    pub proofs: Option<String>,
    /// The suite's setup script `rfs test` runs once before its proofs
    /// (after `--setup`), relative to this file: a file inside the
    /// repository.
    pub setup: Option<String>,
    /// How many proofs `rfs test` runs at once (after `--jobs` and
    /// `RFS_JOBS`).
    pub jobs: Option<usize>,
    /// Variables the repository's proofs expect as secrets: each must be
    /// handed over by the person running rfs (`--secret NAME` or `--var
    /// NAME=...`), never read from the host by the repository; the run is
    /// refused otherwise. Redacted whatever their name.
    #[serde(default)]
    pub secrets: Vec<String>,
    /// `[limits]`: the repository's default `memory`, `pids`, `disk`,
    /// `cpus` for its sandboxes, under the person's ceilings (a value
    /// above one is refused, naming the flag that would allow it); a
    /// script may ask more, up to the ceiling.
    pub limits: Option<crate::limit_ceilings::RepoLimits>,
    /// Never accepted: read only to refuse it naming `--mount-ro` (a host
    /// folder is the person's to mount, never the repository's).
    #[serde(default)]
    mount_ro: Option<toml::Value>,
    #[serde(default)]
    mounts: Option<toml::Value>,
}

impl RepoConfig {
    /// The key of a host folder the file asked to mount, if any.
    pub fn host_mount_key(&self) -> Option<&'static str> {
        if self.mount_ro.is_some() {
            Some("mount_ro")
        } else {
            self.mounts.is_some().then_some("mounts")
        }
    }
}

/// Why `rfs.toml` was refused.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {reason}")]
pub struct ConfigError {
    pub path: String,
    pub reason: String,
}

/// The `rfs.toml` that applies in `dir`: the nearest one from `dir` up
/// to the root of its git repository (none outside a repository), with
/// its path.
pub fn find(dir: &Path) -> Result<Option<(PathBuf, RepoConfig)>, ConfigError> {
    let Some(root) = git_root(dir) else {
        return Ok(None);
    };
    for d in dir.ancestors() {
        let path = d.join(FILE);
        if std::fs::symlink_metadata(&path).is_ok() {
            return load(&path).map(|c| Some((path, c)));
        }
        if d == root {
            break;
        }
    }
    Ok(None)
}

/// The settings of the `rfs.toml` that applies in `dir` (all unset
/// without one).
pub fn for_dir(dir: &Path) -> Result<RepoConfig, ConfigError> {
    Ok(find(dir)?.map(|(_, c)| c).unwrap_or_default())
}

/// The folder holding `.git` at or above `dir`.
fn git_root(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|d| d.join(".git").exists())
}

/// Parse the file at `path` (a regular file, bounded).
pub fn load(path: &Path) -> Result<RepoConfig, ConfigError> {
    let err = |reason: String| ConfigError {
        path: path.display().to_string(),
        reason,
    };
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(err(
            "it is a symlink: rfs reads a repository's settings only from a regular file, never through a link".into(),
        ));
    }
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or(FILE);
    let bytes = rfs_evidence::out_dir::read_regular(dir, name, MAX_BYTES)
        .map_err(|e| err(format!("cannot read it: {e}")))?;
    let text = String::from_utf8(bytes).map_err(|_| err("it is not UTF-8".into()))?;
    toml::from_str(&text).map_err(|e| err(e.message().to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(".git")).unwrap();
        d
    }

    #[test]
    fn the_nearest_file_in_the_repository_applies() {
        let d = repo();
        std::fs::create_dir_all(d.path().join("a/b")).unwrap();
        std::fs::write(d.path().join(FILE), "provider = \"docker\"\n").unwrap();
        let (path, c) = find(&d.path().join("a/b")).unwrap().unwrap();
        assert_eq!(path, d.path().join(FILE));
        assert_eq!(c.provider.as_deref(), Some("docker"));
        std::fs::write(d.path().join("a").join(FILE), "max_lifetime = 60\n").unwrap();
        let (_, c) = find(&d.path().join("a/b")).unwrap().unwrap();
        assert_eq!((c.provider, c.max_lifetime), (None, Some(60)));
    }

    #[test]
    fn outside_a_repository_there_is_none() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join(FILE), "provider = \"docker\"\n").unwrap();
        assert!(find(d.path()).unwrap().is_none());
    }

    #[test]
    fn unknown_keys_and_wrong_types_are_refused_with_the_path() {
        let d = repo();
        std::fs::write(d.path().join(FILE), "provder = \"docker\"\n").unwrap();
        let e = find(d.path()).unwrap_err().to_string();
        assert!(e.contains("rfs.toml") && e.contains("provder"), "{e}");
        std::fs::write(d.path().join(FILE), "max_lifetime = \"1h\"\n").unwrap();
        assert!(find(d.path()).is_err());
    }
}
