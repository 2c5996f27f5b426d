//! The `/etc` of an isolated sandbox (issue #35): composed by rfs in the
//! sandbox's directory and bound read-only over `/etc`, instead of the
//! host's. It holds the sandbox's own `passwd`/`group` (the sandbox user,
//! `root`, `nobody`), `hosts`, `hostname`, a `resolv.conf` that agrees
//! with the sandbox's network ([`resolv_conf`]), `nsswitch.conf`, copies
//! of the few host files programs need to run ([`COPIED`]: os-release,
//! the dynamic linker's configuration and cache, the time zone, service
//! names), and the host's CA certificates and `alternatives` bound
//! read-only ([`BOUND`]). Nothing else of the host's `/etc` — no
//! `shadow`, `gshadow`, `sudoers`, SSH host keys or other configuration.

use std::io::Write as _;
use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use super::errors::*;

/// The hostname of every isolated sandbox (its own UTS namespace: the
/// host's name is neither seen nor changed).
pub const HOSTNAME: &str = "rfs-sandbox";

/// Host files copied into the sandbox's `/etc` (those that exist and
/// that any user may read; a symlink is recreated as it is).
pub(super) const COPIED: &[&str] = &[
    "os-release",
    "debian_version",
    "lsb-release",
    "ld.so.conf",
    "ld.so.cache",
    "localtime",
    "timezone",
    "protocols",
    "services",
    "host.conf",
    "gai.conf",
    "mime.types",
    "ca-certificates.conf",
];
/// Host directories whose files are copied the same way.
pub(super) const COPIED_DIRS: &[&str] = &["ld.so.conf.d"];
/// Host directories bound read-only into the sandbox's `/etc` (CA
/// certificates, Debian's `alternatives` symlinks).
pub(super) const BOUND: &[&str] = &["ssl", "ca-certificates", "pki", "alternatives"];

/// The sandbox's `/etc` directory inside its directory.
pub(super) fn etc_dir(dir: &Path) -> PathBuf {
    dir.join("etc")
}

/// Compose `dir/etc` (afresh) for a sandbox whose home (`dir/home`) its
/// steps see at [`super::HOME_INSIDE`];
/// returns the host directories of [`BOUND`] to bind into it (their mount
/// points exist).
pub(super) fn compose(dir: &Path, network: bool) -> Result<Vec<&'static str>, SetupError> {
    let etc = etc_dir(dir);
    let fail = |what: String| move |e: std::io::Error| io_setup(what, e);
    if etc.exists() {
        std::fs::remove_dir_all(&etc).map_err(fail(format!("clearing {}", etc.display())))?;
    }
    std::fs::create_dir(&etc).map_err(fail(format!("creating {}", etc.display())))?;
    let home = Path::new(super::HOME_INSIDE);
    // SAFETY: geteuid/getegid cannot fail.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let write = |name: &str, text: &[u8]| -> Result<(), SetupError> {
        let p = etc.join(name);
        let mut f = std::fs::File::create(&p).map_err(fail(format!("writing {}", p.display())))?;
        f.write_all(text)
            .map_err(fail(format!("writing {}", p.display())))
    };
    write("passwd", passwd(uid, gid, home).as_bytes())?;
    write("group", group(gid).as_bytes())?;
    write("hosts", hosts().as_bytes())?;
    write("hostname", format!("{HOSTNAME}\n").as_bytes())?;
    write("resolv.conf", &resolv_conf(network))?;
    write("nsswitch.conf", NSSWITCH.as_bytes())?;
    std::os::unix::fs::symlink("../proc/self/mounts", etc.join("mtab"))
        .map_err(fail("creating mtab".into()))?;
    let host = Path::new("/etc");
    for name in COPIED {
        copy_entry(&host.join(name), &etc.join(name))?;
    }
    for d in COPIED_DIRS {
        let Ok(entries) = std::fs::read_dir(host.join(d)) else {
            continue;
        };
        std::fs::create_dir(etc.join(d)).map_err(fail(format!("creating /etc/{d}")))?;
        for e in entries.flatten() {
            copy_entry(&e.path(), &etc.join(d).join(e.file_name()))?;
        }
    }
    let mut bound = vec![];
    for d in BOUND {
        let p = host.join(d);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => copy_entry(&p, &etc.join(d))?,
            Ok(m) if m.is_dir() && m.mode() & 0o005 == 0o005 => {
                std::fs::create_dir(etc.join(d)).map_err(fail(format!("creating /etc/{d}")))?;
                bound.push(*d);
            }
            _ => {}
        }
    }
    Ok(bound)
}

