//! The inner loop (issue #23, item 3): writing a proof without fighting
//! the fail-closed rules and without evidence that lies. `--allow-dirty`
//! ships the working tree as it is and every view says the evidence is
//! not reproducible; `:save` says how the saved script can be run.

mod common;
use common::*;

use std::process::Stdio;

fn spawn_watch(
    rfs: &Rfs,
    repo: &Repo,
    script: &std::path::Path,
    extra: &[&str],
) -> (std::process::Child, std::path::PathBuf) {
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let child = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(script)
        .args(["--watch", "--out"])
        .arg(&out_dir)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    (child, out_dir)
}

/// `--watch --allow-dirty`: an edit that is not committed runs again,
/// shipped as a working-tree snapshot and marked not reproducible.
#[test]
fn watch_with_allow_dirty_reruns_on_uncommitted_edits() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("v", "one\n");
    repo.commit("one");
    let script = rfs.state.path().join(format!("watch-{}.rhai", uuid_like()));
    std::fs::write(&script, r#"step("show", "cat v");"#).unwrap();
    let (child, out_dir) = spawn_watch(&rfs, &repo, &script, &["--allow-dirty"]);
    wait_for_journal_entries(&out_dir, "step.end", 1);
    repo.write("v", "edited, not committed\n");
    wait_for_journal_entries(&out_dir, "step.end", 2);
    sigint(&child);
    let out = wait_bounded(child, out_dir);
    out.assert_code(130);
    assert!(
        out.stdout.contains("[show] edited, not committed"),
        "{}",
        out.stdout
    );
    let resolved = out.entries("source.resolved");
    assert!(
        resolved.last().unwrap()["working_tree"]["uncommitted_paths"] == serde_json::json!(["v"]),
        "{resolved:?}"
    );
    assert!(out.evidence().contains("NOT REPRODUCIBLE"));
    rfs.assert_no_leftovers();
}

