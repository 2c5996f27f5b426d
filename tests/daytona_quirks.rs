//! Daytona's documented quirks and injected faults, against the
//! `rfs-daytona-sim` server. After each test the server's own inventory
//! holds no rfs sandbox and the API key appears in no output.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use rfs::destroy_verified;
use rfs::provider::daytona::config::{Config, Credential, Secret, CREATE_TIMEOUT};
use rfs::provider::daytona::DaytonaProvider;
use rfs::provider::{labels, CreateSpec, Labels, Provider};
use rfs_daytona_sim::{ListShape, Sim, SimOptions};

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn config(sim: &Sim) -> Config {
    Config::new(
        Credential::ApiKey(Secret::new(sim.api_key())),
        sim.api_url(),
    )
}

fn provider(sim: &Sim, create_timeout: Duration) -> Arc<DaytonaProvider> {
    Arc::new(
        DaytonaProvider::new(Config {
            create_timeout,
            ..config(sim)
        })
        .unwrap(),
    )
}

/// A server started with `opts`, a provider for it and a runtime; `None`
/// (said in one line) when this machine cannot run the server, a failure
/// under `RFS_REQUIRE_DAYTONA=1`.
fn served(
    opts: SimOptions,
    create_timeout: Duration,
) -> Option<(Sim, Arc<DaytonaProvider>, tokio::runtime::Runtime)> {
    let sim = start_sim(opts)?;
    let p = provider(&sim, create_timeout);
    Some((sim, p, rt()))
}

/// Labels of a sandbox owned by this test process (so gc keeps it).
fn spec(run_id: &str) -> CreateSpec {
    let mut l = Labels::new();
    l.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
    l.insert(labels::RUN_ID.into(), run_id.into());
    l.insert(labels::OWNER_HOST.into(), "another-host.invalid".into());
    l.insert(labels::STARTED_AT.into(), "2020-01-01T00:00:00.000Z".into());
    CreateSpec {
        run_id: run_id.into(),
        labels: l,
        max_lifetime: Duration::from_secs(600),
        ..Default::default()
    }
}

fn rfs_sandboxes(sim: &Sim) -> Vec<String> {
    sim.inventory()
        .into_iter()
        .filter(|s| s.labels.get(labels::CREATED_BY).map(String::as_str) == Some("rfs"))
        .map(|s| s.id)
        .collect()
}

#[track_caller]
fn assert_clean(sim: &Sim, texts: &[&str]) {
    assert_eq!(
        rfs_sandboxes(sim),
        Vec::<String>::new(),
        "sandboxes left behind"
    );
    for t in texts {
        assert!(!t.contains(&sim.api_key()), "the API key leaked: {t}");
    }
}

fn count(sim: &Sim, method: &str, path: &str) -> usize {
    sim.requests()
        .iter()
        .filter(|r| r.method == method && r.path == path)
        .count()
}

#[test]
fn missing_api_key_is_refused_before_anything_runs() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare("print(sandbox().id);\n");
    let out = rfs
        .cmd(repo.path())
        .env_remove("DAYTONA_API_KEY")
        .args(["run"])
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(3);
    assert!(
        out.stderr.contains("DAYTONA_API_KEY is not set"),
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("provider.unavailable").len(), 1);
    assert!(
        rfs.sim().requests().is_empty(),
        "rfs called the API without a key"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn a_refused_api_key_stops_the_run_at_preflight_and_is_never_echoed() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let wrong = "dtn_wrongkey0123456789abcdef";
    let (script, out_dir) = rfs.prepare("print(sandbox().id);\n");
    let out = rfs
        .cmd(repo.path())
        .env("DAYTONA_API_KEY", wrong)
        .args(["run"])
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(3);
    assert!(
        out.stderr.contains("refused the credential (HTTP 401)"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(wrong) && !out.stdout.contains(wrong));
    let journal = std::fs::read_to_string(out.out_dir.join("journal.jsonl")).unwrap();
    assert!(!journal.contains(wrong));
    assert!(rfs
        .sim()
        .requests()
        .iter()
        .all(|r| !(r.method == "POST" && r.path == "/sandbox")));
    rfs.assert_no_leftovers();
}

#[test]
fn help_never_shows_the_api_key() {
    let Some(rfs) = Rfs::daytona() else { return };
    for args in [
        &["--help"][..],
        &["run", "--help"][..],
        &["gc", "--help"][..],
    ] {
        let out = rfs.cmd(rfs.state.path()).args(args).output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(!text.contains(&rfs.sim().api_key()), "{text}");
    }
    let run = rfs
        .cmd(rfs.state.path())
        .args(["run", "--help"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&run.stdout).contains("--snapshot"));
}

#[test]
fn unknown_snapshot_is_a_refusal_naming_it() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "print(sandbox(#{ snapshot: \"no-such-snap\" }).id);\n",
    );
    out.assert_code(3);
    assert!(
        out.stderr
            .contains("snapshot `no-such-snap` is not known to the Daytona server"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("Snapshot no-such-snap not found"),
        "{}",
        out.stderr
    );
    // The flag beats the environment; a known snapshot from the flag works.
    let (script, out_dir) = rfs.prepare("print(sandbox().id);\n");
    let out = rfs
        .cmd(repo.path())
        .env("RELAYFLOWS_SANDBOX_SNAPSHOT", "env-snap-unknown")
        .args(["run", "--snapshot", "daytona-small"])
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    rfs.console(&out.stderr);
    out.assert_code(0);
    let out = rfs.run_with(repo.path(), "print(sandbox().id);\n", &[]);
    out.assert_code(0);
    rfs.assert_no_leftovers();
}

