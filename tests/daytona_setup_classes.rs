//! A suite with a setup on each of Daytona's classes (#45), as Daytona
//! v0.190.0 allows it (`apps/api/src/sandbox/services/sandbox.service.ts`):
//! a `container` sandbox is not forked (:1093-1094), so its checkpoint is
//! a snapshot of it and each proof is created from that; a `linux-vm`
//! one is, so its checkpoint is a fork and each proof a fork of that —
//! made one at a time (the source is `forking` meanwhile, :1176-1185),
//! and the setup's sandbox, the checkpoint's parent, destroyed after it
//! (:2020-2029). Each journal says which.

mod common;
use common::*;

use serde_json::Value;
use std::path::{Path, PathBuf};

const SETUP: &str = "sync_source();\nstep(\"install\", \"echo installed > marker\");\n";
const PROOF: &str = "sync_source();\nlet r = step(\"see\", \"cat marker\");\nassert(r.stdout == \"installed\\n\", r.stdout);\n";

fn suite(rfs: &Rfs) -> (PathBuf, Value) {
    let repo = Repo::new();
    repo.write("proofs/_setup.rhai", SETUP);
    for n in ["a", "b", "c"] {
        repo.write(&format!("proofs/{n}.rhai"), PROOF);
    }
    repo.commit("a suite with a setup");
    let dir = rfs.state.path().join("suite");
    let out = rfs
        .cmd(repo.path())
        .args([
            "test",
            "--setup",
            "proofs/_setup.rhai",
            "--jobs",
            "3",
            "--out",
        ])
        .arg(&dir)
        .output()
        .expect("rfs test runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    rfs.console(&stderr);
    rfs.console(&String::from_utf8_lossy(&out.stdout));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ix: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    (dir, ix)
}

fn journal(bundle: &Path) -> Vec<Value> {
    std::fs::read_to_string(bundle.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn payloads(j: &[Value], kind: &str) -> Vec<Value> {
    j.iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| e["payload"].clone())
        .collect()
}

fn proof_bundles(ix: &Value) -> Vec<PathBuf> {
    ix["proofs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            PathBuf::from(
                p["attempts"].as_array().unwrap().last().unwrap()["out_dir"]
                    .as_str()
                    .unwrap(),
            )
        })
        .collect()
}

/// The container class: a snapshot (`POST /sandbox/{id}/snapshot`), each
/// proof created from it (`placement.forked` says so), the setup's
/// sandbox destroyed at its end, the snapshot removed and gone.
#[test]
fn a_container_setup_is_checkpointed_by_a_snapshot_and_proofs_are_created_from_it() {
    let Some(rfs) = Rfs::daytona() else { return };
    let (_, ix) = suite(&rfs);
    let setup = journal(Path::new(ix["setup"]["out_dir"].as_str().unwrap()));
    let cp = &payloads(&setup, "checkpoint")[0];
    assert!(
        cp["how"]
            .as_str()
            .unwrap()
            .contains("a snapshot of the sandbox (class `container`"),
        "{cp}"
    );
    assert_eq!(payloads(&setup, "cleanup.verified").len(), 1, "{setup:?}");
    for b in proof_bundles(&ix) {
        let f = &payloads(&journal(&b), "placement.forked")[0];
        assert!(
            f["how"]
                .as_str()
                .unwrap()
                .contains("created from snapshot rfs-cp."),
            "{f}"
        );
    }
    for r in ix["setup"]["removed"].as_array().unwrap() {
        assert_eq!(r["verified"], true, "{r}");
    }
    let forks: Vec<_> = rfs
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.route.ends_with("/fork"))
        .collect();
    assert!(
        forks.is_empty(),
        "a container sandbox was asked to fork: {forks:?}"
    );
    assert!(rfs.sim().snapshots().is_empty());
    rfs.finish();
}

