//! `local` as an isolation boundary (issue #11): what a step can and cannot
//! reach from inside an isolated local sandbox, that nothing it started
//! survives, `network: false`, and clean refusals where namespaces are not
//! available. Observed from outside, with the real kernel.

mod common;
use common::*;
#[path = "common/unprivileged.rs"]
mod unprivileged;
use unprivileged::*;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether this machine lets us create user namespaces at all (the tests
/// that need them say so instead of passing vacuously).
fn namespaces_here() -> bool {
    rfs::provider::local::availability().is_ok()
}

#[track_caller]
fn require_namespaces() {
    assert!(
        namespaces_here(),
        "this machine does not permit unprivileged user namespaces ({:?}); the isolation tests cannot run here",
        rfs::provider::local::availability()
    );
}

/// Kills a background rfs if the test fails before it ends it.
struct Reap(Option<std::process::Child>);

impl Drop for Reap {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn isolation_fact(out: &RunOut) -> serde_json::Value {
    out.entries("placement")[0]["isolation"].clone()
}

fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.display().to_string().replace('\'', r"'\''"))
}

#[test]
fn auto_mode_isolates_in_namespaces_and_says_so() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sync_source(); let r = step("pid", "echo $$; ls /proc | grep -c '^[0-9]'"); print(r.stdout);"#,
    );
    out.assert_code(0);
    let fact = isolation_fact(&out);
    assert_eq!(fact["mode"], "namespaces", "{fact}");
    assert_eq!(fact["requested"], "auto");
    assert_eq!(fact["network"], true);
    assert!(
        fact["reason"].as_str().unwrap().contains("permits"),
        "{fact}"
    );
    assert!(
        out.evidence().contains("- isolation: namespaces"),
        "{}",
        out.evidence()
    );
    // Its own PID namespace: a handful of processes, not the host's.
    let nums: Vec<i64> = out
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("[pid] "))
        .map(|n| n.trim().parse().unwrap())
        .collect();
    assert!(nums.len() == 2 && nums[1] < 10, "{}", out.stdout);
    rfs.assert_no_leftovers();
}

#[test]
fn step_cannot_read_the_checkout_home_or_state_dir_by_host_path() {
    require_namespaces();
    checkout_home_and_state_dir_are_out_of_reach(&Rfs::new(Prov::Local), "namespaces");
}

/// On docker: nothing of this machine is mounted in the container. Paths
/// such as `/root` exist there (the image's own), so files only this
/// machine has are looked for: in the checkout, the home of the user
/// running rfs, and the state directory.
#[test]
fn a_docker_step_cannot_read_the_checkout_home_or_state_dir_by_host_path() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_else(|_| "/root".into()));
    let in_home = home.join(format!(".rfs-test-marker-{}", uuid_like()));
    std::fs::write(&in_home, "CONTENT-OF-THE-HOSTS-HOME").unwrap();
    struct Gone(PathBuf);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
    let _gone = Gone(in_home.clone());
    let in_state = rfs.state.path().join("host-state-marker");
    std::fs::write(&in_state, "CONTENT-OF-THE-STATE-DIR").unwrap();
    let marker = repo.path().join("reproducer-marker.txt");
    let script = format!(
        r#"sync_source();
        for p in [{marker:?}, {home:?}, {state:?}] {{
            let r = step("look", `cat '${{p}}' 2>/dev/null || echo absent`);
            print(p + " " + r.stdout);
        }}
        print(step("own", "cat reproducer-marker.txt").stdout);"#,
        marker = marker.display().to_string(),
        home = in_home.display().to_string(),
        state = in_state.display().to_string(),
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    assert_eq!(isolation_fact(&out)["mode"], "container");
    assert_eq!(
        out.stdout.matches("[look] absent").count(),
        3,
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("CONTENT-OF-THE"), "{}", out.stdout);
    assert!(out.stdout.contains("[own] marker"), "{}", out.stdout);
    rfs.assert_no_leftovers();
}