#[test]
fn teardown_is_verified_through_list_lag_and_reappearance_with_one_delete() {
    let Some((sim, p, rt)) = served(
        SimOptions {
            delete_lag: Duration::from_millis(600),
            list_lag: Duration::from_millis(400),
            reappear_after_delete: true,
            ..SimOptions::default()
        },
        CREATE_TIMEOUT,
    ) else {
        return;
    };
    let info = rt.block_on(p.create(&spec("lag-1"))).unwrap();
    assert_eq!(info.state, "started");
    assert_eq!(info.home, "/home/daytona");
    let proof = rt
        .block_on(destroy_verified(
            p.as_ref(),
            &info.id,
            Duration::from_secs(30),
        ))
        .unwrap();
    assert!(
        proof.polls > 1,
        "gone on the first poll despite the lag: {proof:?}"
    );
    assert_eq!(count(&sim, "DELETE", &format!("/sandbox/{}", info.id)), 1);
    assert_clean(&sim, &[]);
}

#[test]
fn both_list_shapes_are_read_and_gc_keeps_another_hosts_sandbox_unless_older_than() {
    for shape in [ListShape::BareArray, ListShape::Paginated] {
        let Some((sim, p, rt)) = served(
            SimOptions {
                list_shape: shape,
                ..SimOptions::default()
            },
            CREATE_TIMEOUT,
        ) else {
            return;
        };
        let a = rt.block_on(p.create(&spec("gc-a"))).unwrap();
        let b = rt.block_on(p.create(&spec("gc-b"))).unwrap();
        let mut want = vec![a.id.clone(), b.id.clone()];
        want.sort();
        // The list is eventually consistent: both show up within a bound.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        loop {
            let listed = rt.block_on(p.list(&labels::rfs_selector())).unwrap();
            let mut ids: Vec<_> = listed.iter().map(|s| s.id.clone()).collect();
            ids.sort();
            if ids == want {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{shape:?}: listed {ids:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let gc = |extra: &[&str]| {
            let out = std::process::Command::new(rfs_bin())
                .args(["gc", "--provider", "daytona"])
                .args(extra)
                .env("DAYTONA_API_URL", sim.api_url())
                .env("DAYTONA_API_KEY", sim.api_key())
                .output()
                .unwrap();
            (
                out.status.code(),
                format!(
                    "{}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            )
        };
        let (code, text) = gc(&[]);
        assert_eq!(code, Some(0), "{text}");
        assert!(
            text.contains("owned by host another-host.invalid; not destroyed without --older-than"),
            "{text}"
        );
        assert_eq!(rfs_sandboxes(&sim).len(), 2);
        let (code, text) = gc(&["--older-than", "1h"]);
        assert_eq!(code, Some(0), "{text}");
        assert_eq!(text.matches("destroyed").count(), 2, "{text}");
        assert_clean(&sim, &[&text]);
    }
}

#[test]
fn idempotent_calls_retry_5xx_and_429_honouring_retry_after_but_create_never_retries() {
    let Some((sim, p, rt)) = served(SimOptions::default(), CREATE_TIMEOUT) else {
        return;
    };
    sim.faults().fail_next("GET", "/sandbox", 2, 503, None);
    rt.block_on(p.list(&labels::rfs_selector())).unwrap();
    assert_eq!(count(&sim, "GET", "/sandbox"), 3);
    sim.faults().rate_limit_next("GET", "/sandbox", 1, 1);
    rt.block_on(p.list(&labels::rfs_selector())).unwrap();
    let gets: Vec<_> = sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "GET" && r.path == "/sandbox")
        .collect();
    assert_eq!(gets.len(), 5);
    assert_eq!(gets[3].status, 429);
    assert!(
        gets[4].at - gets[3].at >= Duration::from_secs(1),
        "Retry-After not honoured"
    );
    // A create is never resent; the ambiguous 503 is resolved by name.
    sim.faults().fail_next("POST", "/sandbox", 1, 503, None);
    let e = rt
        .block_on(p.create(&spec("no-retry")))
        .unwrap_err()
        .to_string();
    assert_eq!(count(&sim, "POST", "/sandbox"), 1);
    assert!(
        e.contains("create sandbox failed: HTTP 503 Service Unavailable (empty body)"),
        "{e}"
    );
    assert!(e.contains("none leaked"), "{e}");
    assert_clean(&sim, &[&e]);
}

#[test]
fn http_errors_name_operation_sandbox_status_and_message_and_never_the_key() {
    let Some((sim, p, rt)) = served(SimOptions::default(), CREATE_TIMEOUT) else {
        return;
    };
    let info = rt.block_on(p.create(&spec("errors"))).unwrap();
    let body = format!(
        r#"{{"statusCode":400,"message":"refused for token {}"}}"#,
        sim.api_key()
    );
    sim.faults().fail_next(
        "DELETE",
        &format!("/sandbox/{}", info.id),
        1,
        400,
        Some(body),
    );
    let e = rt.block_on(p.destroy(&info.id)).unwrap_err().to_string();
    assert!(
        e.contains(&format!("delete sandbox (sandbox {}) failed: HTTP 400 Bad Request: refused for token [REDACTED]", info.id)),
        "{e}"
    );
    sim.faults()
        .fail_next("GET", &format!("/sandbox/{}", info.id), 1, 500, None);
    sim.faults()
        .fail_next("GET", &format!("/sandbox/{}", info.id), 10, 500, None);
    let e2 = rt.block_on(p.get(&info.id)).unwrap_err().to_string();
    assert!(
        e2.contains("HTTP 500 Internal Server Error (empty body) after 5 attempts"),
        "{e2}"
    );
    sim.faults().clear();
    rt.block_on(destroy_verified(
        p.as_ref(),
        &info.id,
        Duration::from_secs(30),
    ))
    .unwrap();
    assert_clean(&sim, &[&e, &e2]);
}

#[test]
fn a_create_that_times_out_but_succeeds_is_adopted_not_duplicated() {
    let Some((sim, p, rt)) = served(SimOptions::default(), Duration::from_secs(1)) else {
        return;
    };
    sim.faults().create_succeeds_late(Duration::from_secs(3));
    let info = rt.block_on(p.create(&spec("late-1"))).unwrap();
    // One sandbox exists: the create was not resent but looked up and
    // adopted. (The server does not record a request whose client hung up,
    // so the request log cannot show the single POST here.)
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(rfs_sandboxes(&sim), vec![info.id.clone()]);
    assert_eq!(info.state, "started");
    rt.block_on(destroy_verified(
        p.as_ref(),
        &info.id,
        Duration::from_secs(30),
    ))
    .unwrap();
    // A dropped connection on create leaves nothing behind either.
    sim.faults().drop_next("POST", "/sandbox", 1);
    let e = rt
        .block_on(p.create(&spec("dropped")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("create sandbox failed"), "{e}");
    assert_clean(&sim, &[&e]);
}

#[test]
fn an_abandoned_sandbox_stops_and_deletes_itself() {
    let Some((sim, p, rt)) = served(
        SimOptions {
            auto_stop_tick: Duration::from_millis(40),
            ..SimOptions::default()
        },
        CREATE_TIMEOUT,
    ) else {
        return;
    };
    let info = rt.block_on(p.create(&spec("abandoned"))).unwrap();
    // rfs dies: its keep-alive stops with it.
    drop(p);
    drop(rt);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !rfs_sandboxes(&sim).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "sandbox {} was not auto-stopped and auto-deleted: {:?}",
            info.id,
            sim.inventory()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_clean(&sim, &[]);
}

/// A step whose stdout and stderr interleave over ~1 s; the script itself
/// checks that each stream arrived whole and apart.
const TALKING_STEP: &str = r#"
let r = step("talk", "for i in 1 2 3; do echo out$i; echo err$i >&2; sleep 0.3; done");
if r.stdout != "out1\nout2\nout3\n" { throw "stdout was: " + r.stdout; }
if r.stderr != "err1\nerr2\nerr3\n" { throw "stderr was: " + r.stderr; }
"#;

/// The environment of a run whose steps each use a session of their own
/// (the toolbox quirks of per-command sessions, which the step agent
/// does not meet).
const NO_AGENT: &[(&str, &str)] = &[("RFS_DAYTONA_STEP_AGENT", "off")];

/// Per session command (in order of first request): the queries of its
/// log requests and the number of its status reads.
fn per_command(sim: &Sim) -> Vec<(Vec<String>, usize)> {
    let mut cmds: Vec<(String, Vec<String>, usize)> = vec![];
    for r in sim.requests() {
        let (cmd_path, is_logs) = match r.path.strip_suffix("/logs") {
            Some(p) => (p.to_owned(), true),
            None => (r.path.clone(), false),
        };
        if !r
            .route
            .starts_with("/toolbox/{}/process/session/{}/command/{}")
            || r.path.ends_with("/input")
        {
            continue;
        }
        let i = match cmds.iter().position(|c| c.0 == cmd_path) {
            Some(i) => i,
            None => {
                cmds.push((cmd_path, vec![], 0));
                cmds.len() - 1
            }
        };
        if is_logs {
            cmds[i].1.push(r.query);
        } else {
            cmds[i].2 += 1;
        }
    }
    cmds.into_iter().map(|(_, q, n)| (q, n)).collect()
}

#[test]
fn step_output_is_followed_once_not_refetched_every_poll() {
    // A session per command: one follow stream each; its exit code comes
    // in that stream (no status read).
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run_with_env(repo.path(), TALKING_STEP, &[], NO_AGENT);
    out.assert_code(0);
    let cmds = per_command(rfs.sim());
    assert!(!cmds.is_empty());
    for (logs, status_reads) in &cmds {
        assert_eq!(logs, &["follow=true"], "{cmds:?}");
        assert_eq!(*status_reads, 0, "{cmds:?}");
    }
    rfs.finish();
}

/// The step agent: three steps are three inputs to one command whose log
/// is followed once; no session is created and no status read per step
/// (the exit code comes in the stream), and stdout and stderr stay apart.
#[test]
fn steps_go_to_one_agent_whose_log_is_followed_once() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let script = format!("{TALKING_STEP}\nstep(\"b\", \"exit 3\", #{{ allow_failure: true }});\nstep(\"c\", \"true\");\n");
    let out = rfs.run(repo.path(), &script);
    out.assert_code(0);
    let ends = out.entries("step.end");
    assert_eq!(ends[1]["exit"], 3);
    let reqs = rfs.sim().requests();
    let count =
        |f: &dyn Fn(&rfs_daytona_sim::RequestRecord) -> bool| reqs.iter().filter(|r| f(r)).count();
    assert_eq!(
        count(&|r| r.method == "POST" && r.route == "/toolbox/{}/process/session"),
        1,
        "one agent session"
    );
    assert_eq!(
        count(&|r| r.route == "/toolbox/{}/process/session/{}/exec"),
        1,
        "one command: the agent"
    );
    // Each step, and each command of the source sync, is one input.
    assert!(count(&|r| r.path.ends_with("/input")) >= 3);
    let cmds = per_command(rfs.sim());
    assert_eq!(cmds, vec![(vec!["follow=true".to_owned()], 0)], "{cmds:?}");
    rfs.finish();
}

#[test]
fn a_server_that_cannot_follow_is_polled_with_streams_still_apart() {
    let Some(rfs) = Rfs::daytona() else { return };
    rfs.sim().faults().refuse_log_follow();
    let repo = Repo::new();
    let out = rfs.run(repo.path(), TALKING_STEP);
    out.assert_code(0);
    let cmds = per_command(rfs.sim());
    for (logs, _) in &cmds {
        assert_eq!(logs[0], "follow=true", "{cmds:?}");
        assert!(logs[1..].iter().all(|q| q.is_empty()), "{cmds:?}");
    }
    // The talking step (about 1 s) was polled several times.
    assert!(cmds.iter().any(|(logs, _)| logs.len() > 3), "{cmds:?}");
    rfs.finish();
}

#[test]
fn the_source_archive_goes_to_daytona_gzipd_and_verified() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    repo.write("big.txt", &"the same line again\n".repeat(5000));
    repo.commit("big");
    let out = rfs.run(repo.path(), "sync_source();");
    out.assert_code(0);
    let v = &out.entries("source.verify")[0];
    assert_eq!(v["compression"], "gzip", "{v}");
    assert_eq!(v["content_equal"], true, "{v}");
    assert!(
        v["wire_bytes"].as_u64().unwrap() * 10 < v["archive_bytes"].as_u64().unwrap(),
        "{v}"
    );
    rfs.finish();
}

#[test]
fn a_delete_whose_answer_is_lost_is_retried_once_and_its_409_accepted() {
    let Some((sim, p, rt)) = served(
        SimOptions {
            delete_lag: Duration::from_millis(800),
            ..SimOptions::default()
        },
        CREATE_TIMEOUT,
    ) else {
        return;
    };
    let info = rt.block_on(p.create(&spec("lost-delete"))).unwrap();
    sim.faults().drop_response_next("DELETE", "/sandbox/", 1);
    rt.block_on(destroy_verified(
        p.as_ref(),
        &info.id,
        Duration::from_secs(30),
    ))
    .unwrap();
    let deletes: Vec<u16> = sim
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.path == format!("/sandbox/{}", info.id))
        .map(|r| r.status)
        .collect();
    // The first was carried out but unanswered; the retry meets the
    // teardown in progress (409), which rfs takes as its own delete.
    assert_eq!(deletes, [0, 409]);
    assert_clean(&sim, &[]);
}

#[test]
fn keep_leaves_the_sandbox_running_and_gc_on_this_host_removes_it() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        "step(\"mark\", \"echo kept > kept.txt\");\n",
        &["--keep"],
    );
    out.assert_code(0);
    let id = out.sandbox_id();
    assert_eq!(out.entries("cleanup.kept")[0]["sandbox_id"], id.as_str());
    assert!(out.entries("cleanup.verified").is_empty());
    let live: Vec<_> = rfs
        .sim()
        .inventory()
        .into_iter()
        .filter(|s| s.id == id)
        .map(|s| s.state)
        .collect();
    assert_eq!(live, ["started"]);
    // The owner (this host's rfs) is gone: gc destroys it, verified.
    let gc = rfs
        .cmd(rfs.state.path())
        .args(["gc", "--provider", "daytona"])
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&gc.stdout),
        String::from_utf8_lossy(&gc.stderr)
    );
    rfs.console(&text);
    assert_eq!(gc.status.code(), Some(0), "{text}");
    assert!(text.contains(&id), "{text}");
    rfs.finish();
}

