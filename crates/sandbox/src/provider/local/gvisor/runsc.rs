//! gVisor's `runsc` on this host: where it is, its version, whether rfs
//! can start it, and the flags of every call rfs makes.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The env var naming the `runsc` to use (a path); else `runsc` on PATH.
pub const RUNSC_ENV: &str = "RFS_RUNSC";
/// The env var naming a directory for runsc's debug logs (`--debug
/// --debug-log=DIR/`): what to look at when a sandbox does not start.
pub const DEBUG_ENV: &str = "RFS_RUNSC_DEBUG";

/// The `runsc` rfs runs, with its version.
#[derive(Debug, Clone)]
pub struct Runsc {
    pub path: PathBuf,
    /// `0.0~20221219.0` (the first line of `runsc --version`).
    pub version: String,
}

/// `runsc` on this host, or why there is none usable; looked up once
/// per process.
pub fn runsc() -> Result<&'static Runsc, String> {
    static FOUND: OnceLock<Result<Runsc, String>> = OnceLock::new();
    FOUND.get_or_init(find).as_ref().map_err(Clone::clone)
}

fn find() -> Result<Runsc, String> {
    let path = match std::env::var_os(RUNSC_ENV).filter(|v| !v.is_empty()) {
        Some(p) => PathBuf::from(p),
        None => on_path("runsc").ok_or_else(|| {
            "runsc is not installed (gVisor's runtime: `apt-get install runsc` on Debian/Ubuntu, or name it with RFS_RUNSC)".to_owned()
        })?,
    };
    let out = Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", path.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("runsc version "))
        .map(|v| v.trim().to_owned())
        .filter(|_| out.status.success())
        .ok_or_else(|| {
            format!(
                "{} --version did not say its version ({}): {}",
                path.display(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })?;
    Ok(Runsc { path, version })
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/usr/bin", "/usr/local/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Why rfs cannot run gVisor sandboxes here (`None`: it can try).
pub fn unusable() -> Option<String> {
    if let Err(why) = runsc() {
        return Some(why);
    }
    // SAFETY: geteuid cannot fail.
    let uid = unsafe { libc::geteuid() };
    (uid != 0).then(|| {
        format!("rfs runs as uid {uid}, and runsc needs root to build its sandbox here (rootless runsc is not supported by rfs yet)")
    })
}

impl Runsc {
    /// `runsc` with the flags of every call: the state directory `root`,
    /// no cgroups of its own (the sandbox runs in rfs's, see
    /// [`super::sandbox`]), the host network of the namespace it is
    /// started in (the sandbox's, with rfs's proxy), bind mounts
    /// revalidated against the host (`shared`), and the debug logs
    /// when [`DEBUG_ENV`] names a directory.
    pub fn command(&self, root: &Path) -> Command {
        let mut cmd = Command::new(&self.path);
        cmd.args(self.flags(root));
        cmd
    }

    /// The flags of [`Runsc::command`].
    pub fn flags(&self, root: &Path) -> Vec<String> {
        let mut flags = vec![
            format!("--root={}", root.display()),
            "--ignore-cgroups".into(),
            "--network=host".into(),
            // The sandbox's directories are written from the host too
            // (uploads, caches): gVisor must not trust its caches of them.
            "--file-access-mounts=shared".into(),
        ];
        if let Some(dir) = std::env::var_os(DEBUG_ENV).filter(|v| !v.is_empty()) {
            flags.push("--debug".into());
            flags.push(format!("--debug-log={}/", Path::new(&dir).display()));
        }
        flags
    }
}
