//! The OCI bundle of a gVisor sandbox (`dir/gvisor`): a read-only empty
//! root holding only mount points, and the mounts of the namespaces
//! sandbox's plan ([`super::super::mount_plan`]) as gVisor mounts: the
//! system directories read-only, the private `/etc` rfs composed
//! ([`super::super::private_etc`]) read-only with the host's CA
//! certificates, the sandbox's `tmp` as `/tmp`, its home read-write at
//! the same absolute path as on the host, caches over folders of the
//! home; `/proc`, `/sys` and `/dev` are gVisor's own (its kernel's, not
//! the host's).

use std::path::{Path, PathBuf};

use serde_json::{json, Value};

use crate::provider::host_mount::HostMount;
use crate::provider::CacheMount;

/// What is bound into a gVisor sandbox besides its own folders: caches
/// and the person's host folders (`--mount-ro`).
pub type Binds<'a> = (&'a [CacheMount], &'a [HostMount]);

/// Where rfs's own executable is inside a gVisor sandbox (bound
/// read-only), for the native verifier.
pub const OWN_EXE_INSIDE: &str = "/run/rfs/rfs";

/// The bundle directory of the sandbox living in `dir`.
pub fn bundle_dir(dir: &Path) -> PathBuf {
    dir.join("gvisor")
}

/// What the bundle holds besides the plan's mounts.
pub struct BundleSpec<'a> {
    /// The network namespace to join (`None`: the host's).
    pub netns: Option<PathBuf>,
    /// rfs's own executable, bound at [`OWN_EXE_INSIDE`].
    pub own_exe: Option<PathBuf>,
    pub caches: &'a [CacheMount],
    /// The host directories bound read-only at their own paths
    /// ([`super::host_view::host_dirs`]: the system directories first).
    pub host_dirs: Vec<PathBuf>,
    /// The person's host folders, read-only at their sandbox paths.
    pub host_mounts: &'a [HostMount],
}

