//! `rfs test` (issue #23, item 1): a folder of proofs as a suite, each
//! proof in its own sandbox with its own bundle, several at once, with
//! retries, fail-fast, filters, JSON events, JUnit, an index, and a
//! Ctrl-C that cancels every proof and still removes every sandbox.

mod common;
use common::*;

#[path = "proof_suites/one_home.rs"]
mod one_home;
#[path = "proof_suites/real_python.rs"]
mod real_python;
#[path = "proof_suites/setup_fork.rs"]
mod setup_fork;

use serde_json::Value;
use std::path::{Path, PathBuf};

/// A repository holding `proofs/` with these files, committed.
fn repo_with(proofs: &[(&str, &str)]) -> Repo {
    let repo = Repo::new();
    for (name, body) in proofs {
        repo.write(&format!("proofs/{name}"), body);
    }
    repo.commit("proofs");
    repo
}

struct Suite {
    code: i32,
    stdout: String,
    stderr: String,
    dir: PathBuf,
}

impl Suite {
    fn index(&self) -> Value {
        let t = std::fs::read_to_string(self.dir.join("index.json"))
            .unwrap_or_else(|e| panic!("no index.json: {e}\n{}", self.stderr));
        serde_json::from_str(&t).unwrap()
    }

    fn verdicts(&self) -> Vec<(String, String)> {
        self.index()["proofs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                (
                    p["name"].as_str().unwrap().to_owned(),
                    p["verdict"].as_str().unwrap().to_owned(),
                )
            })
            .collect()
    }

    /// The last attempt's bundle of proof `name`.
    fn bundle(&self, name: &str) -> PathBuf {
        let ix = self.index();
        let p = ix["proofs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["name"] == name)
            .unwrap_or_else(|| panic!("no proof {name} in {ix}"));
        PathBuf::from(
            p["attempts"].as_array().unwrap().last().unwrap()["out_dir"]
                .as_str()
                .unwrap(),
        )
    }
}

fn rfs_test(rfs: &Rfs, repo: &Path, args: &[&str]) -> Suite {
    let dir = rfs.state.path().join("suites").join(uuid_like());
    let out = rfs
        .cmd(repo)
        .arg("test")
        .arg("--out")
        .arg(&dir)
        .args(args)
        .output()
        .expect("rfs test runs");
    let s = Suite {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        dir,
    };
    rfs.console(&s.stdout);
    rfs.console(&s.stderr);
    s
}

fn sandbox_of(bundle: &Path) -> String {
    let t = std::fs::read_to_string(bundle.join("journal.jsonl")).unwrap();
    t.lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|e| e["kind"] == "placement")
        .map(|e| e["payload"]["sandbox_id"].as_str().unwrap().to_owned())
        .expect("a placement")
}