/// On docker the container has its own PID namespace: a process of this
/// machine is not among a step's.
#[test]
fn a_docker_step_cannot_see_host_processes() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let marker = format!("{}", 900_000 + std::process::id() % 99_999);
    let mut host = Command::new("sleep").arg(&marker).spawn().unwrap();
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"let r = step("ps", "n=0; for p in /proc/[0-9]*; do n=$((n+1)); case $(tr '\\0' ' ' < $p/cmdline 2>/dev/null) in *'sleep '{marker}*) echo seen;; esac; done; [ -e /proc/$$ ] && echo own-shell-visible; echo count=$n");
            print(r.stdout);"#
        ),
    );
    let _ = host.kill();
    let _ = host.wait();
    out.assert_code(0);
    assert!(!out.stdout.contains("seen"), "{}", out.stdout);
    let count: usize = out
        .stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("[ps] count="))
        .and_then(|n| n.parse().ok())
        .expect("the step counted its processes");
    // It saw its own processes (an empty /proc would pass the rest).
    assert!(
        out.stdout.contains("[ps] own-shell-visible"),
        "{}",
        out.stdout
    );
    assert!(
        (1..20).contains(&count),
        "a step saw {count} processes:\n{}",
        out.stdout
    );
    rfs.assert_no_leftovers();
}

/// The same under gVisor: its bundle binds the same directories.
#[test]
fn step_under_gvisor_cannot_read_the_checkout_home_or_state_dir_by_host_path() {
    if gvisor_missing() {
        return;
    }
    checkout_home_and_state_dir_are_out_of_reach(&Rfs::local_gvisor(), "gvisor");
}

fn checkout_home_and_state_dir_are_out_of_reach(rfs: &Rfs, mode: &str) {
    let repo = Repo::new();
    let home = std::env::var("HOME").unwrap_or_else(|_| "/root".into());
    let marker = repo.path().join("reproducer-marker.txt");
    let script = format!(
        r#"sync_source();
        for p in [{marker:?}, {repo:?}, {home:?}, {state:?}] {{
            let r = step("look", `test -e '${{p}}' && echo visible || echo absent`);
            print(p + " " + r.stdout);
        }}
        let own = step("own", "cat reproducer-marker.txt");
        print(own.stdout);"#,
        marker = marker.display().to_string(),
        repo = repo.path().display().to_string(),
        home = home,
        state = rfs.state.path().join("out").display().to_string(),
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    assert_eq!(isolation_fact(&out)["mode"], mode);
    assert!(
        !out.stdout.contains("visible"),
        "a host path was visible inside the sandbox:\n{}",
        out.stdout
    );
    assert_eq!(
        out.stdout.matches("[look] absent").count(),
        4,
        "{}",
        out.stdout
    );
    // The synced copy is there (the sandbox works), the original is not.
    assert!(out.stdout.contains("[own] marker"), "{}", out.stdout);
    rfs.assert_no_leftovers();
}

#[test]
fn step_cannot_create_files_on_the_host_outside_the_sandbox() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let tag = uuid_like();
    let host_tmp = format!("/tmp/rfs-escape-{tag}");
    let in_repo = repo.path().join(format!("escape-{tag}"));
    let in_etc = format!("/etc/rfs-escape-{tag}");
    let in_usr = format!("/usr/rfs-escape-{tag}");
    let in_root = format!("/rfs-escape-{tag}");
    let script = format!(
        r#"sync_source();
        step("write", "for f in {host_tmp} {in_repo} {in_etc} {in_usr} {in_root}; do touch \"$f\" 2>/dev/null && echo wrote $f || echo refused $f; done");
        let r = step("tmp-is-private-but-shared-by-steps", "cat {host_tmp} && echo still-there");
        print(r.stdout);"#,
        in_repo = sh_quote(&in_repo),
    );
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    // The sandbox's own /tmp took the write and keeps it between steps ...
    assert!(
        out.stdout.contains(&format!("wrote {host_tmp}")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("still-there"), "{}", out.stdout);
    // ... the others were refused inside (read-only or absent) ...
    for p in [&in_etc, &in_usr, &in_root] {
        assert!(
            out.stdout.contains(&format!("refused {p}")),
            "{p}: {}",
            out.stdout
        );
    }
    // ... and nothing appeared on the host.
    for p in [
        Path::new(&host_tmp),
        &in_repo,
        Path::new(&in_etc),
        Path::new(&in_usr),
        Path::new(&in_root),
    ] {
        assert!(!p.exists(), "the step created {} on the host", p.display());
    }
    rfs.assert_no_leftovers();
}

/// A daemon that left its session and group is still in the sandbox's PID
/// namespace, and dies with it at the end of the run. (Each daemon step
/// waits a moment: the step's own group is killed when it ends, and the
/// daemon must have left it by then.)
#[test]
fn setsid_daemon_does_not_survive_the_run() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sync_source();
        step("daemon", "setsid sleep 2718281 </dev/null >/dev/null 2>&1 & sleep 0.3");
        let r = step("alive", "sleep 0.2; ps -eo pid,sid,args | grep -c '[s]leep 2718281'");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    assert!(
        out.stdout.contains("[alive] 1"),
        "the daemon did not start:\n{}",
        out.stdout
    );
    assert!(
        !process_running("sleep\x002718281"),
        "a setsid daemon survived the run"
    );
    rfs.assert_no_leftovers();
}

