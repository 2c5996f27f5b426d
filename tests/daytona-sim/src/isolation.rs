//! One sandbox = one private root directory entered with Linux namespaces.
//!
//! The root holds Debian's static busybox (plus an applet symlink for each
//! of its applets), `/home/daytona` (uid 1000, the default user and work
//! dir), `/tmp`, `/etc/{passwd,group,shells}` and `/usr/bin/zsh` — a tiny
//! script that runs busybox `sh`, so that the daemon's shell choice (zsh
//! first) and its misleading `fork/exec /usr/bin/zsh` error are reproduced.
//!
//! A sandbox's "machine" is a long-lived init process started with
//! `unshare --mount --pid --uts --fork`: it bind-mounts a few `/dev` nodes,
//! mounts `/proc`, `pivot_root`s into the root and detaches the old root,
//! so neither the runner's checkout nor the host's `/tmp` exists inside.
//! Every command enters that init's namespaces with `nsenter` (like
//! `docker exec`) as uid/gid 1000. Killing init kills every process of the
//! sandbox (pid namespace), and the mount namespace dies with it.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Uid/gid of the sandbox user `daytona`.
pub(crate) const USER_ID: u32 = 1000;
pub(crate) const HOME: &str = "/home/daytona";
/// The shell the toolbox daemon picks from `/etc/shells` in Daytona's default image.
pub(crate) const SHELL: &str = "/usr/bin/zsh";
const HOST_BUSYBOX: &str = "/bin/busybox";

const INIT_SCRIPT: &str = r#"set -e
R="$1"
mount --make-rprivate /
mount --bind "$R" "$R"
for d in null zero full random urandom tty; do mount --bind "/dev/$d" "$R/dev/$d"; done
mount -t proc proc "$R/proc"
hostname "$2"
cd "$R"
pivot_root . .oldroot
umount -l /.oldroot
rmdir /.oldroot
cd /home/daytona
echo ready
exec >/dev/null 2>&1 </dev/null
exec /bin/busybox sh -c 'trap "exit 0" TERM; while :; do /bin/busybox sleep 3600 & wait; done'
"#;

const ZSH_SCRIPT: &str = "#!/bin/sh\n# rfs-daytona-sim: Daytona's image ships zsh; this sandbox runs busybox sh under that name.\nexec /bin/sh \"$@\"\n";