/// Gap 1: without the server (here: no `unshare` on PATH) the daytona
/// tests skip with one line; with `RFS_REQUIRE_DAYTONA=1` they fail naming
/// what is missing. Runs two tests of this binary (one through `Rfs`, one
/// through `served`) in a child with such a PATH.
#[test]
fn daytona_tests_skip_without_the_server_and_fail_when_required() {
    if std::env::var_os("RFS_DAYTONA_INNER").is_some() {
        return;
    }
    let run = |test: &str, require: bool| {
        let mut c = std::process::Command::new(std::env::current_exe().unwrap());
        c.args([test, "--exact", "--test-threads=1", "--nocapture"])
            .env("PATH", "/nonexistent-rfs-path")
            .env("RFS_DAYTONA_INNER", "1")
            .env_remove("RFS_REQUIRE_DAYTONA");
        if require {
            c.env("RFS_REQUIRE_DAYTONA", "1");
        }
        let o = c.output().unwrap();
        (
            o.status.success(),
            format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            ),
        )
    };
    for test in [
        "help_never_shows_the_api_key",
        "idempotent_calls_retry_5xx_and_429_honouring_retry_after_but_create_never_retries",
    ] {
        let (ok, text) = run(test, false);
        assert!(ok, "skipping must not fail:\n{text}");
        assert!(
            text.contains("skipping daytona test: the Daytona-API test server cannot run here: rfs-daytona-sim needs util-linux's `unshare` on PATH"),
            "{text}"
        );
        assert!(text.contains("1 passed"), "{text}");
        let (ok, text) = run(test, true);
        assert!(!ok, "RFS_REQUIRE_DAYTONA=1 must fail:\n{text}");
        assert!(
            text.contains("RFS_REQUIRE_DAYTONA=1 but the Daytona-API test server cannot run here: rfs-daytona-sim needs util-linux's `unshare` on PATH"),
            "{text}"
        );
    }
}