/// A step that times out is killed with its whole process group, while
/// the sandbox lives on: its background job is gone before the next step.
#[test]
fn timed_out_step_leaves_no_process_of_its_group_in_the_sandbox() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sync_source();
        let t = step("slow", "sleep 3141592 & sleep 3141593", #{ timeout: 1, allow_failure: true });
        print(`timed_out=${t.timed_out}`);
        let r = step("left", "ps -eo args | grep -c '[s]leep 314159' || true");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    assert!(out.stdout.contains("timed_out=true"), "{}", out.stdout);
    assert!(
        out.stdout.contains("[left] 0"),
        "the timed-out step's group survived it:\n{}",
        out.stdout
    );
    rfs.assert_no_leftovers();
}

/// What an isolated command is: its own process group, no capabilities
/// (none to regain: `no_new_privs`, empty bounding set) and only its
/// three standard streams open.
#[test]
fn isolated_step_is_its_own_group_without_capabilities_or_other_descriptors() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sync_source();
        let r = step("self", "grep -E '^(CapPrm|CapEff|CapBnd|NoNewPrivs)' /proc/$$/status | tr -s '\t ' ' '; cut -d' ' -f1,5 /proc/$$/stat; sleep 30 </dev/null & sleep 0.2; echo \"fds: $(ls /proc/$!/fd | tr '\n' ' ')\"; kill $!");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    for want in [
        "[self] CapPrm: 0000000000000000",
        "[self] CapEff: 0000000000000000",
        "[self] CapBnd: 0000000000000000",
        "[self] NoNewPrivs: 1",
    ] {
        assert!(out.stdout.contains(want), "{want} missing:\n{}", out.stdout);
    }
    assert!(
        out.stdout.lines().any(|l| l.trim() == "[self] fds: 0 1 2"),
        "a command holds more than its standard streams:\n{}",
        out.stdout
    );
    let group = out
        .stdout
        .lines()
        .find_map(|l| {
            let mut w = l.strip_prefix("[self] ")?.split(' ');
            let (pid, pgrp) = (
                w.next()?.parse::<u32>().ok()?,
                w.next()?.parse::<u32>().ok()?,
            );
            Some((pid, pgrp))
        })
        .expect("pid and process group printed");
    assert_eq!(group.0, group.1, "not its own process group leader");
}

/// Bug: a descriptor rfs inherited without close-on-exec (from whatever
/// started it: a shell's `exec 7<file`, a CI runner's pipes) was passed on
/// to every isolated command, a way out to the host the namespaces
/// otherwise close. Commands now get only their three standard streams.
#[test]
fn inherited_host_descriptor_does_not_reach_an_isolated_step() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let secret = rfs.state.path().join("host-secret.txt");
    std::fs::write(&secret, "host-secret-content\n").unwrap();
    let (script, out_dir) = rfs.prepare(
        r#"sync_source();
        let r = step("fd", "if cat <&7 2>/dev/null; then echo fd7-open; else echo fd7-closed; fi");
        print(r.stdout);"#,
    );
    let mut inner = rfs.cmd(repo.path());
    inner.arg("run").arg(&script).arg("--out").arg(&out_dir);
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(r#"f=$1; shift; exec 7<"$f"; exec "$@""#)
        .arg("sh")
        .arg(&secret)
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(repo.path());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = finish(cmd.output().unwrap(), out_dir);
    out.assert_code(0);
    assert!(out.stdout.contains("[fd] fd7-closed"), "{}", out.stdout);
    assert!(
        !out.stdout.contains("host-secret-content"),
        "{}",
        out.stdout
    );
}

