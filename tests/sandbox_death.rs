//! A sandbox that dies under a step is named as such (issue #20, class 6):
//! killed, stopped or removed from outside mid-step, the step is refused
//! as "died" / "vanished" (not a bare exit 137 or HTTP 404), the journal
//! records `sandbox.lost` with who ended it, and teardown does not claim
//! a destroy it did not do.

mod common;
use common::*;

use std::process::Command;

const LONG_STEP: &str = r#"step("long", "echo begun; sleep 60");"#;

/// Start a run whose step sleeps, wait until the step runs, and return
/// the child, its output folder and the sandbox id.
fn start_long_step(rfs: &Rfs, repo: &Repo) -> (std::process::Child, std::path::PathBuf, String) {
    let (child, out_dir) = rfs.spawn(repo.path(), LONG_STEP);
    wait_for_journal(&out_dir, "step.start");
    // The command itself has started when its first line is logged.
    wait_for_journal_text(&out_dir, "step.start");
    let id = out_dir_sandbox(&out_dir);
    std::thread::sleep(std::time::Duration::from_millis(500));
    (child, out_dir, id)
}

fn docker(args: &[&str]) {
    let out = Command::new("docker").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[track_caller]
fn assert_named(out: &RunOut, how: &str) {
    out.assert_code(3);
    assert!(
        how.split('|').any(|h| out.stderr.contains(h)),
        "expected {how:?} in:\n{}",
        out.stderr
    );
    assert!(!out.stderr.contains("FAILED (exit 137"), "{}", out.stderr);
    assert!(!out.stderr.contains("failed: exit 137"), "{}", out.stderr);
    let lost = out.entries("sandbox.lost");
    assert_eq!(lost.len(), 1, "{:?}", out.kinds());
    assert_eq!(lost[0]["ended_by"], "outside rfs");
}

#[test]
fn a_container_killed_mid_step_is_named_as_died_not_exit_137() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let (child, out_dir, id) = start_long_step(&rfs, &repo);
    docker(&["kill", &id]);
    let out = wait_bounded(child, out_dir);
    // (The test image's containers remove themselves once stopped.)
    assert_named(&out, "died outside rfs|vanished");
    rfs.assert_no_leftovers();
}

#[test]
fn a_container_removed_mid_step_is_named_as_vanished_and_not_claimed_destroyed() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let (child, out_dir, id) = start_long_step(&rfs, &repo);
    docker(&["rm", "-f", &id]);
    let out = wait_bounded(child, out_dir);
    assert_named(&out, "vanished");
    let evidence = out.evidence();
    assert!(evidence.contains("already gone"), "{evidence}");
    assert!(
        !evidence.contains(&format!("`{id}` destroyed")),
        "{evidence}"
    );
    assert!(
        out.stderr.contains("not destroyed by rfs"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

#[test]
fn a_daytona_sandbox_deleted_mid_step_is_named_as_vanished_not_http_404() {
    let Some(rfs) = Rfs::daytona() else { return };
    let repo = Repo::new();
    let (child, out_dir, id) = start_long_step(&rfs, &repo);
    let provider = rfs.provider();
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(provider.destroy(&id))
        .unwrap();
    let out = wait_bounded(child, out_dir);
    out.assert_code(3);
    assert!(
        out.stderr.contains("vanished") || out.stderr.contains("died outside rfs"),
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("sandbox.lost").len(), 1, "{:?}", out.kinds());
    let evidence = out.evidence();
    assert!(evidence.contains("already gone"), "{evidence}");
    rfs.finish();
}

/// Pause the sandbox with `docker pause` and leave it paused.
fn pause(id: &str) {
    docker(&["pause", id]);
}

#[test]
fn a_container_paused_mid_step_ends_the_step_as_paused_instead_of_hanging() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let (child, out_dir, id) = start_long_step(&rfs, &repo);
    pause(&id);
    // The step sleeps 60 s; wait_bounded fails the test long before a
    // frozen wait would end by itself.
    let out = wait_bounded(child, out_dir);
    assert_named(&out, "was paused outside rfs");
    assert_eq!(out.entries("sandbox.lost")[0]["during"], "long");
    // rfs did destroy this one: a paused container is removed and
    // verified gone.
    assert!(
        out.stderr.contains("destroyed, verified gone"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

/// Opt-in (`RFS_TEST_DOCKER_PAUSE=1`): on an engine with cgroup v1 and
/// runc 1.1 (this project's CI machine), a pause that lands while the
/// daemon starts an exec in the container wedges the daemon on that
/// container until its freezer cgroup is thawed by hand, and the run then
/// reports its teardown as not verified. The wait itself is bounded on
/// every engine; the mid-step pause test above runs everywhere.
#[test]
fn a_container_paused_during_sync_source_ends_the_run_instead_of_hanging() {
    if docker_missing() {
        return;
    }
    if std::env::var_os("RFS_TEST_DOCKER_PAUSE").is_none() {
        eprintln!("skipped: set RFS_TEST_DOCKER_PAUSE=1 to pause a container mid-sync (it can wedge some engines)");
        return;
    }
    during_sync(pause, "was paused outside rfs");
}

#[test]
fn a_container_stopped_during_sync_source_is_named_not_verification_exit_137() {
    if docker_missing() {
        return;
    }
    let stderr = during_sync(
        |id| docker(&["stop", "-t", "0", id]),
        "died outside rfs|vanished",
    );
    // The kill's exit code is not the sync's verdict.
    assert!(!stderr.contains("failed: verification ended"), "{stderr}");
}

/// Run a sync of a large commit on docker, do `to_sandbox` to its
/// sandbox while the verifier reads the stream, and return the run
/// (refused as `how`, with no step run and nothing left behind); its
/// stderr.
fn during_sync(to_sandbox: impl Fn(&str), how: &str) -> String {
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    // Enough content that the sync is still streaming when the pause
    // lands (random bytes: nothing compresses it away).
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for i in 0..12 {
        let bytes: Vec<u8> = (0..4 << 20)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                seed as u8
            })
            .collect();
        repo.write_bytes(format!("blob{i}.bin"), &bytes);
    }
    repo.commit("large");
    let (child, out_dir) = rfs.spawn(
        repo.path(),
        r#"sync_source(); step("after", "echo never");"#,
    );
    wait_for_journal(&out_dir, "placement");
    let id = out_dir_sandbox(&out_dir);
    // Paused while the daemon starts an exec, a container wedges the
    // Docker daemon itself (runc's init freezes mid-start; inspect and
    // rm then wait forever): act once the verifier reads the stream.
    wait_for_process_in(&id, "__verify-source");
    to_sandbox(&id);
    let out = wait_bounded(child, out_dir);
    assert_named(&out, how);
    assert!(
        out.stderr.contains("source sync into sandbox"),
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("sandbox.lost")[0]["during"], "sync_source");
    assert!(out.entries("step.start").is_empty(), "{:?}", out.kinds());
    rfs.assert_no_leftovers();
    out.stderr
}

/// The sandbox id of the run writing `out_dir` (its placement).
fn out_dir_sandbox(out_dir: &std::path::Path) -> String {
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["kind"] == "placement")
        .and_then(|v| v["payload"]["sandbox_id"].as_str().map(str::to_owned))
        .expect("a placement")
}

/// Wait (bounded) until a process whose command line holds `needle` runs
/// in container `id`.
fn wait_for_process_in(id: &str, needle: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let out = Command::new("docker").args(["top", id]).output().unwrap();
        if String::from_utf8_lossy(&out.stdout).contains(needle) {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no `{needle}` in container {id}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
