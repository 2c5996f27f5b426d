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

fn provider(sim: &Sim, create_timeout: Duration) -> Arc<DaytonaProvider> {
    Arc::new(
        DaytonaProvider::new(Config {
            credential: Credential::ApiKey(Secret::new(sim.api_key())),
            api_url: sim.api_url(),
            target: None,
            default_snapshot: None,
            create_timeout,
        })
        .unwrap(),
    )
}

/// A server started with `opts`, a provider for it and a runtime; `None`
/// (said in one line) when this machine cannot run the server.
fn served(
    opts: SimOptions,
    create_timeout: Duration,
) -> Option<(Sim, Arc<DaytonaProvider>, tokio::runtime::Runtime)> {
    match Sim::start(opts) {
        Ok(sim) => {
            let p = provider(&sim, create_timeout);
            Some((sim, p, rt()))
        }
        Err(e) => {
            eprintln!("skipping daytona test: the server cannot run here: {e}");
            None
        }
    }
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
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run(repo.path(), TALKING_STEP);
    out.assert_code(0);
    let cmds = per_command(rfs.sim());
    assert!(!cmds.is_empty());
    for (logs, status_reads) in &cmds {
        // One follow stream per command; its exit code read once, at the end.
        assert_eq!(logs, &["follow=true"], "{cmds:?}");
        assert_eq!(*status_reads, 1, "{cmds:?}");
    }
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