/// Bug: the sandbox's init is a forked copy of rfs, and its command line
/// (the script's and output's host paths, every option) was readable
/// inside as /proc/1/cmdline. The init blanks it.
#[test]
fn sandbox_init_does_not_show_rfs_command_line() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sync_source();
        let r = step("init", "tr '\\0' '_' < /proc/1/cmdline; echo '|end'");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("[init]"))
        .expect("the init's command line printed");
    assert!(
        !line.contains("run") && !line.contains(".rhai") && !line.contains("--out"),
        "rfs's command line is visible inside: {line}"
    );
}

/// Start (in the background) a run whose first step leaves a `setsid`
/// daemon `sleep DAEMON` and whose second step `sleep LONG` runs until
/// rfs is stopped; returns once both are running. The child is reaped if
/// the test fails before it ends it.
fn run_with_setsid_daemon(rfs: &Rfs, repo: &Repo, daemon: &str, long: &str) -> (Reap, PathBuf) {
    let (child, out_dir) = rfs.spawn(
        repo.path(),
        &format!(
            r#"sync_source();
        step("daemon", "setsid sleep {daemon} </dev/null >/dev/null 2>&1 & sleep 0.3");
        step("long", "sleep {long}");"#
        ),
    );
    let guard = Reap(Some(child));
    wait_for_journal_text(&out_dir, "\"name\":\"long\"");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(
        process_running(&format!("sleep\0{daemon}")),
        "the daemon did not start"
    );
    (guard, out_dir)
}

/// Wait (bounded, 10 s) until none of the `sleep ARG` processes runs: the
/// kernel kills a namespace promptly but not atomically.
fn await_sleeps_gone(args: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while args.iter().any(|a| process_running(&format!("sleep\0{a}")))
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn setsid_daemon_does_not_survive_ctrl_c() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (mut guard, out_dir) = run_with_setsid_daemon(&rfs, &repo, "1618033", "3000");
    let child = guard.0.take().unwrap();
    sigint(&child);
    let out = finish(child.wait_with_output().unwrap(), out_dir);
    out.assert_code(130);
    assert!(
        !process_running("sleep\x001618033"),
        "a setsid daemon survived Ctrl-C"
    );
    rfs.assert_no_leftovers();
}

/// rfs killed with SIGKILL cannot tear down: its sandbox's processes die
/// with it anyway (the init's lifeline), and `rfs gc` removes the rest.
#[test]
fn setsid_daemon_does_not_survive_a_killed_rfs_and_gc_cleans_up() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (mut guard, _out_dir) = run_with_setsid_daemon(&rfs, &repo, "1414213", "3001");
    let mut child = guard.0.take().unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    // Both, before asserting either.
    await_sleeps_gone(&["1414213", "3001"]);
    assert!(
        !process_running("sleep\x001414213"),
        "a setsid daemon survived SIGKILL of rfs"
    );
    assert!(
        !process_running("sleep\x003001"),
        "the step survived SIGKILL of rfs"
    );
    let gc = rfs
        .cmd(rfs.state.path())
        .args(["gc", "--provider", "local"])
        .output()
        .unwrap();
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    rfs.assert_no_leftovers();
}

provider_tests! {
    fn network_false_leaves_only_loopback(rfs: &Rfs) {
        if rfs.prov == Prov::Local {
            require_namespaces();
        }
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"sandbox(#{ network: false });
            sync_source();
            let r = step("ifaces", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '");
            print(r.stdout);"#,
        );
        out.assert_code(0);
        let ifaces: Vec<&str> = out
            .stdout
            .lines()
            .filter_map(|l| l.strip_prefix("[ifaces] "))
            .collect();
        assert_eq!(ifaces, ["lo"], "{}", out.stdout);
        assert_eq!(isolation_fact(&out)["network"], false);
        rfs.assert_no_leftovers();
    }
}

