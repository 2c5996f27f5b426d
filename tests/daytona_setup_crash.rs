//! Daytona's real rules under a crash (#45): rfs killed during a suite
//! with a setup, then `rfs gc` — on the `container` class (the
//! checkpoint a snapshot, which carries no labels: its name carries the
//! owner) and on `linux-vm` (the checkpoint a fork of the setup's
//! sandbox, the proofs forks of it: Daytona deletes no parent before its
//! forks, so gc deletes children first). Nothing of rfs's is left: no
//! sandbox, fork or snapshot.

mod common;
use common::*;

use std::time::{Duration, Instant};

const SETUP: &str =
    "sync_source();\nstep(\"install\", \"echo installed > marker\");\ncheckpoint(\"deps\");\n";
const PROOF: &str = "sync_source();\nstep(\"slow\", \"cat marker && sleep 60\");\n";

fn rfs_sandboxes(rfs: &Rfs) -> Vec<rfs_daytona_sim::SimSandbox> {
    rfs.sim()
        .inventory()
        .into_iter()
        .filter(|s| s.labels.get("relayflows/created-by").map(String::as_str) == Some("rfs"))
        .collect()
}

fn killed_mid_suite_then_gc_leaves_nothing(rfs: &Rfs, vm: bool) {
    let repo = Repo::new();
    repo.write("proofs/_setup.rhai", SETUP);
    for n in ["a", "b", "c"] {
        repo.write(&format!("proofs/{n}.rhai"), PROOF);
    }
    repo.commit("a suite whose proofs run long");
    let out = rfs.state.path().join("suite");
    let mut child = rfs
        .cmd(repo.path())
        .args([
            "test",
            "--setup",
            "proofs/_setup.rhai",
            "--jobs",
            "3",
            "--out",
        ])
        .arg(&out)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("rfs test starts");
    // The three proofs running: each has its sandbox (and on linux-vm the
    // setup's sandbox and the checkpoint live on as their ancestors).
    let want = if vm { 5 } else { 3 };
    let end = Instant::now() + Duration::from_secs(60);
    while rfs_sandboxes(rfs)
        .iter()
        .filter(|s| s.state == "started")
        .count()
        < want
    {
        assert!(
            Instant::now() < end,
            "the proofs did not start: {:?}",
            rfs_sandboxes(rfs)
        );
        assert!(child.try_wait().unwrap().is_none(), "rfs ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    if vm {
        assert!(
            rfs_sandboxes(rfs).iter().any(|s| s.parent.is_some()),
            "forks on linux-vm"
        );
    } else {
        assert_eq!(rfs.sim().snapshots().len(), 1, "the checkpoint, a snapshot");
    }
    child.kill().unwrap();
    child.wait().unwrap();
    // Daytona's list is eventually consistent (the server's `list_lag`):
    // a person runs gc after a crash, not within its lag.
    std::thread::sleep(Duration::from_millis(500));
    let gc = rfs
        .cmd(rfs.state.path())
        .args(["gc", "--provider", "daytona"])
        .output()
        .expect("rfs gc runs");
    let stdout = String::from_utf8_lossy(&gc.stdout);
    let stderr = String::from_utf8_lossy(&gc.stderr);
    rfs.console(&stdout);
    rfs.console(&stderr);
    assert!(gc.status.success(), "rfs gc failed\n{stdout}\n{stderr}");
    let left = rfs_sandboxes(rfs);
    assert!(left.is_empty(), "left behind: {left:?}\n{stdout}");
    let snaps = rfs.sim().snapshots();
    assert!(snaps.is_empty(), "snapshots left: {snaps:?}\n{stdout}");
}

#[test]
fn killed_during_a_setup_suite_on_the_container_class_gc_leaves_no_sandbox_or_snapshot() {
    let Some(rfs) = Rfs::daytona() else { return };
    killed_mid_suite_then_gc_leaves_nothing(&rfs, false);
    rfs.finish();
}

#[test]
fn killed_during_a_setup_suite_on_the_vm_class_gc_leaves_no_sandbox_or_fork() {
    let Some(rfs) = Rfs::daytona_vm() else { return };
    killed_mid_suite_then_gc_leaves_nothing(&rfs, true);
    rfs.finish();
}
