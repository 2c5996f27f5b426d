//! gVisor's `runsc` on this host: where it is, its version, whether rfs
//! can start it, and the flags of every call rfs makes.

use std::ffi::OsString;
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

/// Whether rfs runs gVisor rootless (`runsc --rootless`): rfs is not
/// root, so runsc re-runs itself as root of a user namespace of its own
/// and its sandbox is the user running rfs on the host.
pub fn rootless() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() != 0 }
}

/// Why rfs cannot run gVisor sandboxes here (`None`: it can try).
pub fn unusable() -> Option<String> {
    if let Err(why) = runsc() {
        return Some(why);
    }
    if rootless() {
        if let Err(why) = nsenter() {
            return Some(why);
        }
    }
    None
}

/// `nsenter` (util-linux), which puts rootless runsc calls in the
/// sandbox's user and network namespaces; looked up once per process.
fn nsenter() -> Result<&'static PathBuf, String> {
    static FOUND: OnceLock<Option<PathBuf>> = OnceLock::new();
    FOUND.get_or_init(|| on_path("nsenter")).as_ref().ok_or_else(|| {
        "rfs is not root, so its runsc calls enter the sandbox's network namespace with nsenter, which is not installed (util-linux)".to_owned()
    })
}

/// The namespaces a rootless runsc call runs in: the sandbox's user
/// namespace (which owns the next) and its network namespace.
///
/// Rootless runsc cannot join a network namespace named in the bundle (it
/// is owned by the sandbox's user namespace, which runsc's own is not
/// under), and its control socket is an abstract one, which exists only
/// in the network namespace `runsc run` was started in: every call
/// (`run`, `exec`, `kill`, `delete`) enters both first.
#[derive(Debug, Clone)]
pub struct Enter {
    pub user: PathBuf,
    pub net: PathBuf,
}

impl Runsc {
    /// `runsc` with the flags of every call: the state directory `root`,
    /// no cgroups of its own (the sandbox runs in rfs's, see
    /// [`super::sandbox`]), the host network of the namespace it is
    /// started in (the sandbox's, with rfs's proxy), bind mounts
    /// revalidated against the host (`shared`), and the debug logs
    /// when [`DEBUG_ENV`] names a directory; entering `enter`'s
    /// namespaces first (rootless).
    pub fn command_in(&self, root: &Path, enter: Option<&Enter>) -> Command {
        let argv = self.invocation(root, enter);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        cmd
    }

    /// The program and leading arguments of [`Runsc::command_in`]:
    /// `runsc FLAGS`, or `nsenter --user=… --net=… -- runsc FLAGS`.
    pub fn invocation(&self, root: &Path, enter: Option<&Enter>) -> Vec<OsString> {
        let mut argv: Vec<OsString> = vec![];
        if let Some(e) = enter {
            // Missing, the bare name fails to start: never runsc outside.
            let nsenter = nsenter().map_or_else(|_| PathBuf::from("nsenter"), Clone::clone);
            argv.push(nsenter.into());
            let ns = |flag: &str, p: &Path| {
                let mut a = OsString::from(flag);
                a.push(p);
                a
            };
            argv.push(ns("--user=", &e.user));
            argv.push(ns("--net=", &e.net));
            // Keep rfs's uid and gid (only they are mapped there).
            argv.push("--preserve-credentials".into());
            argv.push("--".into());
        }
        argv.push(self.path.clone().into());
        argv.extend(self.flags(root).into_iter().map(OsString::from));
        argv
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
        if rootless() {
            flags.push("--rootless".into());
        }
        if let Some(dir) = std::env::var_os(DEBUG_ENV).filter(|v| !v.is_empty()) {
            flags.push("--debug".into());
            flags.push(format!("--debug-log={}/", Path::new(&dir).display()));
        }
        flags
    }
}