#[test]
fn network_false_loopback_is_up_and_host_loopback_is_not_reachable() {
    require_namespaces();
    if !Path::new("/usr/bin/python3").exists() {
        panic!("python3 is needed for this test (scripts/test.sh installs it)");
    }
    // A server on the host's loopback, which the sandbox must not reach.
    let host = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = host.local_addr().unwrap().port();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let py = format!(
        r#"import socket
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
c = socket.create_connection(s.getsockname(), timeout=2); print("own-loopback-ok")
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2); print("host-reached")
except OSError: print("host-unreachable")"#
    );
    std::fs::write(repo.path().join("net.py"), py).unwrap();
    repo.commit("net");
    let out = rfs.run(
        repo.path(),
        r#"sandbox(#{ network: false }); sync_source(); print(step("net", "python3 net.py").stdout);"#,
    );
    out.assert_code(0);
    assert!(out.stdout.contains("own-loopback-ok"), "{}", out.stdout);
    assert!(out.stdout.contains("host-unreachable"), "{}", out.stdout);
    drop(host);
}

#[test]
fn none_mode_is_the_old_behaviour_and_says_so() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let marker = repo.path().join("reproducer-marker.txt");
    let out = rfs.run_with(
        repo.path(),
        &format!(
            r#"sync_source(); print(step("host", "cat {}").stdout);"#,
            sh_quote(&marker)
        ),
        &["--isolation", "none"],
    );
    out.assert_code(0);
    let fact = isolation_fact(&out);
    assert_eq!(fact["mode"], "none");
    assert_eq!(fact["requested_by"], "--isolation flag");
    assert!(out.stdout.contains("[host] marker"), "{}", out.stdout);
    assert!(
        out.evidence().contains("- isolation: none"),
        "{}",
        out.evidence()
    );
}

#[test]
fn network_false_without_namespaces_is_refused_before_anything_runs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ network: false }); sync_source(); step("never", "true");"#,
        &["--isolation", "none"],
    );
    out.assert_code(3);
    assert!(out.stderr.contains("network: false"), "{}", out.stderr);
    assert!(out.entries("step.start").is_empty());
    assert!(out.entries("placement").is_empty());
}

#[test]
fn unknown_isolation_mode_is_a_usage_error() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(repo.path(), r#"print(1);"#, &["--isolation", "vm"]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("unknown isolation mode `vm`"),
        "{}",
        out.stderr
    );
    let out = rfs.run(repo.path(), r#"sandbox(#{ isolation: "vm" });"#);
    assert_ne!(out.code, 0);
    assert!(
        out.stderr.contains("unknown isolation mode `vm`"),
        "{}",
        out.stderr
    );
}

/// Run `rfs` inside a user namespace whose nested user namespaces are
/// forbidden by the kernel (user.max_user_namespaces = 0 there): the real
/// refusal, not a simulated one.
fn run_where_namespaces_are_forbidden(
    rfs: &Rfs,
    repo: &Repo,
    script: &str,
    args: &[&str],
) -> RunOut {
    forbidden_with_env(rfs, repo, script, args, &[])
}

fn forbidden_with_env(
    rfs: &Rfs,
    repo: &Repo,
    script: &str,
    args: &[&str],
    env: &[(&str, &str)],
) -> RunOut {
    let (script_path, out_dir) = rfs.prepare(script);
    let mut inner = rfs.cmd(repo.path());
    inner.envs(env.iter().copied());
    inner
        .arg("run")
        .arg(&script_path)
        .arg("--out")
        .arg(&out_dir)
        .args(args);
    finish(forbidden(&inner, repo), out_dir)
}

