//! Which repositories a run may ship: the one rfs was started in, and
//! those the person running rfs names with `--allow-repo`. A script's
//! `sync_source(#{ repo })` (or a folder whose `.git` file points at
//! another git directory) can only pick among them: the trust model's
//! "a script narrows, never widens".

use std::path::{Path, PathBuf};

/// The repositories a run may ship besides the one rfs was started in
/// (the default: none), by their canonical git directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedRepos {
    /// (git directory, the flag that allowed it).
    dirs: Vec<(PathBuf, String)>,
    /// The files and folders (canonical) a script's `put()` may ship
    /// although they are outside the working tree or ignored by git
    /// (`--allow-put`).
    puts: Vec<PathBuf>,
    /// The files and folders the person named on this command line for
    /// rfs to write (`--junit`, `--out`): not dirt while untracked (see
    /// [`super::own_outputs`]).
    own_outputs: Vec<super::own_outputs::OwnOutput>,
}

/// The canonical common git directory of the repository holding `dir`
/// (worktrees of one repository share it), `None` outside a repository.
pub fn git_dir_of(dir: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(dir).ok()?;
    let common = repo.commondir().to_path_buf();
    Some(common.canonicalize().unwrap_or(common))
}

/// The root of the work tree holding `dir`, `None` outside one.
pub fn work_tree_of(dir: &Path) -> Option<PathBuf> {
    let repo = git2::Repository::discover(dir).ok()?;
    let root = repo.workdir()?.to_path_buf();
    Some(root.canonicalize().unwrap_or(root))
}

impl AllowedRepos {
    /// Each `--allow-repo` path (relative to `invocation_dir`), which must
    /// be inside a repository.
    pub fn new(invocation_dir: &Path, flags: &[PathBuf]) -> Result<Self, String> {
        let mut dirs = vec![];
        for f in flags {
            let abs = invocation_dir.join(f);
            let g = git_dir_of(&abs).ok_or_else(|| {
                format!("--allow-repo {}: not inside a git repository", f.display())
            })?;
            dirs.push((g, format!("--allow-repo {}", f.display())));
        }
        Ok(AllowedRepos {
            dirs,
            puts: vec![],
            own_outputs: vec![],
        })
    }

    /// With each `--allow-put` path (relative to `invocation_dir`), which
    /// must exist.
    pub fn with_puts(mut self, invocation_dir: &Path, flags: &[PathBuf]) -> Result<Self, String> {
        for f in flags {
            let p = invocation_dir
                .join(f)
                .canonicalize()
                .map_err(|e| format!("--allow-put {}: cannot read it: {e}", f.display()))?;
            self.puts.push(p);
        }
        Ok(self)
    }

    /// With the outputs the person named on the command line (absolute,
    /// or relative to `invocation_dir`).
    pub fn with_own_outputs(
        mut self,
        invocation_dir: &Path,
        outputs: &[super::own_outputs::OwnOutput],
    ) -> Self {
        self.own_outputs = outputs
            .iter()
            .map(|o| super::own_outputs::OwnOutput {
                path: invocation_dir.join(&o.path),
                folder: o.folder,
            })
            .collect();
        self
    }

    /// The outputs the person named on the command line for rfs to write.
    pub fn own_outputs(&self) -> &[super::own_outputs::OwnOutput] {
        &self.own_outputs
    }

    /// What `--allow-put` allowed `put()` to ship.
    pub fn puts(&self) -> &[PathBuf] {
        &self.puts
    }

    /// Whether `requested` (a script's `repo`, resolved against where rfs
    /// started) may ship; the refusal names the flag that would allow it.
    /// A folder in no repository passes: binding it fails on its own.
    pub fn check(
        &self,
        invocation_dir: &Path,
        requested: &Path,
        as_written: &str,
    ) -> Result<(), String> {
        let Some(g) = git_dir_of(requested) else {
            return Ok(());
        };
        if git_dir_of(invocation_dir).as_ref() == Some(&g) || self.dirs.iter().any(|(d, _)| *d == g)
        {
            return Ok(());
        }
        Err(format!(
            "sync_source(#{{ repo: {as_written:?} }}) names a repository whose git directory is {}, which the person running rfs did not allow (a script may ship only the repository rfs was started in); to allow it, pass --allow-repo {as_written}",
            g.display()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo(dir: &Path) {
        git2::Repository::init(dir).unwrap();
    }

    #[test]
    fn a_script_may_not_ship_another_repository_unless_the_person_allows_it() {
        let d = tempfile::tempdir().unwrap();
        let (mine, other) = (d.path().join("mine"), d.path().join("other"));
        std::fs::create_dir_all(mine.join("sub")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        repo(&mine);
        repo(&other);
        let a = AllowedRepos::new(&mine, &[]).unwrap();
        assert!(a.check(&mine, &mine.join("sub"), "sub").is_ok());
        let e = a.check(&mine, &other, "../other").unwrap_err();
        assert!(e.contains("--allow-repo ../other"), "{e}");
        let a = AllowedRepos::new(&mine, &[PathBuf::from("../other")]).unwrap();
        assert!(a.check(&mine, &other, "../other").is_ok());
    }

    #[test]
    fn a_git_file_pointing_elsewhere_is_another_repository() {
        let d = tempfile::tempdir().unwrap();
        let (mine, other) = (d.path().join("mine"), d.path().join("other"));
        std::fs::create_dir_all(mine.join("decoy")).unwrap();
        std::fs::create_dir_all(&other).unwrap();
        repo(&mine);
        repo(&other);
        std::fs::write(
            mine.join("decoy/.git"),
            format!("gitdir: {}\n", other.join(".git").display()),
        )
        .unwrap();
        let a = AllowedRepos::new(&mine, &[]).unwrap();
        assert!(a.check(&mine, &mine.join("decoy"), "decoy").is_err());
    }
}