provider_tests! {
    fn every_proof_runs_in_its_own_sandbox_and_a_failing_one_fails_the_suite(rfs: &Rfs) {
        let repo = repo_with(&[
            ("a.rhai", r#"step("a", "echo from a > a.txt && cat a.txt");"#),
            ("b.rhai", r#"step("b", "echo from b");"#),
            ("c.rhai", r#"step("c", "echo $RELAYFLOWS_SANDBOX_ID");"#),
            ("broken.rhai", r#"step("bad", "echo the last words; exit 7");"#),
            ("_shared.rhai", "fn helper() { 1 }"),
        ]);
        let s = rfs_test(rfs, repo.path(), &["--jobs", "2"]);
        assert_eq!(s.code, 1, "{}", s.stderr);
        assert_eq!(
            s.verdicts(),
            [
                ("proofs/a.rhai".to_owned(), "passed".to_owned()),
                ("proofs/b.rhai".into(), "passed".into()),
                ("proofs/broken.rhai".into(), "failed".into()),
                ("proofs/c.rhai".into(), "passed".into()),
            ]
        );
        // One sandbox per proof, never shared, and every bundle verifies.
        let mut ids: Vec<String> = ["a", "b", "c", "broken"]
            .iter()
            .map(|n| sandbox_of(&s.bundle(&format!("proofs/{n}.rhai"))))
            .collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 4, "{ids:?}");
        for n in ["a", "broken"] {
            let v = rfs.cmd(repo.path()).arg("verify").arg(s.bundle(&format!("proofs/{n}.rhai"))).output().unwrap();
            assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
        }
        // The console: a line per proof, the failure with its output tail.
        assert!(s.stderr.contains("PASS") && s.stderr.contains("proofs/a.rhai"), "{}", s.stderr);
        assert!(s.stderr.contains("--- FAIL proofs/broken.rhai"), "{}", s.stderr);
        assert!(s.stderr.contains("| [bad] the last words"), "{}", s.stderr);
        assert!(s.stderr.contains("4 proofs run: 3 passed, 1 failed"), "{}", s.stderr);
        let md = std::fs::read_to_string(s.dir.join("index.md")).unwrap();
        assert!(md.contains("| `proofs/broken.rhai` | FAIL |"), "{md}");
        assert!(md.contains("(proofs-a/EVIDENCE.md)"), "{md}");
        rfs.assert_no_leftovers();
    }

    fn ctrl_c_cancels_every_running_proof_and_each_sandbox_is_verified_gone(rfs: &Rfs) {
        let sleepy = r#"step("wait", "sleep 60");"#;
        let repo = repo_with(&[("a.rhai", sleepy), ("b.rhai", sleepy), ("c.rhai", sleepy)]);
        let dir = rfs.state.path().join("suites").join(uuid_like());
        let child = rfs
            .cmd(repo.path())
            .args(["test", "--jobs", "2", "--out"])
            .arg(&dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        wait_for_journal(&dir.join("proofs-a"), "step.start");
        wait_for_journal(&dir.join("proofs-b"), "step.start");
        sigint(&child);
        let out = wait_bounded(child, dir.clone());
        assert_eq!(out.code, 130, "{}", out.stderr);
        let s = Suite { code: out.code, stdout: out.stdout, stderr: out.stderr, dir };
        assert_eq!(
            s.verdicts(),
            [("proofs/a.rhai".to_owned(), "interrupted".to_owned()), ("proofs/b.rhai".into(), "interrupted".into())]
        );
        assert_eq!(s.index()["not_run"], serde_json::json!(["proofs/c.rhai"]));
        for n in ["a", "b"] {
            let t = std::fs::read_to_string(s.bundle(&format!("proofs/{n}.rhai")).join("journal.jsonl")).unwrap();
            assert!(t.contains("\"outcome\":\"interrupted\""), "{t}");
            assert!(t.contains("\"kind\":\"cleanup.verified\""), "{t}");
        }
        rfs.assert_no_leftovers();
    }
}

/// A refused proof (a cwd that escapes the synced root) makes the suite
/// exit 3, as `rfs run` does, even next to a failing one.
#[test]
fn a_suite_with_a_refused_proof_exits_3() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        ("escape.rhai", r#"step("x", "true", #{ cwd: "../.." });"#),
        ("fails.rhai", r#"step("x", "exit 1");"#),
    ]);
    let s = rfs_test(&rfs, repo.path(), &[]);
    assert_eq!(s.code, 3, "{}", s.stderr);
    assert!(s.stderr.contains("REFUSED"), "{}", s.stderr);
}

/// `--fail-fast`: once a proof has not passed, no new one starts; the
/// rest are listed as not run.
#[test]
fn fail_fast_starts_no_proof_after_a_failure() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        ("1-fails.rhai", r#"step("x", "exit 1");"#),
        ("2-ok.rhai", r#"step("x", "true");"#),
        ("3-ok.rhai", r#"step("x", "true");"#),
    ]);
    let s = rfs_test(&rfs, repo.path(), &["--jobs", "1", "--fail-fast"]);
    assert_eq!(s.code, 1, "{}", s.stderr);
    assert_eq!(s.verdicts().len(), 1, "{}", s.stderr);
    assert_eq!(
        s.index()["not_run"],
        serde_json::json!(["proofs/2-ok.rhai", "proofs/3-ok.rhai"])
    );
    assert!(s.stderr.contains("2 not run"), "{}", s.stderr);
}

/// `--retries`: a proof that fails and then passes is flaky (the suite
/// passes), each attempt keeps its own bundle; a proof that keeps failing
/// fails after every attempt.
#[test]
fn retries_turn_a_failure_that_passes_again_into_flaky() {
    let rfs = Rfs::new(Prov::Local);
    let marker = rfs.state.path().join("marker");
    let repo = repo_with(&[(
        "flaky.rhai",
        r#"step("x", "if [ -e \"$M\" ]; then echo second; else touch \"$M\"; echo first; exit 1; fi", #{ env: #{ M: arg("marker") } });"#,
    )]);
    let var = format!("marker={}", marker.display());
    let s = rfs_test(
        &rfs,
        repo.path(),
        &["--retries", "2", "--isolation", "none", "--var", &var],
    );
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(
        s.verdicts(),
        [("proofs/flaky.rhai".to_owned(), "flaky".to_owned())]
    );
    assert_eq!(
        s.index()["proofs"][0]["attempts"].as_array().unwrap().len(),
        2
    );
    assert!(s.dir.join("proofs-flaky/journal.jsonl").is_file());
    assert!(s.dir.join("proofs-flaky.attempt-2/journal.jsonl").is_file());
    assert!(
        s.stderr.contains("RETRY") && s.stderr.contains("FLAKY"),
        "{}",
        s.stderr
    );

    let repo = repo_with(&[("always.rhai", r#"step("x", "exit 1");"#)]);
    let s = rfs_test(&rfs, repo.path(), &["--retries", "1"]);
    assert_eq!(s.code, 1, "{}", s.stderr);
    assert_eq!(
        s.index()["proofs"][0]["attempts"].as_array().unwrap().len(),
        2
    );
}

/// Filters by name, explicit paths, and `--json`: stdout is only the
/// suite's events, one JSON object a line, in order.
#[test]
fn filters_paths_and_json_events() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        ("build.rhai", r#"step("x", "true");"#),
        ("build-docs.rhai", r#"step("x", "true");"#),
        ("lint.rhai", r#"step("x", "true");"#),
    ]);
    let s = rfs_test(
        &rfs,
        repo.path(),
        &["-k", "build", "--skip", "docs", "--json"],
    );
    assert_eq!(s.code, 0, "{}", s.stderr);
    let kinds: Vec<String> = s
        .stdout
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).expect("a JSON line")["kind"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        kinds,
        ["start", "proof_start", "proof_end", "end"],
        "{}",
        s.stdout
    );
    assert_eq!(
        s.verdicts(),
        [("proofs/build.rhai".to_owned(), "passed".to_owned())]
    );

    let s = rfs_test(&rfs, repo.path(), &["proofs/lint.rhai"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(
        s.verdicts(),
        [("proofs/lint.rhai".to_owned(), "passed".to_owned())]
    );

    let s = rfs_test(&rfs, repo.path(), &["-k", "nothing-matches"]);
    assert_eq!(s.code, 2, "{}", s.stderr);
    assert!(s.stderr.contains("no proof name matches"), "{}", s.stderr);
}

/// `--junit`: a test suite per proof with a case per step, the failed
/// step a failure; the suite's events are in `suite.jsonl`.
#[test]
fn junit_has_a_test_suite_per_proof_and_a_case_per_step() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        (
            "ok.rhai",
            r#"step("first", "true"); step("second", "true");"#,
        ),
        ("no.rhai", r#"step("boom", "exit 2");"#),
    ]);
    let junit = rfs.state.path().join("junit.xml");
    let s = rfs_test(&rfs, repo.path(), &["--junit", junit.to_str().unwrap()]);
    assert_eq!(s.code, 1, "{}", s.stderr);
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("<testsuite name=\"proofs/ok.rhai\""), "{x}");
    assert!(x.contains("<testcase name=\"second\""), "{x}");
    assert!(x.contains("<testsuite name=\"proofs/no.rhai\""), "{x}");
    assert!(x.contains("<failure"), "{x}");
    let events = std::fs::read_to_string(s.dir.join("suite.jsonl")).unwrap();
    assert_eq!(events.lines().count(), 2 + 2 * 2, "{events}");
}

/// With no path, `rfs test` runs `rfs.toml`'s `proofs` folder (relative
/// to the file) with its `jobs`, its proofs named from the repository's
/// root wherever in it rfs started.
#[test]
fn rfs_toml_names_the_proofs_folder_and_the_jobs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("checks/only.rhai", r#"step("x", "true");"#);
    repo.write("proofs/other.rhai", r#"step("x", "exit 1");"#);
    repo.write("rfs.toml", "proofs = \"checks\"\njobs = 3\n");
    repo.write("sub/keep", "");
    repo.commit("config");
    let s = rfs_test(&rfs, &repo.path().join("sub"), &["--json"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert_eq!(s.index()["jobs"], 3);
    assert_eq!(
        s.verdicts(),
        [("checks/only.rhai".to_owned(), "passed".to_owned())]
    );
}

/// `collect(path, #{ junit: true })` in a proof: each test case of the
/// report is in the suite's JUnit, under `<proof> / <its suite>`.
#[test]
fn a_collected_junit_report_puts_each_test_case_into_the_suites_junit() {
    let script =
        format!("{JUNIT_3_CASES_STEP}\ncollect(\"reports/junit.xml\", #{{ junit: true }});\n");
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[("py.rhai", &script)]);
    let junit = rfs.state.path().join("junit.xml");
    let s = rfs_test(&rfs, repo.path(), &["--junit", junit.to_str().unwrap()]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    let x = std::fs::read_to_string(&junit).unwrap();
    assert!(x.contains("<testsuite name=\"proofs/py.rhai\""), "{x}");
    assert!(
        x.contains("<testsuite name=\"proofs/py.rhai / pytest\" tests=\"3\" skipped=\"0\" errors=\"0\" failures=\"1\""),
        "{x}"
    );
    for case in ["test_adds", "test_divides", "test_subtracts"] {
        assert!(
            x.contains(&format!("<testcase name=\"{case}\"")),
            "{case} not in {x}"
        );
    }
    assert!(
        x.contains("<failure message=\"ZeroDivisionError: division by zero\""),
        "{x}"
    );
}

/// A forgotten `--setup` failed every proof (exit 127: the tool the setup
/// installs was missing) while `proofs/_setup.rhai` sat beside them, and
/// nothing said so. A file that looks like a setup and is not used is
/// named, with the flag that runs it; once it is used, nothing is said.
#[test]
fn a_setup_beside_the_proofs_that_was_not_used_is_named_with_the_flag() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        (
            "_setup.rhai",
            r#"step("install", "mkdir -p $HOME/bin && printf '#!/bin/sh\necho tool\n' > $HOME/bin/tool && chmod +x $HOME/bin/tool");"#,
        ),
        ("uses_tool.rhai", r#"step("use", "$HOME/bin/tool");"#),
    ]);
    let s = rfs_test(&rfs, repo.path(), &[]);
    assert_ne!(s.code, 0, "{}", s.stderr);
    let note = "proofs/_setup.rhai looks like a suite setup and was not used";
    assert!(s.stderr.contains(note), "{}", s.stderr);
    assert!(
        s.stderr.contains("pass --setup proofs/_setup.rhai"),
        "{}",
        s.stderr
    );
    let s = rfs_test(&rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    assert!(!s.stderr.contains(note), "{}", s.stderr);
    // The checkpoint's removal is said once ("verified gone (gone: …" was
    // doubled, #46 item 8).
    let all = format!("{}{}", s.stdout, s.stderr);
    assert!(
        all.contains("removed, verified gone (the provider no longer has it: "),
        "{all}"
    );
    assert!(!all.contains("gone (gone"), "{all}");
    rfs.assert_no_leftovers();
}

/// A failed setup said only `exit 101`, with none of the output that
/// explains it (a proof's failure shows its last lines). It shows them
/// too, on the console and in the index.
#[test]
fn a_failing_setup_shows_the_last_lines_of_its_output() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        (
            "_setup.rhai",
            r#"step("build", "echo compiling; echo 'error: could not find libfoo' >&2; exit 101");"#,
        ),
        ("a.rhai", r#"step("a", "true");"#),
    ]);
    let s = rfs_test(&rfs, repo.path(), &["--setup", "proofs/_setup.rhai"]);
    assert_ne!(s.code, 0, "{}", s.stderr);
    let all = format!("{}{}", s.stdout, s.stderr);
    assert!(all.contains("SETUP FAIL"), "{all}");
    assert!(
        all.contains("lines of output:") && all.contains("error: could not find libfoo"),
        "{all}"
    );
    let tail = s.index()["setup"]["output_tail"].to_string();
    assert!(tail.contains("could not find libfoo"), "{tail}");
    rfs.assert_no_leftovers();
}

/// `rfs verify` of a suite's folder said only "cannot read
/// …/journal.jsonl". It verifies every bundle in it and the index
/// against them: a bundle tampered with, or an index naming a folder
/// outside, fails it.
#[test]
fn rfs_verify_of_a_suite_folder_verifies_every_bundle_and_the_index() {
    let rfs = Rfs::new(Prov::Local);
    let repo = repo_with(&[
        ("a.rhai", r#"step("a", "echo a");"#),
        ("b.rhai", r#"step("b", "echo b");"#),
    ]);
    let s = rfs_test(&rfs, repo.path(), &[]);
    assert_eq!(s.code, 0, "{}", s.stderr);
    let verify = |dir: &Path| {
        let o = rfs
            .cmd(repo.path())
            .arg("verify")
            .arg(dir)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&o.stdout).to_string()
            + String::from_utf8_lossy(&o.stderr).as_ref();
        (o.status.code(), text)
    };
    let (code, text) = verify(&s.dir);
    assert_eq!(code, Some(0), "{text}");
    assert!(text.contains("verified (2 bundles)"), "{text}");
    assert!(text.contains("ok: index.json"), "{text}");

    // An index naming a folder outside the suite's.
    let ix_path = s.dir.join("index.json");
    let ix = std::fs::read_to_string(&ix_path).unwrap();
    let a = s.bundle("proofs/a.rhai");
    let elsewhere = rfs.state.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        &ix_path,
        ix.replace(a.to_str().unwrap(), elsewhere.to_str().unwrap()),
    )
    .unwrap();
    let (code, text) = verify(&s.dir);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("not a bundle of this folder"), "{text}");
    std::fs::write(&ix_path, &ix).unwrap();

    // A bundle's journal changed.
    let j = a.join("journal.jsonl");
    let journal = std::fs::read_to_string(&j).unwrap();
    std::fs::write(&j, journal.replacen("echo a", "echo A", 1)).unwrap();
    let (code, text) = verify(&s.dir);
    assert_ne!(code, Some(0), "{text}");
    assert!(text.contains("FAILED: "), "{text}");
    rfs.assert_no_leftovers();
}