/// The sandbox a run created (kept with `--keep`), as the server knows it.
fn kept(rfs: &Rfs, out: &RunOut) -> rfs_daytona_sim::SimSandbox {
    let id = out.sandbox_id();
    rfs.sim()
        .inventory()
        .into_iter()
        .find(|s| s.id == id)
        .unwrap_or_else(|| panic!("sandbox {id} not in the inventory"))
}

/// Destroy a kept sandbox (verified), through the provider.
fn destroy_kept(rfs: &Rfs, id: &str) {
    let p = rfs.provider();
    rt().block_on(destroy_verified(p.as_ref(), id, Duration::from_secs(30)))
        .unwrap();
}

/// A step of `secs` seconds that makes no toolbox call of its own.
fn long_step(secs: u32) -> String {
    format!("let r = step(\"long\", \"sleep {secs}; echo alive\");\nif r.stdout != \"alive\\n\" {{ throw \"stdout was: \" + r.stdout; }}\n")
}

/// Gap 2: the server stops a sandbox idle for its auto-stop interval (2
/// "minutes" of 300 ms here); a 4 s step outlives that and is not stopped
/// under it because rfs posts `last-activity` while the run lives. The
/// same step without keep-alive (period longer than the run) is stopped
/// under it: the check can fail.
#[test]
fn a_step_longer_than_auto_stop_survives_through_keep_alive() {
    let opts = SimOptions {
        auto_stop_tick: Duration::from_millis(300),
        ..SimOptions::default()
    };
    let Some(rfs) = Rfs::daytona_with(opts.clone()) else {
        return;
    };
    let repo = Repo::new();
    let run = |rfs: &Rfs, keep_alive_ms: &str| {
        let (script, out_dir) = rfs.prepare(&long_step(4));
        let out = rfs
            .cmd(repo.path())
            .env("RFS_DAYTONA_AUTO_STOP_MINUTES", "2")
            .env("RFS_DAYTONA_KEEP_ALIVE_MS", keep_alive_ms)
            .args(["run"])
            .arg(&script)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        let out = finish(out, out_dir);
        rfs.console(&out.stdout);
        rfs.console(&out.stderr);
        out
    };
    let out = run(&rfs, "150");
    out.assert_code(0);
    let id = out.sandbox_id();
    let beats: Vec<_> = rfs
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == format!("/sandbox/{id}/last-activity"))
        .collect();
    assert!(beats.len() >= 10, "keep-alive beats: {}", beats.len());
    assert!(
        beats.iter().all(|b| (200..300).contains(&b.status)),
        "{beats:?}"
    );
    // The sandbox was created with the configured auto-stop interval.
    rfs.finish();

    // Control: no beat within the run; the server stops the sandbox.
    let Some(rfs) = Rfs::daytona_with(opts) else {
        return;
    };
    let out = run(&rfs, "600000");
    assert_ne!(
        out.code, 0,
        "the step survived without keep-alive:\n{}",
        out.stderr
    );
    let id = out.sandbox_id();
    assert!(
        !rfs.sim()
            .requests()
            .iter()
            .any(|r| r.path == format!("/sandbox/{id}/last-activity")),
        "a keep-alive was sent"
    );
    rfs.finish();
}