fn applets() -> &'static [String] {
    static LIST: OnceLock<Vec<String>> = OnceLock::new();
    LIST.get_or_init(|| {
        Command::new(HOST_BUSYBOX)
            .arg("--list-full")
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .lines()
                    .map(|l| l.trim().to_string())
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// Refuse to start when the host cannot build sandboxes.
pub(crate) fn preflight() -> std::io::Result<()> {
    if !Path::new(HOST_BUSYBOX).is_file() {
        return Err(std::io::Error::other(format!(
            "rfs-daytona-sim needs Debian's busybox-static at {HOST_BUSYBOX} (apt-get install busybox-static; scripts/test.sh installs it)"
        )));
    }
    if !nix::unistd::geteuid().is_root() {
        return Err(std::io::Error::other(
            "rfs-daytona-sim needs root to build namespaced sandboxes (mount/pid/uts namespaces, uid 1000 inside)",
        ));
    }
    for tool in ["unshare", "nsenter"] {
        let found = std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
            .unwrap_or(false);
        if !found {
            return Err(std::io::Error::other(format!(
                "rfs-daytona-sim needs util-linux's `{tool}` on PATH"
            )));
        }
    }
    Ok(())
}

/// One sandbox's directory and (while started) its init process.
pub(crate) struct SandboxBox {
    pub id: String,
    dir: PathBuf,
    root: PathBuf,
    init: Mutex<Option<(Child, i32)>>,
    /// `networkBlockAll`: a network namespace of its own (loopback only).
    network_blocked: std::sync::atomic::AtomicBool,
}

impl SandboxBox {
    /// Build the root directory (not started yet); `network_blocked`: the
    /// sandbox gets only a loopback interface (`networkBlockAll`).
    pub fn create(base: &Path, id: &str, network_blocked: bool) -> std::io::Result<SandboxBox> {
        let dir = base.join(id);
        let root = dir.join("root");
        for d in [
            "bin",
            "sbin",
            "usr/bin",
            "usr/sbin",
            "usr/local/bin",
            "home/daytona",
            "tmp",
            "var/tmp",
            "dev",
            "proc",
            "etc",
            "root",
            ".oldroot",
        ] {
            std::fs::create_dir_all(root.join(d))?;
        }
        std::fs::copy(HOST_BUSYBOX, root.join("bin/busybox"))?;
        std::fs::set_permissions(
            root.join("bin/busybox"),
            std::fs::Permissions::from_mode(0o755),
        )?;
        for applet in applets() {
            let path = root.join(applet.trim_start_matches('/'));
            if path.symlink_metadata().is_err() {
                symlink("/bin/busybox", &path)?;
            }
        }
        std::fs::write(root.join("usr/bin/zsh"), ZSH_SCRIPT)?;
        std::fs::set_permissions(
            root.join("usr/bin/zsh"),
            std::fs::Permissions::from_mode(0o755),
        )?;
        std::fs::write(
            root.join("etc/passwd"),
            "root:x:0:0:root:/root:/bin/sh\ndaytona:x:1000:1000:daytona:/home/daytona:/usr/bin/zsh\n",
        )?;
        std::fs::write(root.join("etc/group"), "root:x:0:\ndaytona:x:1000:\n")?;
        std::fs::write(
            root.join("etc/shells"),
            "# /etc/shells: valid login shells\n/bin/sh\n/bin/ash\n/usr/bin/zsh\n",
        )?;
        for d in ["null", "zero", "full", "random", "urandom", "tty"] {
            std::fs::write(root.join("dev").join(d), b"")?;
        }
        std::fs::set_permissions(root.join("tmp"), std::fs::Permissions::from_mode(0o1777))?;
        std::fs::set_permissions(
            root.join("var/tmp"),
            std::fs::Permissions::from_mode(0o1777),
        )?;
        chown(&root.join("home/daytona"))?;
        Ok(SandboxBox {
            id: id.to_string(),
            dir,
            root,
            init: Mutex::new(None),
            network_blocked: network_blocked.into(),
        })
    }

    /// Block (or open) the sandbox's network: a started sandbox's init is
    /// restarted in the namespaces that say so (its files kept).
    pub fn set_network_blocked(&self, blocked: bool) -> std::io::Result<()> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.network_blocked.swap(blocked, SeqCst) == blocked {
            return Ok(());
        }
        let started = self.init.lock().unwrap().is_some();
        if started {
            self.stop();
            // Its init removed `.oldroot` after pivot_root.
            let restarted =
                std::fs::create_dir_all(self.root.join(".oldroot")).and_then(|()| self.start());
            if let Err(e) = restarted {
                // Not running in the new setting: it keeps saying the old.
                self.network_blocked.store(!blocked, SeqCst);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Start the sandbox's init (namespaces, pivot_root). Idempotent.
    pub fn start(&self) -> std::io::Result<()> {
        let mut init = self.init.lock().unwrap();
        if init.is_some() {
            return Ok(());
        }
        let mut child = Command::new("unshare");
        if self
            .network_blocked
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            child.arg("--net");
        }
        let mut child = child
            .args(["--mount", "--pid", "--uts", "--fork", "--kill-child", "--"])
            .arg(HOST_BUSYBOX)
            .args(["sh", "-c", INIT_SCRIPT, "init"])
            .arg(&self.root)
            .arg(&self.id)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let mut line = String::new();
        let read = BufReader::new(child.stdout.take().expect("piped")).read_line(&mut line);
        if read.is_err() || line.trim() != "ready" {
            let _ = child.kill();
            let out = child.wait_with_output();
            let err = out
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default();
            return Err(std::io::Error::other(format!(
                "sandbox {} failed to start: {}",
                self.id,
                err.trim()
            )));
        }
        let unshare_pid = child.id();
        let children =
            std::fs::read_to_string(format!("/proc/{unshare_pid}/task/{unshare_pid}/children"))?;
        let pid1: i32 = children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
            .ok_or_else(|| std::io::Error::other("sandbox init has no child"))?;
        *init = Some((child, pid1));
        Ok(())
    }

    pub fn is_running(&self) -> bool {
        self.init.lock().unwrap().is_some()
    }

    /// Kill every process of the sandbox (its files stay).
    pub fn stop(&self) {
        // Held throughout, so a concurrent stop/destroy waits for this one to finish.
        let mut init = self.init.lock().unwrap();
        if let Some((mut child, pid1)) = init.take() {
            // Killing pid 1 tears the whole pid namespace down; unshare then reaps it and exits.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid1),
                nix::sys::signal::Signal::SIGKILL,
            );
            let deadline = Instant::now() + Duration::from_secs(5);
            loop {
                match child.try_wait() {
                    Ok(Some(_)) | Err(_) => break,
                    Ok(None) if Instant::now() >= deadline => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break;
                    }
                    Ok(None) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        }
    }

    /// A new sandbox `id` (not started, its root not yet filled) with
    /// this one's network setting: a fork's, filled by
    /// [`SandboxBox::copy_files_of`].
    pub fn fork_dir(&self, base: &Path, id: &str) -> std::io::Result<SandboxBox> {
        let dir = base.join(id);
        std::fs::create_dir_all(&dir)?;
        Ok(SandboxBox {
            id: id.to_string(),
            root: dir.join("root"),
            dir,
            init: Mutex::new(None),
            network_blocked: self
                .network_blocked
                .load(std::sync::atomic::Ordering::SeqCst)
                .into(),
        })
    }

    /// Fill this (fresh) sandbox's root with a copy of `source`'s
    /// filesystem, owners, modes and links kept.
    pub fn copy_files_of(&self, source: &SandboxBox) -> std::io::Result<()> {
        let out = Command::new("cp")
            .args(["-a", "--no-target-directory"])
            .arg(&source.root)
            .arg(&self.root)
            .output()?;
        if out.status.success() {
            // The source's init removed its `.oldroot` after pivot_root.
            std::fs::create_dir_all(self.root.join(".oldroot"))
        } else {
            Err(std::io::Error::other(format!(
                "cp -a failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )))
        }
    }

    /// Stop and remove the sandbox's directory.
    pub fn destroy(&self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    /// The host path of a sandbox path (absolute, or relative to the work dir), without following symlinks.
    pub fn host_path(&self, sandbox_path: &str) -> PathBuf {
        let joined = if sandbox_path.starts_with('/') {
            PathBuf::from(sandbox_path)
        } else {
            Path::new(HOME).join(sandbox_path)
        };
        let mut out = self.root.clone();
        for c in joined.components() {
            match c {
                Component::Normal(p) => out.push(p),
                Component::ParentDir if out != self.root => {
                    out.pop();
                }
                _ => {}
            }
        }
        out
    }

    /// The host path of a sandbox path with symlinks resolved inside the sandbox root.
    pub fn resolve(&self, sandbox_path: &str) -> Option<PathBuf> {
        let start = if sandbox_path.starts_with('/') {
            sandbox_path.to_string()
        } else {
            format!("{HOME}/{sandbox_path}")
        };
        let mut pending: Vec<String> = start.split('/').rev().map(str::to_string).collect();
        let mut parts: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(part) = pending.pop() {
            match part.as_str() {
                "" | "." => continue,
                ".." => {
                    parts.pop();
                    continue;
                }
                _ => {}
            }
            let mut host = self.root.clone();
            host.extend(&parts);
            host.push(&part);
            let meta = host.symlink_metadata().ok()?;
            if meta.file_type().is_symlink() {
                hops += 1;
                if hops > 40 {
                    return None;
                }
                let target = std::fs::read_link(&host).ok()?;
                let target = target.to_string_lossy().into_owned();
                if target.starts_with('/') {
                    parts.clear();
                }
                pending.extend(target.split('/').rev().map(str::to_string));
            } else {
                parts.push(part);
            }
        }
        let mut host = self.root.clone();
        host.extend(&parts);
        Some(host)
    }

    /// The host path for creating or removing `sandbox_path`: its parent resolved inside the
    /// root when it exists (lexically otherwise), the last component not followed.
    pub fn resolve_parent(&self, sandbox_path: &str) -> Option<PathBuf> {
        let lexical = self.host_path(sandbox_path);
        if lexical == self.root {
            return None;
        }
        let full = if sandbox_path.starts_with('/') {
            PathBuf::from(sandbox_path)
        } else {
            Path::new(HOME).join(sandbox_path)
        };
        let name = full.file_name()?.to_owned();
        let parent = full.parent()?.to_string_lossy().into_owned();
        match self.resolve(&parent) {
            Some(p) if p.is_dir() => Some(p.join(name)),
            _ => Some(lexical),
        }
    }

    /// A command that runs `argv` inside the sandbox as `daytona`, in `cwd`, with exactly `env`.
    /// With `own_session` the program leads a new session and process group whose id is
    /// visible inside the sandbox (the daemon's `Setpgid`); find its host pid with [`shell_pid`].
    pub fn command(
        &self,
        cwd: &str,
        env: &[(String, String)],
        argv: &[&str],
        own_session: bool,
    ) -> std::io::Result<Command> {
        let pid1 = self
            .init
            .lock()
            .unwrap()
            .as_ref()
            .map(|(_, p)| *p)
            .ok_or_else(|| std::io::Error::other(format!("sandbox {} is not running", self.id)))?;
        let mut cmd = Command::new("nsenter");
        cmd.arg("-t")
            .arg(pid1.to_string())
            .args(
                self.network_blocked
                    .load(std::sync::atomic::Ordering::SeqCst)
                    .then_some("-n"),
            )
            .args([
                "-m", "-p", "-u", "-r", "-w", "-S", "1000", "-G", "1000", "--",
            ])
            .args([
                "/bin/busybox",
                "sh",
                "-c",
                if own_session { LEADER } else { PLAIN },
            ])
            .arg(cwd)
            .args(argv)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        Ok(cmd)
    }
}

const PLAIN: &str = "cd -- \"$0\" || exit 126; exec \"$@\"";
const LEADER: &str = "cd -- \"$0\" || exit 126; exec /bin/busybox setsid \"$@\"";

/// The host pid of the program `nsenter` (pid `nsenter_pid`) started inside a sandbox.
pub(crate) fn shell_pid(nsenter_pid: u32) -> Option<i32> {
    let deadline = Instant::now() + Duration::from_secs(2);
    loop {
        let children =
            std::fs::read_to_string(format!("/proc/{nsenter_pid}/task/{nsenter_pid}/children"))
                .ok()?;
        if let Some(pid) = children
            .split_whitespace()
            .next()
            .and_then(|p| p.parse().ok())
        {
            return Some(pid);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Send `sig` to every live process of session `sid` and to every
/// descendant of its leader `sid` (host pid numbering): the daemon's
/// session delete signals the shell's process group and walks its process
/// tree for descendants that left the group (apps/daemon/pkg/session/delete.go).
/// Returns how many live processes it signalled (0: all gone); `None`
/// only counts them.
pub(crate) fn signal_session_tree(sid: i32, sig: Option<nix::sys::signal::Signal>) -> usize {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    // (pid, ppid, session) of every live (not zombie) process.
    let mut procs: Vec<(i32, i32, i32)> = vec![];
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        if f.len() < 4 || f[0] == "Z" {
            continue;
        }
        let (Ok(ppid), Ok(sess)) = (f[1].parse::<i32>(), f[3].parse::<i32>()) else {
            continue;
        };
        procs.push((pid, ppid, sess));
    }
    let mut targets: Vec<i32> = procs
        .iter()
        .filter(|p| p.2 == sid || p.0 == sid)
        .map(|p| p.0)
        .collect();
    let mut i = 0;
    while i < targets.len() {
        let parent = targets[i];
        for p in &procs {
            if p.1 == parent && !targets.contains(&p.0) {
                targets.push(p.0);
            }
        }
        i += 1;
    }
    for pid in &targets {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), sig);
    }
    targets.len()
}

/// SIGKILL every process of session `sid` (host pid numbering).
pub(crate) fn kill_session(sid: i32) {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        // fields after comm: state ppid pgrp session
        if rest
            .split_whitespace()
            .nth(3)
            .and_then(|s| s.parse::<i32>().ok())
            == Some(sid)
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

impl Drop for SandboxBox {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Give a host path (inside a sandbox root) to the sandbox user.
pub(crate) fn chown(path: &Path) -> std::io::Result<()> {
    std::os::unix::fs::lchown(path, Some(USER_ID), Some(USER_ID))
}

/// The base environment of every sandbox process (the daemon's own environment).
pub(crate) fn base_env(extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        (
            "PATH".into(),
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin".into(),
        ),
        ("HOME".into(), HOME.into()),
        ("USER".into(), "daytona".into()),
        ("LOGNAME".into(), "daytona".into()),
        ("SHELL".into(), SHELL.into()),
    ];
    for (k, v) in extra {
        env.retain(|(ek, _)| ek != k);
        env.push((k.clone(), v.clone()));
    }
    env
}