/// Run `inner` where nested user namespaces are forbidden.
fn forbidden(inner: &Command, repo: &Repo) -> std::process::Output {
    let mut cmd = Command::new("unshare");
    cmd.args(["--user", "--map-root-user", "sh", "-c"])
        .arg(r#"echo 0 > /proc/sys/user/max_user_namespaces && exec "$@""#)
        .arg("sh")
        .arg(inner.get_program())
        .args(inner.get_args())
        .current_dir(repo.path());
    for (k, v) in inner.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.output().expect("unshare runs")
}

/// `rfs doctor`'s local line names the isolation a run would get, and
/// fails (exit 3) when the mode asked for would refuse to run.
#[test]
fn doctor_names_local_isolation_and_fails_when_namespaces_mode_would_refuse() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let doctor = |env: &[(&str, &str)], forbid: bool| {
        let mut c = rfs.cmd(repo.path());
        c.envs(env.iter().copied())
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .arg("doctor");
        let o = if forbid {
            forbidden(&c, &repo)
        } else {
            c.output().unwrap()
        };
        let out = String::from_utf8_lossy(&o.stdout).into_owned();
        let local = out.lines().next().unwrap_or_default().to_owned();
        (o.status.code(), local)
    };
    let (code, line) = doctor(&[], false);
    assert_eq!(code, Some(0), "{line}");
    assert!(line.contains("isolation namespaces"), "{line}");
    // Forbidden by the kernel: auto falls back and says so; namespaces refuses.
    let (code, line) = doctor(&[], true);
    assert_eq!(code, Some(0), "{line}");
    assert!(line.starts_with("local    ok"), "{line}");
    assert!(line.contains("isolation none"), "{line}");
    let (code, line) = doctor(&[("RFS_LOCAL_ISOLATION", "namespaces")], true);
    assert_eq!(code, Some(3), "{line}");
    assert!(line.starts_with("local    FAIL"), "{line}");
    assert!(line.contains("isolation refused"), "{line}");
}

#[test]
fn namespaces_mode_refuses_cleanly_where_namespaces_are_forbidden() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let marker = rfs.state.path().join("ran");
    let script = format!(
        r#"sync_source(); step("never", "touch {}");"#,
        sh_quote(&marker)
    );
    let out =
        run_where_namespaces_are_forbidden(&rfs, &repo, &script, &["--isolation", "namespaces"]);
    out.assert_code(3);
    assert!(
        out.stderr.contains("isolation `namespaces`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("max_user_namespaces is 0"),
        "{}",
        out.stderr
    );
    assert!(out.entries("placement").is_empty(), "a sandbox was placed");
    assert!(out.entries("step.start").is_empty());
    assert!(!marker.exists(), "the step ran");
    assert!(out.kinds().contains(&"provider.unavailable".to_owned()));

    // The env var asks the same.
    let out = forbidden_with_env(
        &rfs,
        &repo,
        &script,
        &[],
        &[("RFS_LOCAL_ISOLATION", "namespaces")],
    );
    out.assert_code(3);
    assert!(out.stderr.contains("RFS_LOCAL_ISOLATION"), "{}", out.stderr);

    // So does the script, before its first step.
    let out = run_where_namespaces_are_forbidden(
        &rfs,
        &repo,
        &format!(r#"sandbox(#{{ isolation: "namespaces" }}); {script}"#),
        &[],
    );
    out.assert_code(3);
    assert!(out.stderr.contains("sandbox() option"), "{}", out.stderr);
    assert!(!marker.exists(), "the step ran");
}

#[test]
fn auto_mode_falls_back_where_namespaces_are_forbidden_and_says_why() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = run_where_namespaces_are_forbidden(
        &rfs,
        &repo,
        r#"sync_source(); print(step("x", "echo ran").stdout);"#,
        &[],
    );
    out.assert_code(0);
    let fact = isolation_fact(&out);
    assert_eq!(fact["mode"], "none", "{fact}");
    assert!(
        fact["reason"]
            .as_str()
            .unwrap()
            .contains("max_user_namespaces is 0"),
        "{fact}"
    );
    assert!(out.stdout.contains("[x] ran"));
}

/// As an unprivileged user (nobody) when the tests run as root: nothing
/// here needs root.
#[test]
fn unprivileged_user_gets_namespaces() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = r#"sync_source(); print(step("who", "id -u; cat reproducer-marker.txt").stdout);"#;
    let out = run_unprivileged(&rfs, repo.path(), script, &["--isolation", "namespaces"]);
    out.assert_code(0);
    assert_eq!(isolation_fact(&out)["mode"], "namespaces");
    let uid = unprivileged_uid();
    assert!(
        out.stdout.contains(&format!("[who] {uid}")),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains("[who] marker"), "{}", out.stdout);
}