/// Copy one host entry: a symlink as a symlink, a regular file any user
/// may read as a copy (mode 0644); anything else is left out.
fn copy_entry(from: &Path, to: &Path) -> Result<(), SetupError> {
    let Ok(meta) = std::fs::symlink_metadata(from) else {
        return Ok(());
    };
    let fail = |e| io_setup(format!("copying {}", from.display()), e);
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(from).map_err(fail)?;
        std::os::unix::fs::symlink(target, to).map_err(fail)?;
    } else if meta.is_file() && meta.mode() & 0o004 != 0 {
        std::fs::copy(from, to).map_err(fail)?;
        std::fs::set_permissions(to, std::fs::Permissions::from_mode(0o644)).map_err(fail)?;
    }
    Ok(())
}

/// The name of the sandbox user when it is not root.
pub(super) const SANDBOX_USER: &str = "rfs";

/// `passwd`: root, nobody and the sandbox user (uid `uid`, home `home`;
/// root's home is the sandbox home when the sandbox user is root).
pub(super) fn passwd(uid: u32, gid: u32, home: &Path) -> String {
    let home = home.display();
    let root_home = if uid == 0 {
        home.to_string()
    } else {
        "/root".into()
    };
    let mut s = format!("root:x:0:0:root:{root_home}:/bin/sh\n");
    if uid != 0 && uid != 65534 {
        s.push_str(&format!(
            "{SANDBOX_USER}:x:{uid}:{gid}:rfs sandbox:{home}:/bin/sh\n"
        ));
    }
    s.push_str("nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n");
    s
}

/// `group`: root, nogroup and the sandbox user's group.
pub(super) fn group(gid: u32) -> String {
    let mut s = "root:x:0:\n".to_owned();
    if gid != 0 && gid != 65534 {
        s.push_str(&format!("{SANDBOX_USER}:x:{gid}:\n"));
    }
    s.push_str("nogroup:x:65534:\n");
    s
}

fn hosts() -> String {
    format!(
        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n127.0.1.1\t{HOSTNAME}\n"
    )
}

/// `resolv.conf` for a sandbox: the host's where it has the host's
/// network (its resolver is reachable), otherwise none at all (a
/// comment: names resolve through `hosts` only). The network policy may
/// adjust this.
pub(super) fn resolv_conf(network: bool) -> Vec<u8> {
    if network {
        if let Ok(text) = std::fs::read("/etc/resolv.conf") {
            return text;
        }
    }
    b"# rfs: no name server in this sandbox: behind rfs's egress proxy names are\n# resolved by the proxy (programs that honour http_proxy/https_proxy), and\n# with network: false there is nothing to reach\n".to_vec()
}

const NSSWITCH: &str = "\
passwd:     files
group:      files
shadow:     files
hosts:      files dns
networks:   files
protocols:  files
services:   files
ethers:     files
rpc:        files
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwd_names_the_sandbox_user_root_and_nobody() {
        let p = passwd(1000, 1000, Path::new("/s/home"));
        assert!(
            p.contains("rfs:x:1000:1000:rfs sandbox:/s/home:/bin/sh"),
            "{p}"
        );
        assert!(p.contains("root:x:0:0:root:/root:"), "{p}");
        let r = passwd(0, 0, Path::new("/s/home"));
        assert!(r.starts_with("root:x:0:0:root:/s/home:"), "{r}");
        assert_eq!(r.lines().count(), 2, "{r}");
        assert!(group(1000).contains("rfs:x:1000:"));
    }

    #[test]
    fn a_sandbox_without_network_has_no_name_server() {
        let r = String::from_utf8(resolv_conf(false)).unwrap();
        assert!(!r.contains("nameserver"), "{r}");
    }
}