/// Bug: with `--jobs 3` two of three forks of the checkpoint met its
/// `forking` state (400/409) and their proofs failed; and the setup's
/// sandbox, the checkpoint's fork parent, could not be deleted at the
/// setup's end (400) and was left. Now every fork is answered 200, the
/// setup's journal says its sandbox was kept for the checkpoint, and the
/// suite destroys it after the checkpoint, verified.
#[test]
fn three_proofs_forking_one_vm_checkpoint_never_race_it_and_its_parent_goes_last() {
    let Some(rfs) = Rfs::daytona_vm() else { return };
    let (_, ix) = suite(&rfs);
    let setup = journal(Path::new(ix["setup"]["out_dir"].as_str().unwrap()));
    let cp = &payloads(&setup, "checkpoint")[0];
    assert!(
        cp["how"]
            .as_str()
            .unwrap()
            .contains("a fork of the sandbox (class `linux-vm`"),
        "{cp}"
    );
    let kept = payloads(&setup, "cleanup.kept");
    assert_eq!(kept.len(), 1, "{setup:?}");
    assert!(
        kept[0]["reason"]
            .as_str()
            .unwrap()
            .contains("active fork children"),
        "{}",
        kept[0]
    );
    for b in proof_bundles(&ix) {
        let f = &payloads(&journal(&b), "placement.forked")[0];
        assert!(
            f["how"]
                .as_str()
                .unwrap()
                .contains("a fork of checkpoint sandbox"),
            "{f}"
        );
    }
    let removed = ix["setup"]["removed"].as_array().unwrap();
    assert_eq!(
        removed.len(),
        2,
        "the checkpoint, then its parent: {removed:?}"
    );
    assert_eq!(removed[1]["checkpoint_id"], kept[0]["sandbox_id"]);
    for r in removed {
        assert_eq!(r["verified"], true, "{r}");
    }
    let forks: Vec<_> = rfs
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.route.ends_with("/fork"))
        .collect();
    assert_eq!(forks.len(), 4, "the checkpoint and three proofs: {forks:?}");
    assert!(
        forks.iter().all(|r| r.status == 200),
        "a fork met a busy source: {forks:?}"
    );
    let refused_deletes: Vec<_> = rfs
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.status == 400)
        .collect();
    assert!(
        refused_deletes.is_empty(),
        "a parent deleted before its forks: {refused_deletes:?}"
    );
    rfs.finish();
}

/// Bug: a run that called `checkpoint()` on a VM class tore its sandbox
/// down before removing the checkpoint, its fork: Daytona refused the
/// parent's delete (400, `sandbox.service.ts:2020-2029`) and the
/// teardown failed. Now the run's checkpoints go first, then its sandbox,
/// each verified.
#[test]
fn a_run_with_a_checkpoint_on_a_vm_class_removes_the_fork_before_its_parent() {
    let Some(rfs) = Rfs::daytona_vm() else { return };
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"step("a", "echo a > a"); checkpoint("mid"); step("b", "cat a");"#,
    );
    out.assert_code(0);
    let removed = out.entries("checkpoint.removed");
    assert_eq!(removed.len(), 1);
    assert_eq!(removed[0]["verified"], true, "{}", removed[0]);
    assert_eq!(out.entries("cleanup.verified").len(), 1, "{}", out.stderr);
    let refused: Vec<_> = rfs
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.method == "DELETE" && r.status == 400)
        .collect();
    assert!(refused.is_empty(), "{refused:?}");
    rfs.finish();
}

/// A fork keeps its source's CIDR list but gets no domain list
/// (`sandbox.service.ts:1139-1140`): a proof asking for names on a VM
/// class gets them through `POST /sandbox/{id}/network-settings`
/// (`:3067-3133`), and the journal says Daytona's `domainAllowList`
/// holds them.
#[test]
fn a_vm_proof_fork_gets_its_domain_allow_list_through_network_settings() {
    let Some(rfs) = Rfs::daytona_vm() else { return };
    let repo = Repo::new();
    repo.write("proofs/_setup.rhai", SETUP);
    repo.write(
        "proofs/named.rhai",
        "sandbox(#{ network: #{ allow: [\"pypi.org\", \"*.pythonhosted.org\"] } });\nsync_source();\nstep(\"see\", \"cat marker\");\n",
    );
    repo.commit("a proof with names in its allow list");
    let dir = rfs.state.path().join("suite");
    let out = rfs
        .cmd(repo.path())
        .args(["test", "--setup", "proofs/_setup.rhai", "--out"])
        .arg(&dir)
        .output()
        .expect("rfs test runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    rfs.console(&stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let ix: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("index.json")).unwrap()).unwrap();
    let j = journal(&proof_bundles(&ix)[0]);
    assert_eq!(payloads(&j, "placement.forked").len(), 1);
    let policy = &payloads(&j, "placement")[0]["isolation"]["network_policy"];
    assert!(
        policy["enforced_by"]
            .as_str()
            .unwrap()
            .contains("Daytona domainAllowList (pypi.org,*.pythonhosted.org)"),
        "{policy}"
    );
    let settings: Vec<_> = rfs
        .sim()
        .requests()
        .into_iter()
        .filter(|r| r.route.ends_with("/network-settings"))
        .collect();
    assert_eq!(settings.len(), 1, "{settings:?}");
    assert_eq!(settings[0].status, 200);
    rfs.finish();
}