/// Gap 3: a create whose sandbox ends in `error` or `build_failed`, or is
/// not `started` within the bound, is refused and the sandbox destroyed
/// (verified: the server holds none), with one create and one delete.
#[test]
fn a_create_ending_in_error_build_failed_or_never_started_is_refused_and_destroyed() {
    for (state, want) in [
        (
            "error",
            "went to state `error`: error injected by the test server",
        ),
        (
            "build_failed",
            "went to state `build_failed`: build_failed injected by the test server",
        ),
        (
            "creating",
            "was not started within 1.5 s (last state `creating`)",
        ),
    ] {
        let Some(sim) = start_sim(SimOptions::default()) else {
            return;
        };
        let p = DaytonaProvider::new(Config {
            start_wait: Duration::from_millis(1500),
            ..config(&sim)
        })
        .unwrap();
        let rt = rt();
        sim.faults().next_create_ends_in(state);
        let e = rt
            .block_on(p.create(&spec(&format!("ends-{state}"))))
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{state}: {e}");
        assert!(
            e.contains("it was destroyed (verified gone)"),
            "{state}: {e}"
        );
        assert_eq!(count(&sim, "POST", "/sandbox"), 1, "{state}");
        let deletes = sim
            .requests()
            .iter()
            .filter(|r| r.method == "DELETE" && r.route == "/sandbox/{}")
            .count();
        assert_eq!(deletes, 1, "{state}");
        assert_clean(&sim, &[&e]);
    }
}

/// Gap 4a: a response slower than the per-request timeout. An idempotent
/// call is sent again (5 attempts) and then named as unanswered; a call
/// that is never resent (creating a toolbox session for a command) is
/// refused at once, named.
#[test]
fn a_slow_response_hits_the_request_timeout_retried_only_when_idempotent() {
    let Some(sim) = start_sim(SimOptions::default()) else {
        return;
    };
    let p = DaytonaProvider::new(Config {
        request_timeout: Duration::from_millis(400),
        ..config(&sim)
    })
    .unwrap();
    let rt = rt();
    let info = rt.block_on(p.create(&spec("slow"))).unwrap();
    let path = format!("/sandbox/{}", info.id);
    sim.faults().slow("GET", &path, Duration::from_millis(1500));
    let started = std::time::Instant::now();
    let e = rt.block_on(p.get(&info.id)).unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "get sandbox (sandbox {}) failed: no answer in time",
            info.id
        )) && e.ends_with("after 5 attempts"),
        "{e}"
    );
    assert!(started.elapsed() >= Duration::from_millis(5 * 400), "{e}");
    sim.faults().clear();
    sim.faults().slow(
        "POST",
        &format!("/toolbox/{}/process/session", info.id),
        Duration::from_millis(1500),
    );
    let req = rfs::provider::ExecRequest {
        argv: vec!["true".into()],
        cwd: "/".into(),
        env: vec![],
        timeout: None,
        cancel: Default::default(),
    };
    let mut sink = rfs::provider::Collect::default();
    let started = std::time::Instant::now();
    let e = rt
        .block_on(p.exec(&info.id, &req, &mut sink))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(&format!(
            "create session (sandbox {}) failed: no answer in time",
            info.id
        )) && !e.contains("attempts"),
        "{e}"
    );
    assert!(
        started.elapsed() < Duration::from_millis(1400),
        "resent? {e}"
    );
    sim.faults().clear();
    std::thread::sleep(Duration::from_millis(1500));
    rt.block_on(destroy_verified(&p, &info.id, Duration::from_secs(30)))
        .unwrap();
    assert_clean(&sim, &[&e]);
}

