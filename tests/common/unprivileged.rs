//! Running rfs as an unprivileged user: `nobody` (65534) where the tests
//! run as root (the state directory and the repository are given to it
//! first), else the user running the tests as is.

use std::path::Path;
use std::process::{Command, Output};

use super::{rfs_bin, Rfs};

/// The uid an unprivileged rfs runs as.
pub fn unprivileged_uid() -> u32 {
    // SAFETY: geteuid cannot fail.
    match unsafe { libc::geteuid() } {
        0 => 65534,
        uid => uid,
    }
}

/// `rfs ARGS` in `repo` as [`unprivileged_uid`], with `rfs`'s state
/// directory and provider `local`.
pub fn rfs_unprivileged(rfs: &Rfs, repo: &Path, args: &[&std::ffi::OsStr]) -> Output {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let mut cmd = if root {
        for p in [rfs.state.path(), repo] {
            let st = Command::new("chown")
                .args(["-R", "65534:65534"])
                .arg(p)
                .status()
                .unwrap();
            assert!(st.success(), "chown {}", p.display());
        }
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"]);
        c.arg(rfs_bin());
        c
    } else {
        Command::new(rfs_bin())
    };
    rfs.test_env(&mut cmd);
    cmd.args(args)
        .current_dir(repo)
        .stdin(std::process::Stdio::null())
        .env("HOME", rfs.state.path())
        // git refuses a repository owned by someone else otherwise.
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*");
    cmd.output().unwrap()
}

/// `rfs run SCRIPT --out OUT EXTRA…` of `script` (written by
/// [`Rfs::prepare`]) in `repo` as [`unprivileged_uid`].
pub fn run_unprivileged(rfs: &Rfs, repo: &Path, script: &str, extra: &[&str]) -> super::RunOut {
    let (script_path, out_dir) = rfs.prepare(script);
    let mut args: Vec<&std::ffi::OsStr> = vec![
        "run".as_ref(),
        script_path.as_os_str(),
        "--out".as_ref(),
        out_dir.as_os_str(),
    ];
    args.extend(extra.iter().map(|a| std::ffi::OsStr::new(*a)));
    super::finish(rfs_unprivileged(rfs, repo, &args), out_dir)
}