/// Regression: a state directory on the host's /dev/shm (a tmpfs, as the
/// benchmark's memory regime uses) was hidden by the sandbox's own /dev,
/// so no command could enter the sandbox home ("entering …/home: No such
/// file or directory").
#[test]
fn a_sandbox_home_under_dev_shm_is_reached_in_namespaces() {
    require_namespaces();
    let shm = Path::new("/dev/shm");
    assert!(shm.is_dir(), "this machine has no /dev/shm");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let state = tempfile::tempdir_in(shm).unwrap();
    let (script, out_dir) = rfs.prepare(
        r#"sync_source(); let r = step("x", "touch made-here && pwd && ls"); print(r.stdout);"#,
    );
    let o = rfs
        .cmd(repo.path())
        .env("RFS_STATE_DIR", state.path())
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = RunOut {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
        out_dir,
    };
    out.assert_code(0);
    assert_eq!(isolation_fact(&out)["mode"], "namespaces");
    assert!(out.stdout.contains("made-here"), "{}", out.stdout);
    assert!(
        out.stdout.contains("/home/rfs/relayflows-source\n"),
        "the step ran in the home (at its one path inside): {}",
        out.stdout
    );
    assert!(
        !out.stdout.contains(&state.path().display().to_string()),
        "no host path of the state directory reached the step: {}",
        out.stdout
    );
}

/// Host kernel files a step of an rfs run as root could reach through its
/// fresh `/proc` before the fix (issue #20, class 2). Opened for writing
/// with `: >>`, which writes nothing: the test cannot change the host.
const HOST_KERNEL_FILES: &[&str] = &[
    "/proc/sys/vm/swappiness",
    "/proc/sys/vm/drop_caches",
    "/proc/sys/kernel/core_pattern",
    "/proc/sys/kernel/hostname",
    "/proc/sys/net/ipv4/ip_forward",
    "/proc/sysrq-trigger",
];

fn host_value(p: &str) -> Option<String> {
    std::fs::read_to_string(p).ok()
}

#[test]
fn a_local_step_of_rfs_run_as_root_cannot_open_host_kernel_settings_for_writing() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let readable: Vec<_> = HOST_KERNEL_FILES
        .iter()
        .filter(|p| *p != &"/proc/sysrq-trigger" && *p != &"/proc/sys/vm/drop_caches")
        .map(|p| (*p, host_value(p)))
        .collect();
    let files = HOST_KERNEL_FILES.join(" ");
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"step("poke", "id -u; for f in {files}; do if [ -e $f ]; then (: >> $f) 2>/dev/null && echo writable $f || echo refused $f; fi; done");"#
        ),
    );
    out.assert_code(0);
    for f in HOST_KERNEL_FILES {
        if !Path::new(f).exists() {
            continue;
        }
        assert!(
            out.stdout.contains(&format!("refused {f}")),
            "a step could open {f} for writing:\n{}",
            out.stdout
        );
    }
    for (p, before) in readable {
        assert_eq!(host_value(p), before, "{p} changed on the host");
    }
    rfs.assert_no_leftovers();
}

#[test]
fn a_local_step_has_its_own_hostname_and_cannot_rename_the_host() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let host = host_value("/proc/sys/kernel/hostname");
    let out = rfs.run(
        repo.path(),
        r#"let r = step("name", "cat /proc/sys/kernel/hostname; hostname rfs-renamed-host 2>/dev/null && echo renamed || echo refused; cat /proc/sys/kernel/hostname");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    let lines: Vec<_> = out.stdout.lines().collect();
    assert!(
        lines.contains(&rfs::provider::local::HOSTNAME),
        "the step saw another hostname: {}",
        out.stdout
    );
    assert!(out.stdout.contains("refused"), "{}", out.stdout);
    assert_eq!(host_value("/proc/sys/kernel/hostname"), host);
    rfs.assert_no_leftovers();
}

#[test]
fn a_local_step_cannot_read_host_kernel_memory_or_keys() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"let r = step("peek", "for f in /proc/kcore /proc/keys /proc/timer_list; do printf '%s %s\n' $f $(head -c 64 $f 2>/dev/null | wc -c); done");
        print(r.stdout);"#,
    );
    out.assert_code(0);
    for f in ["/proc/kcore", "/proc/keys", "/proc/timer_list"] {
        if Path::new(f).is_file() {
            assert!(
                out.stdout.contains(&format!("{f} 0")),
                "{f} is readable in the step:\n{}",
                out.stdout
            );
        }
    }
    rfs.assert_no_leftovers();
}