provider_tests! {
    fn watch_reruns_on_each_commit_and_each_edit_of_the_proof_in_the_same_sandbox(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("v", "one\n");
        repo.commit("one");
        let script = rfs.state.path().join(format!("watch-{}.rhai", uuid_like()));
        std::fs::write(&script, r#"step("show", "cat v");"#).unwrap();
        let (child, out_dir) = spawn_watch(rfs, &repo, &script, &[]);
        wait_for_journal_entries(&out_dir, "step.end", 1);
        repo.write("v", "two\n");
        let two = repo.commit("two");
        wait_for_journal_entries(&out_dir, "step.end", 2);
        std::fs::write(&script, r#"step("show", "cat v; echo edited-proof");"#).unwrap();
        wait_for_journal_entries(&out_dir, "step.end", 3);
        sigint(&child);
        let out = wait_bounded(child, out_dir);
        out.assert_code(130);
        assert_eq!(out.stdout.matches("[show] ").count(), 4, "{}", out.stdout);
        assert!(out.stdout.contains("[show] two") && out.stdout.contains("[show] edited-proof"), "{}", out.stdout);
        // One sandbox, moved by one re-sync to the new commit.
        assert_eq!(out.entries("placement").len(), 1);
        let resyncs = out.entries("source.resync");
        assert_eq!(resyncs.len(), 1);
        assert_eq!(resyncs[0]["commit"], two.as_str());
        // The edited proof is in the bundle, with its digest journaled.
        let module = &out.entries("bundle.module")[0];
        assert!(module["path"].as_str().unwrap().starts_with("bundle/watch/pass-3/"), "{module}");
        let v = rfs.cmd(repo.path()).arg("verify").arg(&out.out_dir).output().unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
        rfs.assert_no_leftovers();
    }

    fn allow_dirty_ships_the_working_tree_and_every_view_says_it_is_not_reproducible(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("app.txt", "committed\n");
        let head = repo.commit("base");
        // A new, uncommitted proof and an edit: what writing a proof is.
        repo.write("app.txt", "edited, not committed\n");
        repo.write("proofs/new.rhai", r#"step("see", "cat app.txt; echo proofs/*");"#);
        let status_before = repo.git(&["status", "--porcelain"]);
        let index_before = std::fs::read(repo.path().join(".git/index")).unwrap();
        let run = |extra: &[&str]| {
            let out_dir = rfs.state.path().join("out").join(uuid_like());
            let out = rfs
                .cmd(repo.path())
                .arg("run")
                .arg("proofs/new.rhai")
                .arg("--out")
                .arg(&out_dir)
                .args(extra)
                .output()
                .unwrap();
            finish(out, out_dir)
        };
        let refused = run(&[]);
        refused.assert_code(3);
        assert!(refused.stderr.contains("--allow-dirty"), "{}", refused.stderr);

        let out = run(&["--allow-dirty"]);
        out.assert_code(0);
        assert!(out.stdout.contains("edited, not committed"), "{}", out.stdout);
        assert!(out.stdout.contains("new.rhai"), "{}", out.stdout);
        let resolved = &out.entries("source.resolved")[0];
        assert_eq!(resolved["working_tree"]["base_commit"], head.as_str());
        assert_eq!(
            resolved["working_tree"]["uncommitted_paths"],
            serde_json::json!(["app.txt", "proofs/new.rhai"])
        );
        // The pin is a snapshot commit on top of HEAD, not HEAD.
        let pinned = out.entries("source.pin")[0]["commit"].as_str().unwrap().to_owned();
        assert_ne!(pinned, head);
        // Console, EVIDENCE.md, report.html, the attestation, rfs verify.
        assert!(out.stderr.contains("NOT REPRODUCIBLE"), "{}", out.stderr);
        assert!(out.evidence().contains("> **NOT REPRODUCIBLE"), "{}", out.evidence());
        let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
        assert!(html.contains("id=\"not-reproducible\""));
        let att: serde_json::Value = serde_json::from_str(
            &std::fs::read_to_string(out.out_dir.join("attestation.intoto.json")).unwrap(),
        )
        .unwrap();
        use base64::Engine as _;
        let payload = base64::engine::general_purpose::STANDARD
            .decode(att["payload"].as_str().unwrap())
            .unwrap();
        let st: serde_json::Value = serde_json::from_slice(&payload).unwrap();
        assert_eq!(st["predicate"]["run"]["reproducible"], false, "{st}");
        assert_eq!(st["predicate"]["run"]["workingTreeOf"]["gitCommit"], head.as_str());
        let v = rfs.cmd(repo.path()).arg("verify").arg(&out.out_dir).output().unwrap();
        assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
        let vout = String::from_utf8_lossy(&v.stdout);
        assert!(vout.contains("warning: NOT REPRODUCIBLE"), "{vout}");
        // The user's repository is as it was: no ref, index or file moved.
        assert_eq!(repo.head(), head);
        assert_eq!(repo.git(&["status", "--porcelain"]), status_before);
        assert_eq!(std::fs::read(repo.path().join(".git/index")).unwrap(), index_before);
        rfs.assert_no_leftovers();
    }
}

/// A committed run never says it is not reproducible (the flag changes
/// nothing on a clean tree).
#[test]
fn allow_dirty_on_a_clean_tree_is_an_ordinary_reproducible_run() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/ok.rhai", r#"step("x", "true");"#);
    let head = repo.commit("proof");
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let out = rfs
        .cmd(repo.path())
        .args(["run", "proofs/ok.rhai", "--allow-dirty", "--out"])
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(0);
    assert_eq!(out.entries("source.pin")[0]["commit"], head.as_str());
    assert!(out.entries("source.resolved")[0]
        .get("working_tree")
        .is_none());
    assert!(!out.evidence().contains("NOT REPRODUCIBLE"));
}

/// `:save` into the repository told the user to `rfs run` a file that
/// the run then refused (it dirtied the tree). Now it says to commit it
/// (or to try it with `--allow-dirty`); saved outside, it says how to run
/// it, and that file runs as said.
#[test]
fn repl_save_into_the_repository_says_to_commit_it_and_outside_says_how_to_run_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let outside = rfs.state.path().join(format!("saved-{}.rhai", uuid_like()));
    let out = rfs.repl(
        repo.path(),
        format!(
            "step(\"hello\", \"echo hi\");\n:save proofs-new.rhai\n:save {}\n",
            outside.display()
        )
        .as_bytes(),
        &[],
    );
    out.assert_code(0);
    assert!(
        out.stdout.contains("inside the repository")
            && out.stdout.contains("git add proofs-new.rhai && git commit"),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains("rfs run --allow-dirty proofs-new.rhai"),
        "{}",
        out.stdout
    );
    let hint = format!("run it from here with `rfs run {}`", outside.display());
    assert!(out.stdout.contains(&hint), "{}", out.stdout);
    // What it says works: the file saved outside runs from the repository
    // (after the one saved inside is committed).
    repo.commit("saved proof");
    let run_dir = rfs.state.path().join("out").join(uuid_like());
    let ran = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(&outside)
        .arg("--out")
        .arg(&run_dir)
        .output()
        .unwrap();
    let ran = finish(ran, run_dir);
    ran.assert_code(0);
    assert!(ran.stdout.contains("hi"), "{}", ran.stdout);
}

/// `rfs repl --allow-dirty`: the session ships the working tree too, and
/// its journal says the evidence is not reproducible.
#[test]
fn repl_with_allow_dirty_ships_the_working_tree() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("draft.txt", "not committed yet\n");
    let out = rfs.repl(
        repo.path(),
        b"step(\"see\", \"cat draft.txt\");\n",
        &["--allow-dirty"],
    );
    out.assert_code(0);
    assert!(out.stdout.contains("not committed yet"), "{}", out.stdout);
    let resolved = &out.entries("source.resolved")[0];
    assert_eq!(
        resolved["working_tree"]["uncommitted_paths"],
        serde_json::json!(["draft.txt"])
    );
    assert!(out.stderr.contains("NOT REPRODUCIBLE"), "{}", out.stderr);
}
