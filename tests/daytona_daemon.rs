//! rfs against what Daytona's toolbox daemon really does with session
//! commands (issue #31; the server reproduces daytonaio/daytona v0.190.0,
//! see tests/daytona-sim/README.md): the input echo and the follow
//! stream's late close.

mod common;

use common::*;

/// Seconds of the day of a journal timestamp (`…THH:MM:SS.fffZ`).
fn secs(ts: &serde_json::Value) -> f64 {
    let t = ts.as_str().unwrap();
    let hms = t.split('T').nth(1).unwrap().trim_end_matches('Z');
    let mut it = hms.split(':').map(|p| p.parse::<f64>().unwrap());
    it.next().unwrap() * 3600.0 + it.next().unwrap() * 60.0 + it.next().unwrap()
}

/// How long each step took, from its start to its end entry.
fn step_times(out: &RunOut) -> Vec<f64> {
    let of = |kind: &str| -> Vec<serde_json::Value> {
        out.journal()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .collect()
    };
    let (starts, ends) = (of("step.start"), of("step.end"));
    assert_eq!(starts.len(), ends.len());
    starts
        .iter()
        .zip(&ends)
        .map(|(s, e)| {
            let d = secs(&e["ts"]) - secs(&s["ts"]);
            if d < 0.0 {
                d + 86400.0
            } else {
                d
            }
        })
        .collect()
}

const STEPS: &str = r#"
sync_source();
for i in 0..4 {
    let r = step("s" + i, "echo out" + i + "; echo err" + i + " >&2");
    if r.stdout != "out" + i + "\n" { throw "stdout was: " + r.stdout; }
    if r.stderr != "err" + i + "\n" { throw "stderr was: " + r.stderr; }
}
"#;

/// The daemon echoes input into the command's log as stdout; a daemon
/// from before `suppressInputEcho` does so whatever rfs asks. The step
/// agent read its own base64 command lines back as step output: the
/// source sync's verification failed and the run was refused (exit 3).
#[test]
fn the_step_agent_does_not_read_its_own_echoed_input_as_step_output() {
    let Some(rfs) = Rfs::daytona() else { return };
    rfs.sim().faults().echo_input_regardless();
    let repo = Repo::new();
    let out = rfs.run(repo.path(), STEPS);
    out.assert_code(0);
    let inputs = rfs
        .sim()
        .requests()
        .iter()
        .filter(|r| r.path.ends_with("/input"))
        .count();
    assert!(
        inputs >= 5,
        "the steps went through the agent ({inputs} inputs)"
    );
    rfs.finish();
}

/// With the daemon's own default (it honours `suppressInputEcho`) the
/// agent runs the same steps.
#[test]
fn the_step_agent_runs_synced_steps_against_the_daemons_log() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    rfs.run(repo.path(), STEPS).assert_code(0);
    rfs.finish();
}

/// The daemon closes a followed log about a second after the last output
/// (50 empty reads 20 ms apart, then the exit code). Without the agent a
/// step waited for that close: about a second per step. The exit code now
/// comes in the stream and the step ends with it.
#[test]
fn a_step_without_the_agent_does_not_wait_a_second_for_the_log_to_close() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run_with_env(
        repo.path(),
        STEPS,
        &[],
        &[("RFS_DAYTONA_STEP_AGENT", "off")],
    );
    out.assert_code(0);
    let times = step_times(&out);
    let latency = std::env::var("RFS_TEST_DAYTONA_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0)
        / 1000.0;
    // Four round trips (exec, follow, the frames) and the command, well
    // under the daemon's second.
    let bound = 0.7 + 4.0 * latency;
    assert!(
        times.iter().all(|t| *t < bound),
        "step times {times:?} (bound {bound:.2} s)"
    );
    assert_eq!(
        rfs.sim()
            .requests()
            .iter()
            .filter(|r| r.path.ends_with("/input"))
            .count(),
        0,
        "no agent"
    );
    rfs.finish();
}

/// A step that removes `$HOME/.daytona` takes the agent's input FIFO with
/// it; the daemon's follower keeps the open log, so the step still ends
/// cleanly, and the next input is refused (500 `failed to open input
/// pipe`) before anything was sent. The next step then goes to a new
/// agent instead of failing as a provider error.
#[test]
fn a_step_after_one_that_removed_the_agents_session_runs_on_a_new_agent() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "step(\"wipe\", \"rm -rf \\\"$HOME/.daytona\\\"\");\nlet r = step(\"next\", \"echo ran\");\nif r.stdout != \"ran\\n\" { throw \"stdout was: \" + r.stdout; }\n",
    );
    out.assert_code(0);
    let agents = rfs
        .sim()
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.route == "/toolbox/{}/process/session")
        .count();
    assert_eq!(agents, 2, "a second agent took the step");
    rfs.finish();
}
