//! Isolation `none` (only the person's `--isolation none`): what the
//! threat model says of it, held. A step is the user running rfs on the
//! host: it sees the host's processes; what it leaves running is killed
//! with the sandbox's cgroups where rfs runs as root; an allow list (a
//! network rfs cannot filter here) and caches (a mount would be the
//! host's) are refused before anything runs.

mod common;
use common::*;

#[test]
fn under_isolation_none_an_allow_list_and_caches_are_refused_before_anything_runs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let allow = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ network: #{ allow: ["pypi.org"] } }); step("never", "echo never-ran");"#,
        &["--isolation", "none"],
    );
    allow.assert_code(3);
    assert!(!allow.stdout.contains("never-ran"), "{}", allow.stdout);
    assert!(allow.entries("placement").is_empty());
    assert!(
        allow
            .stderr
            .contains("cannot enforce network policy only pypi.org")
            && allow.stderr.contains("it needs namespaces"),
        "{}",
        allow.stderr
    );
    let caches = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ caches: #{ pip: "~/.cache/pip" } }); step("never", "echo never-ran");"#,
        &["--isolation", "none"],
    );
    caches.assert_code(3);
    assert!(!caches.stdout.contains("never-ran"), "{}", caches.stdout);
    assert!(
        caches
            .stderr
            .contains("mounts a cache only into a sandbox isolated in namespaces"),
        "{}",
        caches.stderr
    );
    rfs.assert_no_leftovers();
}

#[test]
fn under_isolation_none_a_step_sees_host_processes_and_what_it_leaves_dies_with_the_sandbox() {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let m = 850_000 + std::process::id() % 9_999;
    let mut host = std::process::Command::new("sleep")
        .arg(m.to_string())
        .spawn()
        .unwrap();
    let host_pid = host.id();
    let out = rfs.run_with(
        repo.path(),
        &format!(
            r#"let r = step("see", "test -e /proc/{host_pid} && echo sees-host-process");
            print(r.stdout);
            step("leave", "setsid sleep {} >/dev/null 2>&1 < /dev/null & echo left");"#,
            m + 1
        ),
        &["--isolation", "none"],
    );
    let _ = host.kill();
    let _ = host.wait();
    out.assert_code(0);
    assert!(out.stdout.contains("sees-host-process"), "{}", out.stdout);
    assert!(out.stdout.contains("[leave] left"), "{}", out.stdout);
    // (A command line's arguments are NUL-separated.)
    let left = process_running(&format!("sleep\0{}", m + 1));
    if root {
        assert!(!left, "what the step left outlived the sandbox's cgroups");
    } else {
        // Without cgroups it outlives the run, as the threat model says.
        let _ = std::process::Command::new("pkill")
            .args(["-f", &format!("sleep {}", m + 1)])
            .status();
    }
    rfs.assert_no_leftovers();
}
