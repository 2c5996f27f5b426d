//! `isolation: "gvisor"` on `local` (#35): steps run under gVisor's
//! user-space kernel (real `runsc`), on the synced source at the mapped
//! path, with uploads visible, terminals, the network policy of the
//! namespaces sandbox, and nothing of runsc left afterwards; the mode is
//! journaled with runsc's version, a script cannot weaken it, and where
//! runsc is missing it is refused, naming why. Skipped (one line) where
//! runsc is not usable, unless RFS_REQUIRE_GVISOR=1.

mod common;
use common::*;
#[path = "common/netns.rs"]
mod netns;
use netns::*;

/// What `runsc --version` says of itself (`0.0~20221219.0`).
fn runsc_version() -> String {
    let out = std::process::Command::new("runsc")
        .arg("--version")
        .output()
        .expect("runsc runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.lines()
        .next()
        .and_then(|l| l.strip_prefix("runsc version "))
        .expect("runsc says its version")
        .trim()
        .to_owned()
}

/// The sandbox id a running rfs's journal places, once its first step
/// started.
fn placed_sandbox_once_started(out_dir: &std::path::Path) -> String {
    wait_for_journal(out_dir, "step.start");
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    journal
        .split("\"sandbox_id\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned()
}

/// The containers runsc still knows in rfs's state directory.
fn runsc_containers(rfs: &Rfs) -> Vec<String> {
    let root = rfs.state.path().join("local/runsc");
    std::fs::read_dir(&root)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".state"))
        .collect()
}

