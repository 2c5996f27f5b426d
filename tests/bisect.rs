//! `rfs bisect GOOD BAD PROOF` (issue #23, item 2): the first commit at
//! which a proof's result changes, found in one sandbox re-synced commit
//! by commit, every tested commit journaled with its pin and result, the
//! finding printed as `git bisect` prints it, in one verifiable bundle.

mod common;
use common::*;

use serde_json::Value;
use std::path::Path;

/// A repository of `n` commits, the i-th setting file `v` to `i`; the
/// commit ids, oldest first.
fn counting_repo(n: usize) -> (Repo, Vec<String>) {
    let repo = Repo::new();
    let ids = (0..n)
        .map(|i| {
            repo.write("v", &format!("{i}\n"));
            if i == 3 {
                repo.write("later/keep", "");
            }
            repo.commit(&format!("set v to {i}"))
        })
        .collect();
    (repo, ids)
}

fn tested(out: &RunOut) -> Vec<(String, String)> {
    out.entries("bisect.commit")
        .iter()
        .map(|e| {
            (
                e["commit"].as_str().unwrap().to_owned(),
                e["result"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

provider_tests! {
    fn bisect_finds_the_first_bad_commit_in_one_sandbox_resynced_commit_by_commit(rfs: &Rfs) {
        let (repo, ids) = counting_repo(17);
        let p = proof(rfs, r#"step("check", "test $(cat v) -lt 9");"#);
        let out = bisect(rfs, repo.path(), &[&ids[0], "HEAD", p.to_str().unwrap()]);
        out.assert_code(0);
        assert!(
            out.stdout.starts_with(&format!("{} is the first bad commit\ncommit {}\n", ids[9], ids[9])),
            "{}",
            out.stdout
        );
        assert!(out.stdout.contains("    set v to 9"), "{}", out.stdout);
        // One sandbox, one full sync, then one re-sync per tested commit.
        let t = tested(&out);
        assert_eq!(out.entries("placement").len(), 1);
        assert_eq!(out.entries("source.verify").len(), 1);
        assert_eq!(out.entries("source.resync").len(), t.len() - 1);
        assert!(t.len() <= 2 + 4, "16 commits: the ends and at most 4 probes, not {t:?}");
        assert_eq!(t[0], (ids[0].clone(), "passed".to_owned()));
        assert_eq!(t[1], (ids[16].clone(), "failed".to_owned()));
        // Each tested commit is the commit its steps ran at.
        let steps: Vec<String> = out.entries("step.start").iter().map(|e| e["commit"].as_str().unwrap().to_owned()).collect();
        assert_eq!(steps, t.iter().map(|(c, _)| c.clone()).collect::<Vec<_>>());
        let end = &out.entries("bisect.end")[0];
        assert_eq!(end["first_changed"], ids[9].as_str());
        assert!(out.evidence().contains("## Bisect"), "{}", out.evidence());
        let v = rfs.cmd(repo.path()).arg("verify").arg(&out.out_dir).output().unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
        rfs.assert_no_leftovers();
    }
}

/// A step that exits 125 marks its commit untestable (as for `git bisect
/// run`); the search steps around it, and when skipped commits hide the
/// change it lists them as `git bisect` does and exits 1.
#[test]
fn a_step_exiting_125_skips_its_commit_and_skips_that_hide_the_change_are_listed() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(12);
    let p = proof(
        &rfs,
        r#"step("check", "if [ $(cat v) -eq 4 ]; then exit 125; fi; test $(cat v) -lt 7");"#,
    );
    let out = bisect(&rfs, repo.path(), &[&ids[0], &ids[11], p.to_str().unwrap()]);
    out.assert_code(0);
    assert!(
        out.stdout
            .starts_with(&format!("{} is the first bad commit", ids[7])),
        "{}",
        out.stdout
    );

    let p = proof(
        &rfs,
        r#"step("check", "if [ $(cat v) -eq 4 ]; then exit 125; fi; test $(cat v) -lt 5");"#,
    );
    let out = bisect(&rfs, repo.path(), &[&ids[0], &ids[11], p.to_str().unwrap()]);
    out.assert_code(1);
    assert!(
        out.stdout
            .contains("There are only 'skip'ped commits left to test."),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains(&format!("{}\n{}\nWe cannot bisect more!", ids[4], ids[5])),
        "{}",
        out.stdout
    );
    assert!(tested(&out).contains(&(ids[4].clone(), "skipped".to_owned())));

    // `--skip` by prefix does the same without running the proof there.
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 5");"#);
    let out = bisect(
        &rfs,
        repo.path(),
        &[
            &ids[0],
            &ids[11],
            p.to_str().unwrap(),
            "--skip",
            &ids[4][..10],
        ],
    );
    out.assert_code(1);
    let skipped = &out
        .entries("bisect.commit")
        .into_iter()
        .find(|e| e["commit"] == ids[4].as_str())
        .unwrap();
    assert_eq!(skipped["reason"], "--skip");
}

/// No change between the ends exits 1; an end the proof cannot be tested
/// at (refused there) exits 3; a range that is not one exits 2.
#[test]
fn no_change_exits_1_an_untestable_end_exits_3_and_a_bad_range_is_a_usage_error() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(6);
    let p = proof(&rfs, r#"step("check", "true");"#);
    let out = bisect(&rfs, repo.path(), &[&ids[0], &ids[5], p.to_str().unwrap()]);
    out.assert_code(1);
    assert!(
        out.stderr.contains("the proof passed at both ends"),
        "{}",
        out.stderr
    );

    // `later/` exists from commit 3 on: the proof is refused before it.
    let p = proof(&rfs, r#"step("check", "true", #{ cwd: "later" });"#);
    let out = bisect(&rfs, repo.path(), &[&ids[0], &ids[5], p.to_str().unwrap()]);
    out.assert_code(3);
    assert!(out.stderr.contains("cannot be tested at"), "{}", out.stderr);

    let out = bisect(&rfs, repo.path(), &[&ids[5], &ids[0], p.to_str().unwrap()]);
    out.assert_code(2);
    assert!(out.stderr.contains("is not an ancestor"), "{}", out.stderr);
}

/// `--jobs 3`: three sandboxes test commits at once, each lane its own
/// verifiable bundle, `bisect.json` beside them; the same commit is found.
#[test]
fn lanes_in_parallel_find_the_same_commit() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(17);
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 9");"#);
    let out = bisect(
        &rfs,
        repo.path(),
        &[&ids[0], "HEAD", p.to_str().unwrap(), "--jobs", "3"],
    );
    out.assert_code(0);
    assert!(
        out.stdout
            .starts_with(&format!("{} is the first bad commit", ids[9])),
        "{}",
        out.stdout
    );
    let ix: Value =
        serde_json::from_str(&std::fs::read_to_string(out.out_dir.join("bisect.json")).unwrap())
            .unwrap();
    assert_eq!(ix["found"]["first_changed"], ids[9].as_str());
    let lanes = ix["lanes"].as_array().unwrap();
    assert_eq!(lanes.len(), 3);
    let mut ids_tested = vec![];
    for l in lanes {
        let lane = Path::new(l.as_str().unwrap());
        assert_bundle_verifies(&rfs, repo.path(), lane);
        let j = std::fs::read_to_string(lane.join("journal.jsonl")).unwrap();
        for l in j.lines() {
            let e: Value = serde_json::from_str(l).unwrap();
            if e["kind"] == "bisect.commit" {
                ids_tested.push(e["payload"]["commit"].as_str().unwrap().to_owned());
            }
        }
    }
    let n = ids_tested.len();
    ids_tested.sort();
    ids_tested.dedup();
    assert_eq!(ids_tested.len(), n, "no commit is tested twice");
    rfs.assert_no_leftovers();
}

/// Ctrl-C stops the bisection: the run ends interrupted, its sandbox is
/// removed and verified gone, rfs exits 130.
#[test]
fn ctrl_c_stops_a_bisection_and_removes_its_sandbox() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(6);
    let p = proof(&rfs, r#"step("slow", "sleep 60");"#);
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let child = rfs
        .cmd(repo.path())
        .arg("bisect")
        .args([&ids[0], &ids[5]])
        .arg(&p)
        .arg("--out")
        .arg(&out_dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_journal(&out_dir, "step.start");
    sigint(&child);
    let out = wait_bounded(child, out_dir);
    out.assert_code(130);
    assert_eq!(out.entries("run.end")[0]["outcome"], "interrupted");
    assert_eq!(out.entries("cleanup.verified").len(), 1);
    rfs.assert_no_leftovers();
}

/// Regression: the first line said "7 commits from …" and the last "6 of
/// 8 commits tested" for the same range.
#[test]
fn bisect_counts_the_same_commits_at_its_start_and_its_end() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(8);
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 5");"#);
    let out = bisect(&rfs, repo.path(), &[&ids[0], "HEAD", p.to_str().unwrap()]);
    out.assert_code(0);
    assert!(
        out.stderr.contains("rfs bisect: 8 commits from "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains(" of 8 commits tested"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

fn lane_journal(lane: &Path) -> Vec<Value> {
    std::fs::read_to_string(lane.join("journal.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn payloads<'a>(j: &'a [Value], kind: &str) -> Vec<&'a Value> {
    j.iter()
        .filter(|e| e["kind"] == kind)
        .map(|e| &e["payload"])
        .collect()
}

/// `--setup FILE` (#36): the setup runs once (at HEAD), writes the tool
/// the proof needs into the home and tampers with a tracked file; every
/// lane forks its checkpoint and moves the source to each commit tested
/// by a re-sync that puts the commit's tree back (the tampered `v`
/// included), so the first bad commit is found; each lane's bundle names
/// the checkpoint and verifies; the checkpoint is gone at the end.
mod with_setup {
    use super::*;
    provider_tests! {
    fn bisect_with_a_setup_runs_it_once_and_every_lane_forks_its_checkpoint(rfs: &Rfs) {
        with_jobs(rfs, 2);
    }
    }

    /// `--jobs 3` on both of Daytona's classes: `container` (the
    /// checkpoint a snapshot) and `linux-vm` (a fork, whose source is busy
    /// while each lane forks it).
    #[test]
    fn daytona_bisect_with_a_setup_and_three_jobs_passes_on_both_classes() {
        for vm in [false, true] {
            let Some(rfs) = (if vm {
                Rfs::daytona_vm()
            } else {
                Rfs::daytona()
            }) else {
                return;
            };
            with_jobs(&rfs, 3);
            rfs.finish();
        }
    }

    fn with_jobs(rfs: &Rfs, jobs: usize) {
        let (repo, ids) = counting_repo(17);
        let setup = proof(
            rfs,
            r#"step("tool", "printf '#!/bin/sh\ntest $(cat v) -lt 9\n' > $HOME/check && chmod +x $HOME/check && echo 0 > v");"#,
        );
        let p = proof(rfs, r#"step("check", "$HOME/check");"#);
        let out = bisect(
            rfs,
            repo.path(),
            &[
                &ids[0],
                "HEAD",
                p.to_str().unwrap(),
                "--jobs",
                &jobs.to_string(),
                "--setup",
                setup.to_str().unwrap(),
            ],
        );
        out.assert_code(0);
        assert!(
            out.stdout
                .starts_with(&format!("{} is the first bad commit", ids[9])),
            "{}\n{}",
            out.stdout,
            out.stderr
        );
        let ix: Value = serde_json::from_str(
            &std::fs::read_to_string(out.out_dir.join("bisect.json")).unwrap(),
        )
        .unwrap();
        // Once: one setup run, one checkpoint, removed and verified gone.
        let cp = ix["setup"]["checkpoint"].as_str().unwrap().to_owned();
        let setup_j = lane_journal(&out.out_dir.join("_setup"));
        assert_eq!(payloads(&setup_j, "checkpoint").len(), 1);
        assert_eq!(payloads(&setup_j, "step.start").len(), 1);
        for r in ix["setup"]["removed"].as_array().unwrap() {
            assert_eq!(r["verified"], true, "{ix}");
        }
        assert!(!rfs.checkpoint_exists(&cp), "checkpoint {cp} left behind");
        let lanes = ix["lanes"].as_array().unwrap();
        assert_eq!(lanes.len(), jobs);
        let mut tested = 0;
        for l in lanes {
            let lane = Path::new(l.as_str().unwrap());
            let j = lane_journal(lane);
            let forked = payloads(&j, "placement.forked");
            assert_eq!(forked.len(), 1, "one fork per lane");
            assert_eq!(forked[0]["checkpoint_id"], cp.as_str());
            assert!(lane.join("setup/journal.jsonl").is_file());
            // The checkpoint's source is bound at its own commit only, then
            // moved by a re-sync to each commit, whose steps ran there.
            let from = payloads(&j, "source.from_checkpoint");
            assert_eq!(from.len(), 1);
            assert_eq!(from[0]["commit"], ids[16].as_str());
            let commits: Vec<&Value> = payloads(&j, "bisect.commit")
                .into_iter()
                .filter(|c| c["result"] != "skipped")
                .collect();
            assert_eq!(payloads(&j, "source.resync").len(), commits.len());
            let steps: Vec<&Value> = payloads(&j, "step.start")
                .iter()
                .map(|s| &s["commit"])
                .collect();
            assert_eq!(
                steps,
                commits.iter().map(|c| &c["commit"]).collect::<Vec<_>>()
            );
            tested += commits.len();
            assert_bundle_verifies(rfs, repo.path(), lane);
        }
        // Two lanes halve the range twice a round; with three, a lane may
        // test a commit another's verdict made moot, but never all 16.
        let bound = if jobs == 2 { 8 } else { 14 };
        assert!(
            tested <= bound,
            "{tested} of 17 commits tested: a search, not a walk"
        );
        rfs.assert_no_leftovers();
    }
}

/// Bug: a lane refused after the setup passed (here its folder is a
/// link) ended `rfs bisect` before the setup's checkpoint was removed,
/// leaving it behind.
#[test]
fn bisect_whose_lane_is_refused_after_its_setup_still_removes_the_checkpoint() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(3);
    let setup = proof(&rfs, r#"step("s", "true");"#);
    let p = proof(&rfs, r#"step("check", "true");"#);
    let out = rfs.state.path().join("out-with-a-linked-lane");
    std::fs::create_dir_all(&out).unwrap();
    std::os::unix::fs::symlink(rfs.state.path().join("elsewhere"), out.join("lane-1")).unwrap();
    let o = rfs
        .cmd(repo.path())
        .arg("bisect")
        .args([&ids[0], "HEAD"])
        .arg(&p)
        .arg("--setup")
        .arg(&setup)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("lane-1"), "{stderr}");
    assert!(
        stderr.contains("removed, verified gone"),
        "the setup's checkpoint was not removed: {stderr}"
    );
    let left: Vec<_> = std::fs::read_dir(rfs.state.path().join("local/checkpoints"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
    rfs.assert_no_leftovers();
}
