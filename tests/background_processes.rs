//! Background processes with handles (issue #36): `spawn(name, command)`
//! starts a process in the sandbox; `wait_for` a line of its output or a
//! listening port (probed inside the sandbox), `alive()`, `logs()`,
//! `stop()` (its process group ended, verified by a probe in the
//! sandbox). Its output is journaled and bundled like a step's; one left
//! running is stopped at teardown. On every provider.

mod common;
use common::*;

/// A port per provider, so runs of the three providers at the same time
/// on one machine (some share its network) never meet.
fn port(rfs: &Rfs, n: u16) -> u16 {
    let base = match rfs.prov {
        Prov::Local => 18_000,
        Prov::Docker => 28_000,
        Prov::Daytona => 38_000,
    };
    base + n + (std::process::id() % 500) as u16 * 4
}

provider_tests! {
    #[not_under_gvisor = "busybox wget to a server in the same gVisor sandbox fails with EAGAIN on runsc 20221219 (book: gVisor)"]
    fn a_spawned_server_answers_a_step_and_stops_verified(rfs: &Rfs) {
        let repo = Repo::new();
        let p = port(rfs, 1);
        let script = format!(
            r#"
let srv = spawn("web", "mkdir -p www && echo hello-from-web > www/index.html && echo Listening on {p} && exec busybox httpd -f -p 127.0.0.1:{p} -h www");
srv.wait_for(#{{ line: "Listening", timeout: 30 }});
srv.wait_for(#{{ port: {p}, timeout: 30 }});
let r = step("hit", "busybox wget -Y off -q -O - http://127.0.0.1:{p}/index.html");
assert(r.stdout.contains("hello-from-web"), "served: " + r.stdout);
assert(srv.alive(), "alive while serving");
let logs = srv.logs();
assert(logs.contains("Listening on {p}"), "logs: " + logs);
let e = srv.stop();
assert(!srv.alive(), "alive after stop()");
print(`stopped group_gone=${{e.group_gone}}`);
"#
        );
        let out = rfs.run(repo.path(), &script);
        out.assert_code(0);
        assert!(out.stdout.contains("stopped group_gone=true"), "{}", out.stdout);
        let start = out.entries("spawn.start");
        assert_eq!(start.len(), 1);
        assert_eq!(start[0]["name"], "web");
        let ready = out.entries("spawn.ready");
        let on: Vec<&str> = ready.iter().map(|r| r["on"].as_str().unwrap()).collect();
        assert_eq!(on, ["line", "port"]);
        assert_eq!(ready[1]["target"], p.to_string());
        let end = out.entries("spawn.end");
        assert_eq!(end.len(), 1, "{end:?}");
        assert_eq!(end[0]["by"], "stop()");
        assert_eq!(end[0]["group_gone"], true);
        assert!(end[0]["group"].as_i64().is_some());
        let log = end[0]["stdout_log"]["path"].as_str().unwrap();
        assert_eq!(log, "steps/001-spawn-web.stdout.log");
        let text = std::fs::read_to_string(out.out_dir.join(log)).unwrap();
        assert_eq!(text, format!("Listening on {p}\n"), "the group line is rfs's, never the output");
        // The spawn's facts come before the teardown's.
        let kinds = out.kinds();
        let end_at = kinds.iter().position(|k| k == "spawn.end").unwrap();
        let cleanup_at = kinds.iter().position(|k| k.starts_with("cleanup.")).unwrap();
        assert!(end_at < cleanup_at, "{kinds:?}");
        let ev = out.evidence();
        assert!(ev.contains("## Background processes"), "{ev}");
        assert!(ev.contains("stopped by stop()") && ev.contains("verified gone"), "{ev}");
        let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
        assert!(html.contains("Background processes"));
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn a_process_left_running_is_stopped_at_teardown(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
let srv = spawn("loop", "echo started; while true; do sleep 1; done");
srv.wait_for(#{ line: "started" });
print(`alive=${srv.alive()}`);
"#,
        );
        out.assert_code(0);
        assert!(out.stdout.contains("alive=true"), "{}", out.stdout);
        let end = out.entries("spawn.end");
        assert_eq!(end.len(), 1, "{end:?}");
        assert_eq!(end[0]["by"], "teardown");
        assert_eq!(end[0]["group_gone"], true);
        assert!(out.evidence().contains("stopped at teardown"), "{}", out.evidence());
        assert!(!out.entries("cleanup.verified").is_empty());
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn a_wait_for_timeout_fails_with_the_tail_of_its_output(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
let srv = spawn("slow", "echo warming up; echo still-warming >&2; sleep 600");
srv.wait_for(#{ line: "Listening", timeout: 1 });
step("never", "echo ran");
"#,
        );
        out.assert_code(1);
        for needle in ["wait_for a line containing \"Listening\"", "timed out after 1 s", "warming up", "still-warming"] {
            assert!(out.stderr.contains(needle), "{needle:?} not in:\n{}", out.stderr);
        }
        // The script's span: the failing call's line.
        assert!(out.stderr.contains("srv.wait_for(#{ line: \"Listening\", timeout: 1 })"), "{}", out.stderr);
        let failed = out.entries("spawn.wait_failed");
        assert_eq!(failed.len(), 1);
        assert!(failed[0]["output_tail"]["stderr"].as_str().unwrap().contains("still-warming"));
        assert!(out.entries("step.start").is_empty());
        assert_eq!(out.entries("spawn.end")[0]["by"], "teardown");
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn a_process_that_ends_before_its_port_listens_fails_the_wait(rfs: &Rfs) {
        let repo = Repo::new();
        let p = port(rfs, 2);
        let out = rfs.run(
            repo.path(),
            &format!(
                r#"
let srv = spawn("crash", "echo boom >&2; exit 3");
srv.wait_for(#{{ port: {p}, timeout: 20 }});
"#
            ),
        );
        out.assert_code(1);
        assert!(out.stderr.contains("it ended before that"), "{}", out.stderr);
        assert!(out.stderr.contains("boom"), "{}", out.stderr);
        let end = out.entries("spawn.end");
        assert_eq!(end[0]["by"], "itself");
        assert_eq!(end[0]["exit"], 3);
    }

    fn an_interrupted_run_ends_its_background_process_verified(rfs: &Rfs) {
        let repo = Repo::new();
        let (child, out_dir) = rfs.spawn(
            repo.path(),
            r#"
let srv = spawn("loop", "echo up; while true; do sleep 1; done");
srv.wait_for(#{ line: "up" });
step("wait", "sleep 600");
"#,
        );
        wait_for_journal(&out_dir, "step.start");
        sigint(&child);
        let out = wait_bounded(child, out_dir);
        out.assert_code(130);
        let end = out.entries("spawn.end");
        assert_eq!(end.len(), 1, "{end:?}");
        assert_eq!(end[0]["by"], "interrupt");
        assert_eq!(end[0]["group_gone"], true, "{end:?}");
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn a_spawn_cwd_outside_the_root_is_refused_like_a_step(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"spawn("x", "echo ran", #{ cwd: "../.." });"#,
        );
        out.assert_code(3);
        assert!(out.stderr.contains("spawn `x` refused"), "{}", out.stderr);
        assert!(out.entries("spawn.start").is_empty());
        let out = rfs.run(
            repo.path(),
            r#"step("mk", "mkdir -p d && ln -s / d/up"); spawn("x", "echo ran", #{ cwd: "d/up" });"#,
        );
        out.assert_code(3);
        assert!(out.stderr.contains("outside the synced root"), "{}", out.stderr);
        assert_eq!(out.entries("spawn.end")[0]["by"], "refused");
    }
}

/// A real server program as the service (local: the host's python3 is
/// in the sandbox's read-only system folders): its own access log is the
/// process's output, journaled and bundled.
#[test]
fn python_http_server_is_spawned_waited_for_hit_and_stopped_on_local() {
    if !std::path::Path::new("/usr/bin/python3").exists() {
        eprintln!("skipping: no /usr/bin/python3 on this machine");
        return;
    }
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("site/index.html", "served by python\n");
    repo.commit("site");
    let p = port(&rfs, 3);
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"
let srv = spawn("http", "exec /usr/bin/python3 -u -m http.server {p} --bind 127.0.0.1", #{{ cwd: "site" }});
srv.wait_for(#{{ port: {p}, timeout: 30 }});
let page = step("get", "busybox wget -Y off -q -O - http://127.0.0.1:{p}/index.html");
assert(page.stdout == "served by python\n", page.stdout);
srv.wait_for(#{{ line: "GET /index.html", timeout: 10 }});
let end = srv.stop();
assert(end.group_gone, "group gone");
"#
        ),
    );
    out.assert_code(0);
    let end = &out.entries("spawn.end")[0];
    assert_eq!(end["by"], "stop()");
    let log = end["stderr_log"]["path"].as_str().unwrap();
    let text = std::fs::read_to_string(out.out_dir.join(log)).unwrap();
    assert!(text.contains("\"GET /index.html HTTP/1.1\" 200"), "{text}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
}

// ---- services (docker): a container sharing the sandbox's network ----

/// The run id of a bundle (its first journal line).
fn run_id_of(out: &RunOut) -> String {
    out.journal()[0]["payload"]["run_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// Containers of run `run_id` the docker engine still knows (running or
/// not), by the label every sandbox and service carries.
fn containers_of_run(run_id: &str) -> Vec<String> {
    containers_of_run_where(run_id, true)
}

/// [`containers_of_run`], only the running ones unless `all`.
fn containers_of_run_where(run_id: &str, all: bool) -> Vec<String> {
    let out = std::process::Command::new("docker")
        .args(["ps", "-q", "--no-trunc", "--filter"])
        .arg(format!("label=relayflows/run-id={run_id}"))
        .args(all.then_some("-a"))
        .output()
        .expect("docker runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn docker_rfs() -> Option<Rfs> {
    (!docker_missing()).then(|| Rfs::new(Prov::Docker))
}

fn test_image_id() -> String {
    let out = std::process::Command::new("docker")
        .args(["image", "inspect", "--format", "{{.Id}}", DOCKER_TEST_IMAGE])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_proof_reaches_a_service_on_the_sandbox_loopback_and_teardown_removes_it() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"
let web = service("web", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: ["httpd", "-f", "-p", "127.0.0.1:8080", "-h", "/etc"], ready: #{{ port: 8080, timeout: 30 }} }});
let r = step("hit", "busybox wget -Y off -q -O - http://127.0.0.1:8080/passwd");
assert(r.stdout.contains("rfs:x:1000"), "served: " + r.stdout);
assert(web.alive(), "alive while serving");
let echo = service("echo", #{{ image: "{DOCKER_TEST_IMAGE}", env: #{{ GREETING: "hello-service" }}, cmd: "echo $GREETING; exec sleep 600", ready: #{{ line: "hello-service", timeout: 30 }} }});
assert(echo.logs().contains("hello-service"), echo.logs());
let e = echo.stop();
assert(e.gone, "gone after stop()");
assert(!echo.alive(), "alive after stop()");
"#
        ),
    );
    out.assert_code(0);
    let sandbox = out.sandbox_id();
    let start = out.entries("service.start");
    assert_eq!(start.len(), 2, "{start:?}");
    assert_eq!(start[0]["name"], "web");
    assert_eq!(
        start[0]["image_pin"]["id"],
        test_image_id(),
        "the journal names the image id"
    );
    assert_eq!(start[0]["network"], format!("container:{sandbox}"));
    let ready = out.entries("service.ready");
    assert_eq!(ready[0]["on"], "port");
    assert_eq!(ready[0]["target"], "8080");
    assert_eq!(ready[1]["on"], "line");
    let end = out.entries("service.end");
    let by: Vec<(&str, bool)> = end
        .iter()
        .map(|e| (e["by"].as_str().unwrap(), e["gone"].as_bool().unwrap()))
        .collect();
    assert_eq!(by, [("stop()", true), ("teardown", true)], "{end:?}");
    let log = end[0]["stdout_log"]["path"].as_str().unwrap();
    assert!(
        log.starts_with("steps/") && log.ends_with("-service-echo.stdout.log"),
        "{log}"
    );
    let text = std::fs::read_to_string(out.out_dir.join(log)).unwrap();
    assert_eq!(text, "hello-service\n");
    let kinds = out.kinds();
    let last_end = kinds.iter().rposition(|k| k == "service.end").unwrap();
    let cleanup = kinds
        .iter()
        .position(|k| k.starts_with("cleanup."))
        .unwrap();
    assert!(
        last_end < cleanup,
        "services go before the sandbox: {kinds:?}"
    );
    assert_eq!(containers_of_run(&run_id_of(&out)), Vec::<String>::new());
    let ev = out.evidence();
    assert!(
        ev.contains("## Services") && ev.contains(&test_image_id()),
        "{ev}"
    );
    assert!(ev.contains("verified gone"), "{ev}");
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    assert!(html.contains("<h2>Services</h2>"));
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
}

#[test]
fn a_service_that_never_becomes_ready_fails_naming_it_and_the_timeout() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"
service("db", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: "echo starting-db; exec sleep 600", ready: #{{ port: 5432, timeout: 1 }} }});
step("never", "echo ran");
"#
        ),
    );
    out.assert_code(1);
    for needle in [
        "service `db` was not ready within its timeout of 1 s",
        "port 5432",
        "starting-db",
        "service(\"db\"",
    ] {
        assert!(
            out.stderr.contains(needle),
            "{needle:?} not in:\n{}",
            out.stderr
        );
    }
    assert_eq!(out.entries("service.wait_failed").len(), 1);
    let end = out.entries("service.end");
    assert_eq!(end[0]["by"], "not ready");
    assert_eq!(end[0]["gone"], true);
    assert!(out.entries("step.start").is_empty());
    assert_eq!(containers_of_run(&run_id_of(&out)), Vec::<String>::new());
}

/// A service shares the sandbox's network namespace, so it has exactly
/// its network: under the default (filtered: rfs's proxy is the only way
/// out) and with `network: false`, its loopback and no route.
#[test]
fn a_service_has_the_sandboxs_network_and_no_route_more() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let ifaces = "echo ifaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' '); echo routes: $(tail -n +2 /proc/net/route | wc -l)";
    for policy in ["", "sandbox(#{ network: false });"] {
        let out = rfs.run(
            repo.path(),
            &format!(
                r#"
{policy}
let s = service("net", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: "{ifaces}; exec sleep 600", ready: #{{ line: "routes:", timeout: 30 }} }});
let mine = step("mine", "{ifaces}");
print("service: " + s.logs());
print("sandbox: " + mine.stdout);
"#
            ),
        );
        out.assert_code(0);
        let prints: Vec<String> = out
            .entries("print")
            .iter()
            .map(|p| p["text"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(
            prints[0], "service: ifaces: lo\nroutes: 0\n",
            "{policy}: {prints:?}"
        );
        assert_eq!(
            prints[1], "sandbox: ifaces: lo\nroutes: 0\n",
            "{policy}: {prints:?}"
        );
    }
}

/// Bug: a service container had none of the sandbox's resource limits, so
/// a script could run unbounded processes and memory in it past the
/// person's `--max-pids` (and the script's own `memory`). It now has the
/// sandbox's.
#[test]
fn a_service_is_bounded_by_the_sandboxs_resource_limits() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let read = "echo pids=$(cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max) mem=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)";
    let out = rfs.run_with(
        repo.path(),
        &format!(
            r#"
sandbox(#{{ memory: "64M" }});
let s = service("bounded", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: "{read}; exec sleep 600", ready: #{{ line: "pids=", timeout: 30 }} }});
print(s.logs());
"#
        ),
        &["--max-pids", "32"],
    );
    out.assert_code(0);
    let printed = out.entries("print")[0]["text"].as_str().unwrap().to_owned();
    assert_eq!(printed, format!("pids=32 mem={}\n", 64u64 << 20));
}

/// An interrupted run removes its service (verified) before the sandbox.
#[test]
fn an_interrupted_run_removes_its_service_verified() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let (child, out_dir) = rfs.spawn(
        repo.path(),
        &format!(
            r#"
service("idle", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: "echo up; exec sleep 600", ready: #{{ line: "up", timeout: 30 }} }});
step("wait", "sleep 600");
"#
        ),
    );
    wait_for_journal(&out_dir, "step.start");
    sigint(&child);
    let out = wait_bounded(child, out_dir);
    out.assert_code(130);
    let end = out.entries("service.end");
    assert_eq!(end.len(), 1, "{end:?}");
    assert_eq!(end[0]["by"], "interrupt");
    assert_eq!(end[0]["gone"], true);
    assert_eq!(containers_of_run(&run_id_of(&out)), Vec::<String>::new());
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
}

/// A run killed while its service runs leaves the service's container to
/// `rfs gc`, which finds it by the labels it shares with the sandbox.
#[test]
fn a_killed_runs_service_is_found_and_removed_by_gc() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let (mut child, out_dir) = rfs.spawn(
        repo.path(),
        &format!(
            r#"
service("idle", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: "exec sleep 600" }});
step("wait", "sleep 600");
"#
        ),
    );
    wait_for_journal(&out_dir, "step.start");
    child.kill().unwrap();
    child.wait().unwrap();
    let run_id = run_id_in(&out_dir);
    assert_eq!(
        containers_of_run(&run_id).len(),
        2,
        "the sandbox and its service"
    );
    gc_removes_the_runs_containers(&rfs, &run_id);
}

/// Providers without service containers refuse `service()` before
/// anything runs, at the call's line.
fn service_is_refused_before_anything_runs(rfs: &Rfs) {
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"
step("first", "echo ran");
let db = service("db", #{ image: "postgres:16" });
"#,
    );
    out.assert_code(3);
    let said = format!(
        "provider `{}` cannot start service containers",
        rfs.prov.name()
    );
    assert!(out.stderr.contains(&said), "{}", out.stderr);
    assert!(
        out.stderr.contains("service(\"db\""),
        "the call's span: {}",
        out.stderr
    );
    assert!(out.entries("step.start").is_empty(), "nothing ran");
    assert!(out.entries("placement").is_empty(), "no sandbox");
}

#[test]
fn local_refuses_service_before_anything_runs() {
    service_is_refused_before_anything_runs(&Rfs::new(Prov::Local));
}

#[test]
fn daytona_refuses_service_before_anything_runs() {
    let Some(rfs) = Rfs::daytona() else { return };
    service_is_refused_before_anything_runs(&rfs);
    rfs.finish();
}

/// A service's container lived on after its sandbox's --max-lifetime when
/// rfs was killed (only `rfs gc` ended it): it is in the sandbox's PID
/// namespace now, so when the sandbox's lifetime ends the service's
/// processes end with it.
#[test]
fn a_killed_runs_service_does_not_outlive_its_sandboxs_lifetime() {
    let Some(rfs) = docker_rfs() else { return };
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare(&format!(
        r#"
service("idle", #{{ image: "{DOCKER_TEST_IMAGE}", cmd: "echo up; exec sleep 600", ready: #{{ line: "up", timeout: 30 }} }});
step("wait", "sleep 600");
"#
    ));
    let child = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(&script)
        .args(["--max-lifetime", "8", "--out"])
        .arg(&out_dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_journal(&out_dir, "step.start");
    // Stopped, not killed: rfs can end nothing (as if it were dead), and
    // no other test's `rfs gc` takes its containers (their owner lives).
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    // Killed however the test ends (a stopped rfs would stay forever).
    struct KillOnDrop(std::process::Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let child = KillOnDrop(child);
    let run_id = run_id_in(&out_dir);
    let containers = |all: bool| containers_of_run_where(&run_id, all).len();
    assert_eq!(containers(false), 2, "the sandbox and its service run");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while containers(false) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let left_running = containers(false);
    // The service's container is still there (nobody removed it), ended.
    let service_left = containers(true);
    drop(child);
    assert_eq!(
        left_running, 0,
        "a container of the run outlived its 8 s lifetime"
    );
    assert_eq!(service_left, 1, "the service's container, stopped, for gc");
    gc_removes_the_runs_containers(&rfs, &run_id);
}

/// The run id of the (killed) run writing into `out_dir`, from its
/// journal's first fact.
fn run_id_in(out_dir: &std::path::Path) -> String {
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    let first: serde_json::Value = serde_json::from_str(journal.lines().next().unwrap()).unwrap();
    first["payload"]["run_id"].as_str().unwrap().to_owned()
}

/// `rfs gc --provider docker` succeeds and leaves no container of `run_id`.
fn gc_removes_the_runs_containers(rfs: &Rfs, run_id: &str) {
    let gc = rfs
        .cmd(rfs.state.path())
        .args(["gc", "--provider", "docker"])
        .output()
        .unwrap();
    assert!(
        gc.status.success(),
        "{}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert_eq!(containers_of_run(run_id), Vec::<String>::new());
}