#[test]
fn a_step_under_gvisor_runs_in_its_kernel_on_the_synced_source_sees_uploads_and_resyncs_and_leaves_no_container(
) {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("a.txt", "committed\n");
    repo.write("v1.txt", "uploaded\n");
    let first = repo.commit("a");
    repo.write("b.txt", "second commit\n");
    repo.commit("b");
    let script = r#"sync_source(#{ rev: "FIRST" });
        let k = step("kernel", "dmesg | head -1; pwd; cat a.txt");
        print(k.stdout);
        put("v1.txt", "up/b.txt");
        step("uploaded", "cat up/b.txt");
        step("host-side", "for i in $(seq 200); do grep -q host a.txt && break; sleep 0.05; done; cat a.txt");
        let t = attach("sh");
        t.send("echo screen-$((6*7)); stty size\n");
        assert_screen(t, "screen-42");
        assert_screen(t, "24 80");
        t.close();
        sync_source();
        step("resynced", "cat b.txt");"#
        .replace("FIRST", &first);
    let (script_path, out_dir) = rfs.prepare(&script);
    let child = rfs
        .cmd(repo.path())
        .args(["run", "--isolation", "gvisor", "--out"])
        .arg(&out_dir)
        .arg(&script_path)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once gVisor has read a.txt, the host rewrites it in place (as an
    // upload or a re-sync does): the next step must see the new content.
    wait_for_journal_entries(&out_dir, "step.end", 1);
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    let id = journal
        .split("\"sandbox_id\":\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .unwrap()
        .to_owned();
    let synced = rfs
        .state
        .path()
        .join("local/sandboxes")
        .join(&id)
        .join("home/relayflows-source");
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .open(synced.join("a.txt"))
            .unwrap();
        f.write_all(b"rewritten on the host, longer\n").unwrap();
    }
    let out = wait_bounded(child, out_dir);
    out.assert_code(0);
    let kernel = lines(&out, "kernel");
    assert!(kernel[0].contains("Starting gVisor"), "{kernel:?}");
    let sandbox = out.sandbox_id();
    assert_eq!(sandbox, id);
    assert_eq!(
        kernel[1], "/home/rfs/relayflows-source",
        "the cwd is mapped"
    );
    assert_eq!(kernel[2], "committed");
    assert_eq!(lines(&out, "uploaded"), ["uploaded"]);
    assert_eq!(
        lines(&out, "host-side"),
        ["rewritten on the host, longer"],
        "a host-side write over a file gVisor read is seen"
    );
    // A re-sync streams its delta into a command inside gVisor (regression:
    // through a host FIFO, which gVisor cannot open).
    assert_eq!(lines(&out, "resynced"), ["second commit"]);
    let asserts = out.entries("attach.assert");
    assert_eq!(asserts.len(), 2, "{asserts:?}");
    assert!(
        asserts.iter().all(|a| a["outcome"] == "pass"),
        "{asserts:?}"
    );
    let fact = &out.entries("placement")[0]["isolation"];
    assert_eq!(fact["mode"], "gvisor", "{fact}");
    assert_eq!(fact["requested"], "gvisor", "{fact}");
    assert_eq!(fact["requested_by"], "--isolation flag", "{fact}");
    let reason = fact["reason"].as_str().unwrap();
    assert!(
        reason.contains(&format!("runsc {}", runsc_version())),
        "{reason}"
    );
    // Nothing of runsc is left: no state, no process of the sandbox.
    assert_eq!(runsc_containers(&rfs), Vec::<String>::new());
    assert!(
        !process_running(&sandbox),
        "a runsc process of {sandbox} is left"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn the_network_policy_holds_under_gvisor_as_under_namespaces() {
    if gvisor_missing() {
        return;
    }
    let public = TestNet::new("203.0.113", "hello from the public test server");
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let proxied = format!(
        r#"sandbox(#{{ isolation: "gvisor" }});
        sync_source();
        step("proxied", "curl -sS -m 5 {u}");
        step("direct", "curl -sS -m 5 --noproxy '*' {u} 2>&1; echo exit=$?");"#,
        u = public.url()
    );
    let out = rfs.run(repo.path(), &proxied);
    out.assert_code(0);
    assert_eq!(
        lines(&out, "proxied"),
        ["hello from the public test server"]
    );
    let direct = lines(&out, "direct").join("\n");
    assert!(
        direct.ends_with("exit=7"),
        "no route but the proxy: {direct}"
    );
    let conns = out.entries("net.connect");
    assert_eq!(conns.len(), 1, "{conns:?}");
    assert_eq!(conns[0]["allowed"], true, "{conns:?}");
    let off = format!(
        r#"sandbox(#{{ isolation: "gvisor", network: false }});
        sync_source();
        step("none", "curl -sS -m 5 -x http://127.0.0.1:3128 {u} 2>&1; echo exit=$?");"#,
        u = public.url()
    );
    let out = rfs.run(repo.path(), &off);
    out.assert_code(0);
    let none = lines(&out, "none").join("\n");
    assert!(none.ends_with("exit=7"), "network false refuses: {none}");
    assert!(out.entries("net.connect").is_empty());
    let fact = &out.entries("placement")[0]["isolation"];
    assert_eq!(fact["mode"], "gvisor", "{fact}");
    assert_eq!(fact["network_policy"]["policy"], "off", "{fact}");
    rfs.assert_no_leftovers();
}

#[test]
fn a_script_cannot_weaken_the_persons_isolation_gvisor_to_namespaces() {
    // (Without runsc, `--isolation gvisor` itself is refused first.)
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ isolation: "namespaces" });
        sync_source();
        step("never", "echo ran");"#,
        &["--isolation", "gvisor"],
    );
    assert_ne!(out.code, 0);
    assert!(!out.stdout.contains("ran"), "{}", out.stdout);
    let err = &out.stderr;
    assert!(
        err.contains("would widen") && err.contains("--isolation namespaces"),
        "{err}"
    );
    assert!(
        err.contains("sandbox(#{ isolation"),
        "at the script's span: {err}"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn gvisor_is_refused_naming_why_where_runsc_is_missing_and_doctor_says_so() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let missing = [("RFS_RUNSC", "/nonexistent/runsc")];
    let out = rfs.run_with_env(
        repo.path(),
        r#"sync_source(); step("never", "echo ran");"#,
        &["--isolation", "gvisor"],
        &missing,
    );
    assert_ne!(out.code, 0);
    assert!(!out.stdout.contains("ran"), "{}", out.stdout);
    assert!(
        out.stderr.contains("isolation `gvisor`") && out.stderr.contains("/nonexistent/runsc"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
    let doctor = |env: &[(&str, &str)]| {
        let o = rfs
            .cmd(repo.path())
            .envs(env.iter().copied())
            .arg("doctor")
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        let local = text
            .lines()
            .find(|l| l.starts_with("local"))
            .unwrap_or("")
            .to_owned();
        (o.status.success(), local)
    };
    let (ok, local) = doctor(&[
        ("RFS_RUNSC", "/nonexistent/runsc"),
        ("RFS_LOCAL_ISOLATION", "gvisor"),
    ]);
    assert!(!ok, "{local}");
    assert!(
        local.contains("gVisor does not work here") && local.contains("/nonexistent/runsc"),
        "{local}"
    );
    if gvisor_missing() {
        return;
    }
    let (ok, local) = doctor(&[]);
    assert!(ok, "{local}");
    assert!(
        local.contains(&format!("gVisor works here: runsc {}", runsc_version())),
        "{local}"
    );
}

#[test]
fn a_process_limit_below_what_gvisor_itself_needs_is_refused_naming_it() {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sandbox(#{ isolation: "gvisor", pids: 64 });
        sync_source();
        step("never", "echo ran");"#,
    );
    assert_ne!(out.code, 0);
    assert!(!out.stdout.contains("ran"), "{}", out.stdout);
    assert!(
        out.stderr
            .contains("process limit 64 is below the 128 a gVisor sandbox needs"),
        "{}",
        out.stderr
    );
    assert_eq!(runsc_containers(&rfs), Vec::<String>::new());
    rfs.assert_no_leftovers();
}

#[test]
fn an_rfs_killed_mid_run_leaves_no_gvisor_process_and_gc_removes_its_runsc_state() {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (mut child, out_dir) = rfs.spawn(
        repo.path(),
        r#"sandbox(#{ isolation: "gvisor" });
        sync_source();
        step("long", "sleep 600");"#,
    );
    let id = placed_sandbox_once_started(&out_dir);
    assert!(process_running(&id), "gVisor runs the sandbox {id}");
    child.kill().unwrap();
    let _ = child.wait();
    // The lifeline closed: gVisor's sandbox and file server end by
    // themselves; runsc keeps only its state until gc.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while process_running(&id) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !process_running(&id),
        "a runsc process of {id} outlived rfs"
    );
    assert_eq!(runsc_containers(&rfs).len(), 1);
    let gc = rfs.cmd(repo.path()).arg("gc").output().unwrap();
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert_eq!(runsc_containers(&rfs), Vec::<String>::new());
    rfs.assert_no_leftovers();
}

/// Removes a directory the test made on the host.
struct Remove(std::path::PathBuf);
impl Drop for Remove {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// gVisor checks permissions itself, on the owners its file server
/// reports: served with the host's owners, a root-only file or directory
/// of a system directory was a root step's own. The step (uid 0 inside)
/// reads only what the host's unprivileged users may, as under
/// namespaces; world-readable files beside still read.
#[test]
fn a_root_step_under_gvisor_cannot_read_a_root_only_host_file() {
    use std::os::unix::fs::PermissionsExt;
    if gvisor_missing() {
        return;
    }
    let dir = std::path::Path::new("/opt").join(format!("rfs-gvisor-test-{}", uuid_like()));
    std::fs::create_dir_all(dir.join("private")).unwrap();
    let _remove = Remove(dir.clone());
    let mode = |p: &str, m: u32| {
        std::fs::set_permissions(dir.join(p), std::fs::Permissions::from_mode(m)).unwrap()
    };
    std::fs::write(dir.join("secret"), "host-secret\n").unwrap();
    mode("secret", 0o600);
    std::fs::write(dir.join("private/inner"), "private-inner\n").unwrap();
    mode("private/inner", 0o644);
    mode("private", 0o700);
    std::fs::write(dir.join("public"), "host-public\n").unwrap();
    mode("public", 0o644);
    mode(".", 0o755);
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"sandbox(#{{ isolation: "gvisor" }});
            sync_source();
            step("probe", "id -u; cat {d}/secret || echo secret-refused; find {d}/private -mindepth 1 || echo list-refused; cat {d}/private/inner || echo inner-refused; cat {d}/public");"#,
            d = dir.display()
        ),
    );
    out.assert_code(0);
    let probe = lines(&out, "probe");
    assert_eq!(
        probe.first(),
        Some(&"0"),
        "the step is root inside: {probe:?}"
    );
    for refused in ["secret-refused", "list-refused", "inner-refused"] {
        assert!(probe.contains(&refused), "{refused}: {probe:?}");
    }
    assert!(!out.stdout.contains("host-secret"), "{}", out.stdout);
    assert!(!out.stdout.contains("private-inner"), "{}", out.stdout);
    assert!(probe.contains(&"host-public"), "{probe:?}");
    rfs.assert_no_leftovers();
}

/// A step counting the `sleep 3..` processes of the gVisor sandbox.
const COUNT_SLEEPS: &str = r"n=0; for p in /proc/[0-9]*; do case $(tr '\\0' ' ' < $p/cmdline 2>/dev/null) in 'sleep 3'*) n=$((n+1));; esac; done; echo sleeps=$n";

/// A step that times out, and one that ends leaving a background child
/// in its group, leave nothing of their group running (as under
/// namespaces); a process that left the group (`setsid`) keeps running.
#[test]
fn a_step_under_gvisor_that_ends_or_times_out_leaves_nothing_of_its_process_group() {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"sandbox(#{{ isolation: "gvisor" }});
            sync_source();
            let r = step("slow", "sleep 301 & sleep 302", #{{ timeout: 1, allow_failure: true }});
            assert(r.timed_out && !r.ok && r.exit == ());
            step("after-timeout", "{COUNT_SLEEPS}");
            step("bg", "sleep 303 >/dev/null 2>&1 & (setsid sleep 304 >/dev/null 2>&1 &); echo started; sleep 1");
            step("after-end", "{COUNT_SLEEPS}");
            let k = step("killed", "kill -9 $$", #{{ allow_failure: true }});
            assert(!k.ok && k.exit == ());"#
        ),
    );
    out.assert_code(0);
    assert_eq!(lines(&out, "after-timeout"), ["sleeps=0"]);
    assert_eq!(lines(&out, "bg"), ["started"]);
    assert_eq!(
        lines(&out, "after-end"),
        ["sleeps=1"],
        "only the setsid one is left"
    );
    assert!(
        out.stderr.contains("killed by signal 9"),
        "a signal is reported as such (not as exit 137): {}",
        out.stderr
    );
    assert_eq!(runsc_containers(&rfs), Vec::<String>::new());
    rfs.assert_no_leftovers();
}

/// Commands start through rfs's agent inside the sandbox: a step (uid 0
/// without capabilities) can neither read nor write the agent's channel
/// to rfs through `/proc/1/fd`, nor stop or kill the agent; the run goes
/// on as if nothing was tried.
#[test]
fn a_step_under_gvisor_cannot_reach_or_stop_rfs_agent() {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"sandbox(#{ isolation: "gvisor" });
        sync_source();
        step("probe", "id -u; grep -E '^Cap(Prm|Eff|Bnd)' /proc/self/status; tr '\\0' ' ' < /proc/1/cmdline; echo; for f in 0 1; do cat /proc/1/fd/$f </dev/null >/dev/null 2>&1 && echo read-$f || echo no-read-$f; (echo forged > /proc/1/fd/$f) 2>/dev/null && echo wrote-$f || echo no-write-$f; done; kill -STOP 1 2>/dev/null && echo stopped || echo no-stop; kill -KILL 1 2>/dev/null && echo killed || echo no-kill");
        step("after", "echo still-here");"#,
    );
    out.assert_code(0);
    let probe = lines(&out, "probe");
    assert_eq!(probe[0], "0", "{probe:?}");
    for cap in ["CapPrm", "CapEff", "CapBnd"] {
        assert!(
            probe.contains(&format!("{cap}:\t0000000000000000").as_str()),
            "{cap}: {probe:?}"
        );
    }
    assert!(probe[4].contains("rfs-gvisor-agent"), "{probe:?}");
    for no in [
        "no-read-0",
        "no-write-0",
        "no-read-1",
        "no-write-1",
        "no-stop",
        "no-kill",
    ] {
        assert!(probe.contains(&no), "{no}: {probe:?}");
    }
    assert_eq!(lines(&out, "after"), ["still-here"]);
    rfs.assert_no_leftovers();
}