/// A rustup toolchain of this machine (`$RUSTUP_HOME`, else
/// `~/.rustup`), the first holding `bin/cargo` and `bin/rustc`.
fn host_rust_toolchain() -> Option<PathBuf> {
    let home = std::env::var_os("RUSTUP_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".rustup")))?;
    let mut all: Vec<PathBuf> = std::fs::read_dir(home.join("toolchains"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("bin/cargo").is_file() && p.join("bin/rustc").is_file())
        .collect();
    all.sort();
    all.into_iter().next()
}

// The book's route to Rust on `local` (Debian's cargo) was old and
// fetched its index from a git host; the host's rustup toolchain was
// invisible to the sandbox. Mounted with `--mount-ro`, it runs there, and
// its digest is journaled (read once; a second run only walks it).
#[test]
fn a_host_rust_toolchain_mounted_read_only_runs_cargo_and_rustc() {
    require_namespaces();
    let Some(toolchain) = host_rust_toolchain() else {
        eprintln!("skipped: this host has no rustup toolchain (~/.rustup/toolchains/*/bin/cargo)");
        return;
    };
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let flag = format!("{}:/toolchains/rust", toolchain.display());
    let script = r#"let r = step("rust", "export PATH=/toolchains/rust/bin:$PATH; cargo --version && rustc --version");
print(r.stdout);"#;
    let out = rfs.run_with(repo.path(), script, &["--mount-ro", &flag]);
    out.assert_code(0);
    assert!(
        out.stdout.contains("cargo 1.") && out.stdout.contains("rustc 1."),
        "{}",
        out.stdout
    );
    let first = &out.entries("host.mount")[0];
    assert!(first["files"].as_u64().unwrap() > 1000, "{first}");
    assert_eq!(first["files_read"], first["files"], "{first}");
    eprintln!(
        "digest of {}: {} files, {} bytes, {} ms",
        toolchain.display(),
        first["files"],
        first["bytes"],
        first["digest_ms"]
    );
    let again = rfs.run_with(repo.path(), script, &["--mount-ro", &flag]);
    again.assert_code(0);
    let second = &again.entries("host.mount")[0];
    assert_eq!(second["sha256"], first["sha256"]);
    assert_eq!(second["files_read"], 0, "{second}");
    eprintln!("unchanged: {} ms", second["digest_ms"]);
    let (ok, said) = rfs_verify(&rfs, repo.path(), &again.out_dir);
    assert!(ok, "{said}");
    rfs.assert_no_leftovers();
}

/// Where rfs is not root the host folder is a plain bind (not id-mapped):
/// it must still be read-only, `nosuid` and `nodev` in the sandbox.
#[test]
fn an_unprivileged_rfs_shows_a_host_folder_read_only_nosuid_and_nodev() {
    require_namespaces();
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let host = tempfile::tempdir().unwrap();
    std::fs::write(host.path().join("hello.txt"), "host-folder-content\n").unwrap();
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let flag = format!("{}:/toolchains/probe", host.path().display());
    let script = r#"print(step("look", "cat /toolchains/probe/hello.txt; touch /toolchains/probe/new 2>/dev/null && echo WROTE || echo write-refused; grep ' /toolchains/probe ' /proc/self/mounts").stdout);"#;
    let args = ["--isolation", "namespaces", "--mount-ro", &flag];
    let out = run_unprivileged(&rfs, repo.path(), script, &args);
    out.assert_code(0);
    assert!(
        out.stdout.contains("host-folder-content") && out.stdout.contains("write-refused"),
        "{}",
        out.stdout
    );
    assert!(!host.path().join("new").exists());
    let mount = out
        .stdout
        .lines()
        .find(|l| l.contains(" /toolchains/probe "))
        .expect("its mount");
    assert!(
        mount.contains(" ro,") && mount.contains("nosuid") && mount.contains("nodev"),
        "{mount}"
    );
    assert_eq!(out.entries("host.mount").len(), 1);
}