/// Gap 4b: the server flips one byte of the uploaded archive; the
/// in-sandbox verification refuses it and the sandbox is destroyed
/// (verified) before any step runs.
#[test]
fn a_corrupted_upload_is_refused_by_the_sandbox_verification_and_destroyed() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    rfs.sim().faults().corrupt_next_upload();
    let out = rfs.run(
        repo.path(),
        "sync_source();\nstep(\"after\", \"echo ran\");\n",
    );
    out.assert_code(3);
    // The archive goes gzip'd (the repository compresses), so the flipped
    // byte is caught by gzip as the sandbox decompresses it: by its CRC
    // ("crc error") or, when the byte lands in a code of the deflate
    // stream (the archive differs with every commit's time), as invalid
    // data ("corrupted data"); either way the sync is refused there.
    assert!(
        out.stderr.contains(&format!(
            "refused: source sync into sandbox {} failed: decompressing the transfer failed: gzip: ",
            out.sandbox_id()
        )),
        "{}",
        out.stderr
    );
    assert!(out.entries("step.start").is_empty());
    let id = out.sandbox_id();
    assert_eq!(
        out.entries("source.sync_failed")[0]["sandbox_id"],
        id.as_str()
    );
    let cleanup = &out.entries("cleanup.verified")[0];
    assert_eq!(cleanup["why"], "failed source sync");
    assert_eq!(cleanup["sandbox_id"], id.as_str());
    rfs.finish();
}

/// Gap 5: Daytona's misleading `fork/exec /usr/bin/zsh` (exit -1) and an
/// exit -1 with no output become rfs's own errors, through rfs.
#[test]
fn exit_minus_one_from_the_toolbox_becomes_rfs_clear_error() {
    for (output, want) in [
        (
            "fork/exec /usr/bin/zsh: no such file or directory",
            "which means the working directory it was given does not exist (not that the shell is missing)",
        ),
        ("", "reported exit code -1 with no output"),
    ] {
        let Some(rfs) = Rfs::daytona() else { return };
        let repo = Repo::new();
        rfs.sim().faults().next_exec_fails_to_start(output);
        let out = rfs.run_with_env(repo.path(), "step(\"x\", \"echo hi\");\n", &[], NO_AGENT);
        assert_ne!(out.code, 0, "{}", out.stderr);
        assert!(out.stderr.contains(want), "{}", out.stderr);
        assert!(
            !out.stderr.contains("exit -1") && !out.stderr.contains("exit 255"),
            "{}",
            out.stderr
        );
        assert_eq!(out.entries("cleanup.verified").len(), 1);
        rfs.finish();
    }
}

/// Gap 5: the toolbox's 408 (execute timeout) and an error with an empty
/// body are named, through rfs, and nothing is left behind.
#[test]
fn a_408_and_an_empty_body_error_are_named_through_rfs() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    rfs.sim().faults().fail_next(
        "POST",
        "/toolbox/{}/process/execute",
        1,
        408,
        Some(r#"{"statusCode":408,"message":"request timeout: command execution timeout","code":"REQUEST_TIMEOUT"}"#.into()),
    );
    // A 3 s step: its recorded exit status is read through `execute`
    // after 2 s, and that call answers 408.
    let out = rfs.run(repo.path(), "step(\"x\", \"sleep 3\");\n");
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains(
            "read a command's recorded exit status (sandbox {}) failed: HTTP 408 Request Timeout: request timeout: command execution timeout"
                .replace("{}", &out.sandbox_id())
                .as_str()
        ),
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("cleanup.verified").len(), 1);
    let execs = rfs
        .sim()
        .requests()
        .iter()
        .filter(|r| r.route == "/toolbox/{}/process/execute")
        .count();
    assert_eq!(execs, 1, "a POST was resent");
    rfs.finish();

    let Some(rfs) = Rfs::daytona() else { return };
    rfs.sim()
        .faults()
        .fail_next("POST", "/sandbox", 1, 400, None);
    let out = rfs.run(repo.path(), "print(sandbox().id);\n");
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("daytona: create sandbox failed: HTTP 400 Bad Request (empty body)"),
        "{}",
        out.stderr
    );
    rfs.finish();
}