/// Regression: gVisor's sandbox and file-server processes were orphans of
/// the host's PID 1 once `runsc run` returned, and `runsc delete` waited
/// until PID 1 reaped them (1.2 to 1.9 s a teardown where it reaps
/// lazily). They are now children of rfs's keeper, which reaps them, and
/// the keeper ends with the sandbox.
#[test]
fn gvisors_processes_are_reaped_by_rfs_keeper_not_left_to_the_hosts_init() {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (child, out_dir) = rfs.spawn(
        repo.path(),
        r#"sandbox(#{ isolation: "gvisor" });
        step("wait", "sleep 5");"#,
    );
    let id = placed_sandbox_once_started(&out_dir);
    let cmdline = |pid: &str| {
        std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
            .unwrap_or_default()
    };
    let gvisor: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|p| p.bytes().all(|b| b.is_ascii_digit()))
        .filter(|p| {
            let c = cmdline(p);
            (c.starts_with("runsc-sandbox") || c.starts_with("runsc-gofer")) && c.contains(&id)
        })
        .collect();
    assert_eq!(gvisor.len(), 2, "gVisor's sandbox and gofer of {id}");
    for pid in &gvisor {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .unwrap()
            .trim()
            .to_owned();
        let parent = cmdline(&ppid);
        assert!(
            parent.contains("rfs-gvisor-keeper") && parent.contains(&id),
            "{} has parent {ppid} ({parent})",
            cmdline(pid)
        );
    }
    let out = wait_bounded(child, out_dir);
    out.assert_code(0);
    assert!(!keeper_of(&id), "the keeper of {id} outlived its sandbox");
    rfs.assert_no_leftovers();
}

/// Whether a keeper process of sandbox `id` runs.
fn keeper_of(id: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            let c = String::from_utf8_lossy(&c);
            c.contains("rfs-gvisor-keeper") && c.contains(id)
        })
    })
}