/// Write the bundle of the sandbox in `dir` (its `home`, `tmp` and the
/// composed `etc` exist); returns the bundle's directory.
pub fn write(dir: &Path, spec: &BundleSpec) -> std::io::Result<PathBuf> {
    let bundle = bundle_dir(dir);
    let rootfs = bundle.join("rootfs");
    std::fs::create_dir_all(&rootfs)?;
    let mut mounts = vec![
        json!({"destination": "/proc", "type": "proc", "source": "proc"}),
        json!({"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
               "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]}),
        json!({"destination": "/dev/pts", "type": "devpts", "source": "devpts",
               "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]}),
        json!({"destination": "/sys", "type": "sysfs", "source": "sysfs",
               "options": ["nosuid", "noexec", "nodev", "ro"]}),
    ];
    for p in ["proc", "dev", "sys", "etc", "tmp"] {
        std::fs::create_dir_all(rootfs.join(p))?;
    }
    let bind = |src: &Path, dst: &Path, ro: bool| {
        let mut options = vec!["rbind"];
        options.push(if ro { "ro" } else { "rw" });
        json!({"destination": dst, "type": "bind", "source": src, "options": options})
    };
    for d in super::super::mount_plan::SYSTEM_DIRS {
        let p = Path::new(d);
        if std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_symlink()) {
            let inside = rootfs.join(d.trim_start_matches('/'));
            let _ = std::fs::remove_file(&inside);
            std::os::unix::fs::symlink(std::fs::read_link(p)?, &inside)?;
        }
    }
    let (under_etc, system): (Vec<&PathBuf>, _) =
        spec.host_dirs.iter().partition(|d| d.starts_with("/etc"));
    for host in system {
        std::fs::create_dir_all(rootfs.join(host.strip_prefix("/").unwrap_or(host)))?;
        mounts.push(bind(host, host, true));
    }
    let etc = super::super::private_etc::etc_dir(dir);
    mounts.push(bind(&etc, Path::new("/etc"), true));
    // Their mount points were made in the composed /etc.
    for host in under_etc {
        mounts.push(bind(host, host, true));
    }
    mounts.push(bind(&dir.join("tmp"), Path::new("/tmp"), false));
    // `/dev/shm` is a folder of the sandbox's capped disk, as under
    // namespaces: gVisor's own tmpfs there would be the sentry's memory,
    // which no disk limit counts (it took 3 GB of a `disk: "64M"` sandbox).
    // `/dev` itself is made the agent's ([`super::agent`]): gVisor ignores
    // its `size=`.
    mounts.push(bind(
        &super::super::disk::shm_dir(dir)?,
        Path::new("/dev/shm"),
        false,
    ));
    // The home at its one path inside (see `HOME_INSIDE`).
    let home = Path::new(super::super::HOME_INSIDE);
    std::fs::create_dir_all(rootfs.join(home.strip_prefix("/").unwrap_or(home)))?;
    mounts.push(bind(&dir.join("home"), home, false));
    for c in spec.caches {
        // Mount points made in the home by the namespaces plan.
        mounts.push(bind(&c.host_dir, &home.join(&c.home_relative), false));
    }
    for m in spec.host_mounts {
        std::fs::create_dir_all(rootfs.join(m.target.trim_start_matches('/')))?;
        mounts.push(
            json!({"destination": m.target, "type": "bind", "source": m.host_dir,
                           "options": ["rbind", "ro", "nosuid", "nodev"]}),
        );
    }
    if let Some(exe) = &spec.own_exe {
        let inside = rootfs.join(OWN_EXE_INSIDE.trim_start_matches('/'));
        std::fs::create_dir_all(inside.parent().expect("has a parent"))?;
        std::fs::File::create(&inside)?;
        mounts.push(bind(exe, Path::new(OWN_EXE_INSIDE), true));
    }
    let mut namespaces = vec![
        json!({"type": "pid"}),
        json!({"type": "ipc"}),
        json!({"type": "uts"}),
        json!({"type": "mount"}),
    ];
    if let Some(ns) = &spec.netns {
        namespaces.push(json!({"type": "network", "path": ns}));
    }
    let config = json!({
        "ociVersion": "1.0.0",
        "process": init_process(spec.own_exe.is_some()),
        "root": {"path": "rootfs", "readonly": true},
        "hostname": super::super::private_etc::HOSTNAME,
        "mounts": mounts,
        "linux": {"namespaces": namespaces},
    });
    std::fs::write(
        bundle.join("config.json"),
        serde_json::to_vec_pretty(&config).map_err(std::io::Error::other)?,
    )?;
    Ok(bundle)
}

/// The sandbox's first process: rfs's agent ([`super::agent`]) where
/// rfs's executable is bound in (`agent`), else a shell that reaps
/// orphans while a child of it waits on its standard input. Either ends
/// when rfs's end of that pipe closes (rfs went away, even killed with
/// SIGKILL), and gVisor ends every process of the sandbox with it.
fn init_process(agent: bool) -> Value {
    let args = if agent {
        json!([OWN_EXE_INSIDE, super::agent::ARG])
    } else {
        // `wait` reaps every child, orphans of steps included.
        json!(["/bin/sh", "-c", "exec 3<&0; (read -r _ <&3) & wait"])
    };
    // The agent is a user of its own, able only to make commands uid 0
    // and kill them: with an empty bounding set, their exec as root gains
    // nothing.
    let (id, capabilities) = if agent {
        // `CAP_CHOWN` only to make `/dev` its own, then dropped.
        let caps = json!(["CAP_SETUID", "CAP_SETGID", "CAP_KILL", "CAP_CHOWN"]);
        (
            super::agent::AGENT_UID,
            json!({"bounding": [], "effective": caps, "permitted": caps,
                   "inheritable": [], "ambient": []}),
        )
    } else {
        (0, no_capabilities())
    };
    json!({
        "terminal": false,
        "user": {"uid": id, "gid": id},
        "args": args,
        "env": [format!("PATH={}", super::super::env::host_path())],
        "cwd": "/",
        "capabilities": capabilities,
        "noNewPrivileges": true,
    })
}

/// No capability in any set: a step is uid 0 in gVisor but cannot
/// override file permissions, change owners or mount.
pub fn no_capabilities() -> Value {
    json!({"bounding": [], "effective": [], "inheritable": [], "permitted": [], "ambient": []})
}

/// The `--process` file of one command: `argv` with exactly `env`, in
/// `cwd`, under a terminal or not.
pub fn process(argv: &[String], env: &[(String, String)], cwd: &str, terminal: bool) -> Value {
    let env: Vec<String> = env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    json!({
        "terminal": terminal,
        "user": {"uid": 0, "gid": 0},
        "args": argv,
        "env": env,
        "cwd": cwd,
        "capabilities": no_capabilities(),
        "noNewPrivileges": true,
    })
}