/// Gap 5: the script's `sandbox(#{ snapshot })` beats `--snapshot`, which
/// beats `RELAYFLOWS_SANDBOX_SNAPSHOT`, which beats the server's default —
/// read from the server's record of each create.
#[test]
fn snapshot_precedence_script_then_flag_then_env_then_default() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let cases: [(&str, Option<&str>, Option<&str>, &str); 4] = [
        (
            "print(sandbox(#{ snapshot: \"daytona-medium\" }).id);\n",
            Some("daytona-small"),
            Some("env-snap-unknown"),
            "daytona-medium",
        ),
        (
            "print(sandbox().id);\n",
            Some("daytona-small"),
            Some("env-snap-unknown"),
            "daytona-small",
        ),
        (
            "print(sandbox().id);\n",
            None,
            Some("daytona-medium"),
            "daytona-medium",
        ),
        (
            "print(sandbox().id);\n",
            None,
            None,
            "daytonaio/sandbox:0.5.0-slim",
        ),
    ];
    for (script, flag, env, want) in cases {
        let (path, out_dir) = rfs.prepare(script);
        let mut c = rfs.cmd(repo.path());
        c.args(["run", "--keep"])
            .arg(&path)
            .arg("--out")
            .arg(&out_dir);
        if let Some(f) = flag {
            c.args(["--snapshot", f]);
        }
        if let Some(e) = env {
            c.env("RELAYFLOWS_SANDBOX_SNAPSHOT", e);
        }
        let out = finish(c.output().unwrap(), out_dir);
        rfs.console(&out.stdout);
        rfs.console(&out.stderr);
        out.assert_code(0);
        let sb = kept(&rfs, &out);
        assert_eq!(sb.snapshot, want, "{script} {flag:?} {env:?}");
        destroy_kept(&rfs, &sb.id);
    }
    rfs.finish();
}

/// Gap 5: a JWT with `DAYTONA_ORGANIZATION_ID` works (the server checks the
/// organization header) and `DAYTONA_TARGET` reaches the create; a wrong
/// organization is refused at preflight, and the JWT is never echoed.
#[test]
fn jwt_with_organization_and_target_reach_the_server() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let jwt = rfs.sim().jwt();
    let run = |org: &str| {
        let (path, out_dir) = rfs.prepare("print(sandbox().id);\n");
        let out = rfs
            .cmd(repo.path())
            .env_remove("DAYTONA_API_KEY")
            .env("DAYTONA_JWT_TOKEN", &jwt)
            .env("DAYTONA_ORGANIZATION_ID", org)
            .env("DAYTONA_TARGET", "eu")
            .args(["run", "--keep"])
            .arg(&path)
            .arg("--out")
            .arg(&out_dir)
            .output()
            .unwrap();
        let out = finish(out, out_dir);
        rfs.console(&out.stdout);
        rfs.console(&out.stderr);
        assert!(!out.stdout.contains(&jwt) && !out.stderr.contains(&jwt));
        let journal = std::fs::read_to_string(out.out_dir.join("journal.jsonl")).unwrap();
        assert!(!journal.contains(&jwt));
        out
    };
    let out = run(rfs_daytona_sim::ORGANIZATION_ID);
    out.assert_code(0);
    let sb = kept(&rfs, &out);
    assert_eq!(sb.target, "eu");
    destroy_kept(&rfs, &sb.id);
    let before = rfs.sim().requests().len();
    let out = run("some-other-org");
    out.assert_code(3);
    assert!(
        out.stderr.contains("refused the credential (HTTP 403)"),
        "{}",
        out.stderr
    );
    assert!(rfs.sim().requests()[before..]
        .iter()
        .all(|r| !(r.method == "POST" && r.path == "/sandbox")));
    rfs.finish();
}

/// Gap 6: a command whose exit code the toolbox loses (its status never
/// has one; the log follow ends with the output) still gets its own exit
/// code: the end lines it prints in the stream carry it, so it is never
/// success by default, never "killed by a signal", and no status is
/// waited for.
#[test]
fn a_lost_toolbox_exit_code_is_read_from_the_steps_end_lines() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    rfs.sim().faults().lose_exit_code_of("lost-exit-code");
    // A session per command: the step agent carries exit codes itself.
    let out = rfs.run_with_env(
        repo.path(),
        "step(\"lost\", \"echo lost-exit-code; exit 7\", #{ timeout: 30 });\n",
        &[],
        NO_AGENT,
    );
    out.assert_code(1);
    assert!(!out.stderr.contains("killed by a signal"), "{}", out.stderr);
    assert!(!out.stderr.contains("no exit code"), "{}", out.stderr);
    let end = &out.entries("step.end")[0];
    assert_eq!(end["ok"], false);
    assert_eq!(end["exit"], 7, "{end}");
    rfs.finish();
}

/// Gap 7: a command that forges Daytona's own wrapper refusal — the real
/// token (found in /tmp), the `nocwd` line, exit 125 — is a failed
/// command, not a refusal; what it printed is its output.
#[test]
fn a_command_forging_the_daytona_wrapper_refusal_is_a_failed_command() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"step("forger", "t=$(ls /tmp/.rfs-exec-*.pgid | sed 's/.*rfs-exec-//; s/[.]pgid$//'); printf 'rfs-daytona:%s:nocwd\n' \"$t\" >&2; exit 125");
"#,
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("step `forger` failed: exit 125"),
        "{}",
        out.stderr
    );
    assert!(
        !out.stderr.contains("does not exist in sandbox"),
        "{}",
        out.stderr
    );
    assert!(out.entries("refused").is_empty());
    assert!(out.entries("step.refused").is_empty());
    let log = std::fs::read_to_string(out.out_dir.join("steps/001-forger.stderr.log")).unwrap();
    // The forged line carries the real token (the forgery was exact).
    let token = log
        .strip_prefix("rfs-daytona:")
        .and_then(|r| r.strip_suffix(":nocwd\n"))
        .unwrap_or_else(|| panic!("stderr log: {log:?}"));
    assert_eq!(token.len(), 32, "{log:?}");
    rfs.finish();
}

