//! A `local` sandbox's private `/etc` and what else of the host a step
//! can read (issue #35): observed from inside a real isolated sandbox,
//! with rfs run as whatever user runs the tests (root here: the case
//! where the host's permissions alone would not protect root's files).
//! Each test runs twice: under `namespaces` and under `gvisor` (#35),
//! whose file server serves the same mounts.

mod common;
use common::*;

use std::path::Path;

#[track_caller]
fn require_namespaces() {
    assert!(
        rfs::provider::local::availability().is_ok(),
        "this machine does not permit unprivileged user namespaces ({:?}); these tests cannot run here",
        rfs::provider::local::availability()
    );
}

/// Run `cmd` as one step in an isolated local sandbox; its output.
fn inside(cmd: &str) -> String {
    inside_with(cmd, "")
}

fn inside_with(cmd: &str, options: &str) -> String {
    inside_with_args(cmd, options, &[])
}

std::thread_local! {
    /// The test's isolation mode (`None`: rfs's choice, namespaces here).
    static MODE: std::cell::Cell<Option<&'static str>> = const { std::cell::Cell::new(None) };
}

/// Whether this test runs under gVisor.
fn under_gvisor() -> bool {
    MODE.get() == Some("gvisor")
}

/// Each test body under namespaces (`namespaces::NAME`) and under
/// gVisor (`gvisor::NAME`).
macro_rules! in_both_modes {
    ($($(#[$m:meta])* fn $name:ident() $body:block)*) => {
        $($(#[$m])* fn $name() $body)*
        mod namespaces {
            $(#[test] fn $name() { super::$name(); })*
        }
        mod gvisor {
            $(#[test] fn $name() {
                if super::gvisor_missing() { return; }
                super::MODE.set(Some("gvisor"));
                super::$name();
            })*
        }
    };
}

fn inside_with_args(cmd: &str, options: &str, args: &[&str]) -> String {
    require_namespaces();
    let rfs = if under_gvisor() {
        Rfs::local_gvisor()
    } else {
        Rfs::new(Prov::Local)
    };
    let repo = Repo::new();
    let script =
        format!("{options}\nlet r = step(\"look\", {cmd:?});\nprint(\"<<\" + r.stdout + \">>\");");
    let out = rfs.run_with(repo.path(), &script, args);
    out.assert_code(0);
    rfs.assert_no_leftovers();
    rfs.assert_every_local_placement_is(if under_gvisor() {
        "gvisor"
    } else {
        "namespaces"
    });
    let start = out.stdout.find("<<").expect("printed") + 2;
    let end = out.stdout.rfind(">>").expect("printed");
    out.stdout[start..end].to_owned()
}

/// Removes a directory the test made on the host.
struct Remove(std::path::PathBuf);
impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

in_both_modes! {
    fn a_step_cannot_read_the_hosts_shadow_sudoers_or_ssh_host_keys() {
        let out = inside(
            "for f in /etc/shadow /etc/gshadow /etc/sudoers /etc/ssh /etc/ssh/ssh_host_ed25519_key /etc/machine-id; do \
               if [ -e $f ]; then echo present $f; else echo absent $f; fi; done; \
             cat /etc/shadow >/dev/null 2>&1 && echo read-shadow || echo no-shadow",
        );
        for f in [
            "/etc/shadow",
            "/etc/gshadow",
            "/etc/sudoers",
            "/etc/ssh",
            "/etc/ssh/ssh_host_ed25519_key",
            "/etc/machine-id",
        ] {
            assert!(out.contains(&format!("absent {f}")), "{f} is there:\n{out}");
        }
        assert!(out.contains("no-shadow"), "{out}");
    }

    fn the_sandbox_user_resolves_by_name_with_the_sandbox_home() {
        let out = inside("id -un; whoami; getent passwd $(id -u) | cut -d: -f6; echo home=$HOME");
        // SAFETY: geteuid cannot fail.
        let uid = unsafe { libc::geteuid() };
        let name = if uid == 0 { "root" } else { "rfs" };
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], name, "{out}");
        assert_eq!(lines[1], name, "{out}");
        assert_eq!(
            Some(format!("home={}", lines[2]).as_str()),
            lines.get(3).copied(),
            "{out}"
        );
    }

    fn localhost_and_the_sandbox_hostname_resolve() {
        let out = inside("getent hosts localhost; getent hosts rfs-sandbox");
        assert!(
            out.contains("127.0.0.1") || out.contains("::1"),
            "localhost did not resolve:\n{out}"
        );
        assert!(out.contains("127.0.1.1"), "{out}");
    }

    fn the_hosts_ca_certificates_os_release_and_linker_cache_are_there() {
        let out = inside(
            "for f in /etc/ssl/certs/ca-certificates.crt /etc/os-release /etc/ld.so.cache /etc/nsswitch.conf; do \
               if [ -r $f ]; then echo readable $f $(wc -c < $f); else echo missing $f; fi; done",
        );
        for f in ["/etc/os-release", "/etc/ld.so.cache", "/etc/nsswitch.conf"] {
            assert!(out.contains(&format!("readable {f}")), "{f}:\n{out}");
        }
        let bundle = Path::new("/etc/ssl/certs/ca-certificates.crt");
        if let Ok(text) = std::fs::read(bundle) {
            assert!(
                out.contains(&format!("readable {} {}", bundle.display(), text.len())),
                "the host's CA bundle is not the sandbox's:\n{out}"
            );
        }
    }

    /// The host's resolver only with the host's network; behind rfs's
    /// egress proxy (the default) names are resolved by the proxy, and with
    /// no network there is nothing to ask.
    fn resolv_conf_follows_the_network() {
        let with = inside_with_args(
            "cat /etc/resolv.conf",
            "sandbox(#{ network: \"host\" });",
            &["--allow-host-network"],
        );
        let host = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
        if !host.is_empty() {
            assert_eq!(
                with, host,
                "the sandbox with the host's network has another resolver"
            );
        }
        let proxied = inside("cat /etc/resolv.conf");
        assert!(!proxied.contains("nameserver"), "{proxied}");
        assert!(proxied.contains("egress proxy"), "{proxied}");
        let without = inside_with("cat /etc/resolv.conf", "sandbox(#{ network: false });");
        assert!(!without.contains("nameserver"), "{without}");
    }

    fn the_sandbox_etc_is_read_only() {
        let out = inside("echo x >> /etc/passwd 2>/dev/null && echo wrote || echo refused; touch /etc/new 2>/dev/null && echo made || echo refused");
        assert_eq!(out.matches("refused").count(), 2, "{out}");
    }

    /// A file only its owner may read, made in a system directory a step
    /// sees (`/opt`, else `/usr/local`), is not readable by the step — even
    /// where rfs (and so the step) runs as the host's root. World-readable
    /// files there still are.
    fn a_root_only_host_file_in_a_visible_system_directory_is_not_readable() {
        use std::os::unix::fs::PermissionsExt;
        let parent = ["/opt", "/usr/local"]
            .into_iter()
            .map(Path::new)
            .find(|p| p.is_dir())
            .expect("/opt or /usr/local");
        let dir = parent.join(format!("rfs-test-{}", uuid_like()));
        std::fs::create_dir(&dir).unwrap();
        let _remove = Remove(dir.clone());
        std::fs::write(dir.join("secret"), "host-secret").unwrap();
        std::fs::set_permissions(dir.join("secret"), std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::write(dir.join("public"), "host-public").unwrap();
        std::fs::set_permissions(dir.join("public"), std::fs::Permissions::from_mode(0o644)).unwrap();
        let out = inside(&format!(
            "id -u; cat {d}/secret 2>/dev/null || echo secret-refused; cat {d}/public",
            d = dir.display()
        ));
        assert!(out.contains("secret-refused"), "{out}");
        assert!(!out.contains("host-secret"), "{out}");
        assert!(out.contains("host-public"), "{out}");
    }

    /// Of the host, a step sees the system directories and nothing else:
    /// not `/root`, `/var`, `/srv`, `/boot`, `/sys` or `/run`, and in
    /// `/home` only its own home (`/home/rfs`), none of the host's.
    fn host_data_directories_do_not_exist_in_the_sandbox() {
        let out = inside(
            "for d in /root /var /var/lib /srv /boot /sys /run /mnt /media; do \
               if [ -e $d ]; then echo present $d; else echo absent $d; fi; done; \
             echo home: $(cd /home && echo * .[!.]*)",
        );
        assert!(out.contains("home: rfs .[!.]*\n"), "/home holds more than the sandbox's home:\n{out}");
        for d in [
            "/root", "/var", "/var/lib", "/srv", "/boot", "/sys", "/run", "/mnt", "/media",
        ] {
            // Under gVisor, `/sys` is its kernel's own and `/run` holds
            // only rfs's agent (checked below).
            if under_gvisor() && (d == "/sys" || d == "/run") {
                continue;
            }
            assert!(out.contains(&format!("absent {d}")), "{d} is there:\n{out}");
        }
        if under_gvisor() {
            let run = inside("echo /run/* /run/rfs/*");
            assert_eq!(run.trim(), "/run/rfs /run/rfs/rfs", "{run}");
        }
    }
}
