//! Host folders the person running rfs mounts read-only into a sandbox
//! (`--mount-ro HOST_DIR:SANDBOX_PATH`): a toolchain the host has (a
//! rustup toolchain, an SDK) that the sandbox's read-only system
//! directories do not. Only the person's flag makes one: a script, a
//! repository's `rfs.toml` and an MCP client cannot ask for it.

use std::path::{Path, PathBuf};

/// The flag that mounts a host folder (named in every refusal).
pub const FLAG: &str = "--mount-ro";

/// One host folder, shown read-only (and `nosuid`, `nodev`) at `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostMount {
    /// The folder on this machine, symbolic links resolved.
    pub host_dir: PathBuf,
    /// Where it appears inside the sandbox: an absolute path that
    /// shadows nothing rfs puts there ([`check_target`]).
    pub target: String,
}

/// Paths inside a sandbox a host folder may neither be mounted on nor
/// under, with why.
const RESERVED: &[(&str, &str)] = &[
    ("/tmp", "the sandbox's own /tmp"),
    ("/proc", "the sandbox's own /proc"),
    ("/dev", "the sandbox's own /dev"),
    ("/etc", "the /etc rfs composes for the sandbox"),
    ("/home", "where the sandbox's home lives"),
    ("/root", "the sandbox user's home on docker"),
    ("/run", "where rfs puts its own executable under gVisor"),
    ("/sys", "the kernel's /sys"),
    (
        "/usr",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/bin",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/sbin",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/lib",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/lib32",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/lib64",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/libx32",
        "a system directory rfs binds read-only from the host",
    ),
    (
        "/nix",
        "a system directory rfs binds read-only from the host",
    ),
];

/// Whether `target` may hold a host folder: an absolute, normalised path
/// (no `.`, `..` or empty parts), not `/`, and neither on nor under a
/// path the sandbox's own files or rfs's binds live at (it would shadow
/// them); `home` is the sandbox's home where the provider knows it.
pub fn check_target(target: &str, home: Option<&str>) -> Result<(), String> {
    let p = Path::new(target);
    if !target.starts_with('/') {
        return Err(format!(
            "`{target}`: the sandbox path must be absolute (such as /toolchains/rust)"
        ));
    }
    let normal = target.len() == 1
        || target[1..]
            .split('/')
            .all(|n| !n.is_empty() && n != "." && n != "..");
    if !normal {
        return Err(format!(
            "`{target}`: the sandbox path must be plain names (no `.`, `..`, empty parts or trailing `/`)"
        ));
    }
    if target == "/" {
        return Err("`/`: mounting over the sandbox's root would hide everything rfs puts there; name a new folder such as /toolchains/rust".into());
    }
    for (dir, what) in RESERVED {
        if p.starts_with(dir) {
            return Err(format!(
                "`{target}` would shadow {dir} ({what}); name a new folder such as /toolchains/rust"
            ));
        }
    }
    if let Some(h) = home {
        if p.starts_with(h) || Path::new(h).starts_with(p) {
            return Err(format!(
                "`{target}` would shadow the sandbox's home {h}; name a new folder such as /toolchains/rust"
            ));
        }
    }
    Ok(())
}

/// Parse one `HOST_DIR:SANDBOX_PATH` of the flag: the host folder must
/// exist, be a folder (after symbolic links) and lie outside rfs's state
/// directory `state_dir` (other runs' journals, sandboxes and caches);
/// the sandbox path must pass [`check_target`].
pub fn parse(spec: &str, state_dir: &Path) -> Result<HostMount, String> {
    let Some((host, target)) = spec.rsplit_once(':') else {
        return Err(format!("{FLAG} `{spec}` must be HOST_DIR:SANDBOX_PATH"));
    };
    if host.is_empty() || target.is_empty() {
        return Err(format!("{FLAG} `{spec}` must be HOST_DIR:SANDBOX_PATH"));
    }
    check_target(target, None).map_err(|e| format!("{FLAG} {e}"))?;
    let host_dir = std::fs::canonicalize(host)
        .map_err(|e| format!("{FLAG} `{spec}`: the host folder {host} cannot be used: {e}"))?;
    if !host_dir.is_dir() {
        return Err(format!(
            "{FLAG} `{spec}`: {} is not a folder",
            host_dir.display()
        ));
    }
    let state = std::fs::canonicalize(state_dir).unwrap_or_else(|_| state_dir.to_path_buf());
    if host_dir.starts_with(&state) || state.starts_with(&host_dir) {
        return Err(format!(
            "{FLAG} `{spec}`: {} holds or lies in rfs's state directory {} (other runs' journals, sandboxes and caches); mount a folder outside it",
            host_dir.display(),
            state.display()
        ));
    }
    Ok(HostMount {
        host_dir,
        target: target.to_owned(),
    })
}

/// Refuse two mounts at the same sandbox path, or one inside another.
pub fn check_distinct(mounts: &[HostMount]) -> Result<(), String> {
    for (i, a) in mounts.iter().enumerate() {
        for b in &mounts[i + 1..] {
            if Path::new(&a.target).starts_with(&b.target)
                || Path::new(&b.target).starts_with(&a.target)
            {
                return Err(format!(
                    "{FLAG}: `{}` and `{}` overlap in the sandbox; give each host folder a path of its own",
                    a.target, b.target
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_that_would_shadow_the_sandboxs_own_paths_are_refused() {
        for t in [
            "/",
            "/tmp",
            "/tmp/x",
            "/proc",
            "/dev/x",
            "/etc",
            "/usr/local/rust",
            "/bin",
            "/lib64",
            "/sbin/x",
            "/home/rfs",
        ] {
            assert!(check_target(t, None).is_err(), "{t}");
        }
        for t in ["rel", "/a/../b", "/a/./b", "/a//b", "/a/"] {
            assert!(check_target(t, None).is_err(), "{t}");
        }
        for t in ["/opt/rust", "/toolchains/rust", "/sdk"] {
            assert!(check_target(t, None).is_ok(), "{t}");
        }
        assert!(check_target("/sb/home/x", Some("/sb/home")).is_err());
        assert!(check_target("/sb", Some("/sb/home")).is_err());
    }

    #[test]
    fn a_missing_file_or_state_folder_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let state = d.path().join("state");
        std::fs::create_dir(&state).unwrap();
        std::fs::write(d.path().join("f"), "x").unwrap();
        let at = |h: &Path| format!("{}:/opt/x", h.display());
        assert!(parse(&at(&d.path().join("nope")), &state).is_err());
        let e = parse(&at(&d.path().join("f")), &state).unwrap_err();
        assert!(e.contains("is not a folder"), "{e}");
        let e = parse(&at(&state.join(".")), &state).unwrap_err();
        assert!(e.contains("state directory"), "{e}");
        std::fs::create_dir(d.path().join("tc")).unwrap();
        let m = parse(&at(&d.path().join("tc")), &state).unwrap();
        assert_eq!(m.target, "/opt/x");
        let two = [
            m.clone(),
            HostMount {
                target: "/opt/x/y".into(),
                ..m
            },
        ];
        assert!(check_distinct(&two).is_err());
    }
}