/// Gap 8: `rfs doctor` with the daytona provider: healthy when the API
/// answers, non-zero naming the problem when the key is refused.
#[test]
fn doctor_reports_daytona_health_and_a_refused_key() {
    let Some(rfs) = Rfs::daytona() else { return };
    let doctor = |key: Option<&str>| {
        let mut c = rfs.cmd(rfs.state.path());
        c.args(["doctor", "--provider", "daytona"]);
        if let Some(k) = key {
            c.env("DAYTONA_API_KEY", k);
        }
        let o = c.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        rfs.console(&text);
        (o.status.code(), text)
    };
    let (code, text) = doctor(None);
    assert_eq!(code, Some(0), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("daytona"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(
        line.contains(&format!(
            "credentials set; API at {} answering",
            rfs.sim().api_url()
        )),
        "{text}"
    );
    let wrong = "dtn_wrongkey0123456789abcdef";
    let (code, text) = doctor(Some(wrong));
    assert_ne!(code, Some(0), "{text}");
    assert!(
        text.contains("refused the credential (HTTP 401); check DAYTONA_API_KEY"),
        "{text}"
    );
    assert!(!text.contains(wrong), "{text}");
    rfs.finish();
}

/// Gap 10: with `RUST_LOG=rfs::daytona=debug` every HTTP call logs its
/// method, route template (no host, no query, no id), status, attempt and
/// elapsed time, and a retry its delay; never the key.
#[test]
fn every_http_call_is_logged_at_debug_without_secrets() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    rfs.sim()
        .faults()
        .fail_next("GET", "/sandbox", 1, 503, None);
    let (script, out_dir) = rfs.prepare("step(\"s\", \"echo hi\");\n");
    let out = rfs
        .cmd(repo.path())
        .env("RUST_LOG", "rfs::daytona=debug")
        .args(["run"])
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    rfs.console(&out.stdout);
    rfs.console(&out.stderr);
    out.assert_code(0);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.contains("rfs::daytona"))
        .collect();
    let id = out.sandbox_id();
    let has = |needles: &[&str]| lines.iter().any(|l| needles.iter().all(|n| l.contains(n)));
    assert!(
        has(&[
            "check the API",
            "method=GET",
            "route=/api/sandbox",
            "status=503",
            "attempt=1",
            "elapsed_ms="
        ]),
        "{lines:#?}"
    );
    assert!(
        has(&["check the API: retrying", "attempt=1", "delay_ms="]),
        "{lines:#?}"
    );
    assert!(
        has(&["check the API", "status=200", "attempt=2"]),
        "{lines:#?}"
    );
    assert!(
        has(&[
            "create sandbox",
            "method=POST",
            "route=/api/sandbox",
            "status=200"
        ]),
        "{lines:#?}"
    );
    assert!(
        has(&[
            "start the step agent",
            "route=/toolbox/{}/process/session/{}/exec"
        ]),
        "{lines:#?}"
    );
    assert!(
        has(&[
            "send a step to the agent",
            "route=/toolbox/{}/process/session/{}/command/{}/input",
            "status=204"
        ]),
        "{lines:#?}"
    );
    assert!(
        has(&["delete sandbox", "method=DELETE", "route=/api/sandbox/{}"]),
        "{lines:#?}"
    );
    for l in &lines {
        assert!(!l.contains(&id), "an id in a route: {l}");
        assert!(!l.contains("127.0.0.1") && !l.contains("labels="), "{l}");
        assert!(!l.to_ascii_lowercase().contains("bearer"), "{l}");
    }
    rfs.finish();
}

/// A reader on a slow network: the daemon holds 256 frames per client,
/// then drops it with close code 1008.
const SLOW_READER: Duration = Duration::from_millis(5);

/// Run `script` on a server whose faults `arm` sets.
fn run_with_faults(
    arm: impl FnOnce(&rfs_daytona_sim::Faults),
    script: &str,
) -> Option<(Rfs, RunOut)> {
    let rfs = Rfs::daytona()?;
    arm(rfs.sim().faults());
    let repo = Repo::new();
    let out = rfs.run(repo.path(), script);
    Some((rfs, out))
}

#[test]
fn an_attach_with_a_large_environment_is_not_dropped_as_a_slow_consumer() {
    // The wrapper's line used to be typed into the login shell, whose line
    // editor echoed it one byte at a time: with the environment on it, a
    // thousand one-byte frames before the command even started, and a
    // reader a little slow was dropped (close 1008) during that echo.
    let Some((rfs, out)) = run_with_faults(
        |f| f.slow_pty_reader(SLOW_READER),
        r#"
        let big = "";
        for i in 0..3000 { big += "x"; }
        let t = attach("sh", #{ env: #{ BIG: big } });
        t.send("echo big-${#BIG}\n");
        assert_screen(t, #{ text: "big-3000", timeout: 20 });
        t.close();
        "#,
    ) else {
        return;
    };
    out.assert_code(0);
    rfs.assert_no_leftovers();
    rfs.finish();
}

#[test]
fn an_absent_assertion_fails_when_the_terminal_connection_is_dropped() {
    // A dropped connection (close 1008, no exit code) proves nothing about
    // what the program printed after it: the assertion used to pass. The
    // drop comes after 2 KB of the program's 30 KB, so the text the
    // assertion looks for is printed only after it.
    let Some((rfs, out)) = run_with_faults(
        |f| f.drop_pty_clients_after(2048),
        r#"
        let t = attach("sh");
        t.send("i=0; while [ $i -lt 3000 ]; do echo line-$i; i=$((i+1)); done; echo never-$((1+1))-seen\n");
        assert_screen(t, #{ text: "never-2-seen", absent: true, timeout: 30 });
        "#,
    ) else {
        return;
    };
    out.assert_code(1);
    assert!(
        out.stderr.contains("without the program's exit status"),
        "{}",
        out.stderr
    );
    let a = &out.entries("attach.assert")[0];
    assert_eq!(a["outcome"], "Lost");
    assert!(
        a["elapsed_ms"].as_u64().unwrap() < 30_000,
        "failed when the connection dropped, not at the timeout: {a}"
    );
    rfs.assert_no_leftovers();
    rfs.finish();
}
