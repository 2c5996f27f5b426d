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
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    let placement: serde_json::Value = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["kind"] == "placement")
        .expect("a placement");
    let id = placement["payload"]["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
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
