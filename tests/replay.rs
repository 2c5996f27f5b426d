//! `rfs replay OUT`: the bundled script re-runs against the pinned commit
//! from the local repository in a fresh sandbox, whatever HEAD is; the new
//! journal says what it replays; steps are compared (exit, and stdout with
//! `--strict`); refusals name what is missing.

mod common;
use common::*;

use std::path::Path;

fn replay(rfs: &Rfs, cwd: &Path, bundle: &Path, args: &[&str]) -> RunOut {
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let o = rfs
        .cmd(cwd)
        .arg("replay")
        .arg(bundle)
        .arg("--out")
        .arg(&out_dir)
        .args(args)
        .output()
        .expect("rfs runs");
    finish(o, out_dir)
}

#[test]
fn replay_binds_the_pinned_commit_whatever_head_is() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let original = rfs.run(repo.path(), r#"step("show", "cat reproducer-marker.txt");"#);
    original.assert_code(0);
    let pinned = repo.head();
    repo.write("reproducer-marker.txt", "changed after the run\n");
    repo.commit("move HEAD on");
    assert_ne!(repo.head(), pinned);

    let r = replay(&rfs, repo.path(), &original.out_dir, &["--strict"]);
    r.assert_code(0);
    assert!(r.stdout.contains("[show] marker"), "{}", r.stdout);
    assert!(r.stdout.contains("all 1 steps match"), "{}", r.stdout);
    assert_eq!(r.entries("source.pin")[0]["commit"], pinned.as_str());
    let of = &r.entries("run.start")[0]["replay_of"];
    let orig_start = &original.entries("run.start")[0];
    assert_eq!(of["run_id"], orig_start["run_id"]);
    let head = rfs::verify::verify_journal(&original.out_dir.join("journal.jsonl"))
        .unwrap()
        .head;
    assert_eq!(of["journal_head"], head.as_str());
    assert_eq!(of["commit"], pinned.as_str());
    rfs.assert_no_leftovers();
}

#[test]
fn replay_refuses_a_commit_absent_from_the_local_repository() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // History of its own (two fresh repositories can share a commit id).
    repo.write("only-here.txt", &uuid_like());
    repo.commit("only here");
    let original = rfs.run(repo.path(), r#"step("show", "true");"#);
    original.assert_code(0);
    let elsewhere = Repo::new();
    elsewhere.write("other.txt", "x\n");
    elsewhere.commit("unrelated history");
    let r = replay(&rfs, elsewhere.path(), &original.out_dir, &[]);
    r.assert_code(3);
    assert!(
        r.stderr.contains(&format!("commit {}", repo.head()))
            && r.stderr.contains("not in the local repository"),
        "{}",
        r.stderr
    );
    assert!(!r.out_dir.exists(), "nothing ran");
}

#[test]
fn replay_names_the_steps_that_differ() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = r#"
step("same", "echo stable");
step("depends", "exit " + arg("code"), #{ allow_failure: true });
step("run-id", "echo $RELAYFLOWS_RUN_ID");
"#;
    let original = rfs.run_with(repo.path(), script, &["--var", "code=0"]);
    original.assert_code(0);

    // Same inputs: exits match; stdout of `run-id` differs only under --strict.
    let r = replay(&rfs, repo.path(), &original.out_dir, &[]);
    r.assert_code(0);
    let r = replay(&rfs, repo.path(), &original.out_dir, &["--strict"]);
    r.assert_code(1);
    assert!(
        r.stdout.contains("steps that differ: run-id"),
        "{}",
        r.stdout
    );

    // Another exit code for one step.
    let r = replay(&rfs, repo.path(), &original.out_dir, &["--var", "code=2"]);
    r.assert_code(1);
    assert!(
        r.stdout.contains("steps that differ: depends"),
        "{}",
        r.stdout
    );
    let row = r.stdout.lines().find(|l| l.contains("depends")).unwrap();
    assert!(
        row.contains("exit 0") && row.contains("exit 2") && row.contains("DIFFERS"),
        "{row}"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn replay_refuses_a_tampered_bundle() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let original = rfs.run(repo.path(), r#"step("show", "true");"#);
    original.assert_code(0);
    let script = std::fs::read_dir(original.out_dir.join("bundle"))
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    std::fs::write(&script, "step(\"show\", \"rm -rf ~\");\n").unwrap();
    let r = replay(&rfs, repo.path(), &original.out_dir, &[]);
    r.assert_code(4);
    assert!(r.stderr.contains("was changed"), "{}", r.stderr);
    assert!(!r.out_dir.exists(), "nothing ran");
}

/// A replayed bundle chose where rfs was started: a re-sealed bundle whose
/// `run.start.invocation_dir` was `<its checkout>/../private` made the
/// victim's replay treat a sibling clone (one sharing the commit) as the
/// repository, and `put()` read that clone's uncommitted files into a
/// step. A bundle is data: the repository is the one the person runs
/// `rfs replay` in, and a folder of it the bundle names must be inside
/// it.
#[test]
fn a_replayed_bundle_cannot_choose_a_repository_outside_the_one_replay_runs_in() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("secret.txt", "MINE\n");
    repo.commit("a file put() ships");
    let original = rfs.run(
        repo.path(),
        r#"put("secret.txt", "s.txt"); step("send", "cat s.txt");"#,
    );
    original.assert_code(0);
    // A sibling clone sharing the commit, with a file of its own.
    let private = repo.path().with_file_name(format!(
        "{}-private",
        repo.path().file_name().unwrap().to_string_lossy()
    ));
    let cloned = std::process::Command::new("git")
        .args(["clone", "-q"])
        .arg(repo.path())
        .arg(&private)
        .status()
        .unwrap();
    assert!(cloned.success());
    std::fs::write(private.join("secret.txt"), "SIBLING-SECRET\n").unwrap();
    let committed = std::process::Command::new("git")
        .current_dir(&private)
        .args([
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qam",
            "private",
        ])
        .status()
        .unwrap();
    assert!(committed.success());
    // The forger's edit: the run "started" in the sibling.
    let journal = original.out_dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&journal).unwrap();
    let mut lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let escaped = format!(
        "{}/../{}",
        repo.path().display(),
        private.file_name().unwrap().to_string_lossy()
    );
    lines[0]["payload"]["invocation_dir"] = serde_json::Value::String(escaped);
    let edited: String = lines.iter().map(|v| format!("{v}\n")).collect();
    std::fs::write(&journal, edited).unwrap();
    rechain(&journal);
    // Re-sealed, unsigned: the attestation made anew over the edit.
    rfs::seal::seal(&original.out_dir, None).unwrap();
    let r = replay(&rfs, repo.path(), &original.out_dir, &[]);
    let all = format!("{}{}", r.stdout, r.stderr);
    let mut logs = String::new();
    for f in files_under(&r.out_dir) {
        logs.push_str(&String::from_utf8_lossy(
            &std::fs::read(f).unwrap_or_default(),
        ));
    }
    assert!(
        !all.contains("SIBLING-SECRET") && !logs.contains("SIBLING-SECRET"),
        "the replay read the sibling clone: {all}"
    );
    assert!(all.contains("outside the repository"), "{all}");
    let _ = std::fs::remove_dir_all(&private);
    rfs.assert_no_leftovers();
}
