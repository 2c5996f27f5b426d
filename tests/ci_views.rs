//! What `rfs run` leaves for CI besides the bundle (issue #22): JUnit XML
//! with `--junit FILE`, and a Markdown summary appended to the file
//! `GITHUB_STEP_SUMMARY` names; and the console's last line names the
//! evidence as a path that can be opened.

mod common;
use common::*;

const FAILING: &str = r#"
step("build", "echo compiling");
step("unit-tests", "echo 'running 3 tests'; echo 'FAIL wordcount: expected 4, got 2'; exit 1");
"#;

fn ci_run(rfs: &Rfs, repo: &Repo, script: &str) -> (RunOut, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let junit = dir.path().join("junit.xml");
    let summary = dir.path().join("summary.md");
    std::fs::write(&summary, "earlier step's summary\n").unwrap();
    let (script_path, out_dir) = rfs.prepare(script);
    let out = rfs
        .cmd(repo.path())
        .env("GITHUB_STEP_SUMMARY", &summary)
        .arg("run")
        .arg(&script_path)
        .arg("--out")
        .arg(&out_dir)
        .arg("--junit")
        .arg(&junit)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    let xml = std::fs::read_to_string(&junit).unwrap_or_default();
    let md = std::fs::read_to_string(&summary).unwrap();
    (out, xml, md)
}

provider_tests! {
    fn a_failing_run_gives_junit_and_a_step_summary_with_the_failing_line(rfs: &Rfs) {
        let repo = Repo::new();
        let (out, xml, md) = ci_run(rfs, &repo, FAILING);
        out.assert_code(1);
        assert!(xml.contains(r#"<testcase name="build" classname="step""#), "{xml}");
        assert!(xml.contains(r#"<testcase name="unit-tests" classname="step""#), "{xml}");
        assert!(xml.contains(r#"failures="1""#), "{xml}");
        assert!(xml.contains("FAIL wordcount: expected 4, got 2"), "{xml}");
        // Appended, not overwritten: a job's steps share the file.
        assert!(md.starts_with("earlier step's summary\n"), "{md}");
        assert!(md.contains(": failed"), "{md}");
        assert!(md.contains("## What failed"), "{md}");
        assert!(md.contains("FAIL wordcount: expected 4, got 2"), "{md}");
        let commit = repo.head();
        assert!(md.contains(&commit), "the pin is in the summary: {md}");
        rfs.assert_no_leftovers();
    }
}

#[test]
fn a_run_refused_before_any_step_never_reads_green_in_junit() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (out, xml, _) = ci_run(&rfs, &repo, r#"step("x", "true", #{ cwd: "../etc" });"#);
    out.assert_code(3);
    assert!(xml.contains("<testcase name=\"x\""), "{xml}");
    assert!(xml.contains("<error") || xml.contains("<failure"), "{xml}");
    let (out, xml, _) = ci_run(&rfs, &repo, "sandbox(); throw \"broken\";");
    assert_ne!(out.code, 0);
    assert!(
        xml.contains(r#"<testcase name="run" classname="rfs""#),
        "{xml}"
    );
}

#[test]
fn junit_into_a_missing_folder_is_refused_before_the_run() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        "step(\"x\", \"true\");",
        &["--junit", "/nonexistent-dir/junit.xml"],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("--junit"), "{}", out.stderr);
    assert!(!out.out_dir.join("journal.jsonl").exists());
}

#[test]
fn the_last_console_line_names_the_evidence_file_by_its_path() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), "step(\"x\", \"true\");");
    out.assert_code(0);
    let evidence = out.out_dir.join("EVIDENCE.md");
    assert!(
        out.stderr.contains(&format!(
            "rfs: run completed; evidence: {}",
            evidence.display()
        )),
        "{}",
        out.stderr
    );
}

#[test]
fn a_refused_step_is_said_once_not_three_times() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), r#"step("x", "true", #{ cwd: "../etc" });"#);
    out.assert_code(3);
    assert_eq!(
        out.stderr.matches("escapes the synced source root").count(),
        1,
        "{}",
        out.stderr
    );
}

#[test]
fn an_error_shows_no_diagnostic_code_line_unless_verbose() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = r#"step("x", "true", #{ cwd: "../etc" });"#;
    let out = rfs.run(repo.path(), script);
    out.assert_code(3);
    assert!(out.stderr.contains("refused here"), "{}", out.stderr);
    assert!(!out.stderr.contains("rfs::script"), "{}", out.stderr);
    let out = rfs.run_with(repo.path(), script, &["-v"]);
    out.assert_code(3);
    assert!(out.stderr.contains("rfs::script"), "{}", out.stderr);
}

#[test]
fn rfs_verify_says_the_cause_once() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), "step(\"x\", \"echo hi\");");
    out.assert_code(0);
    let log = out.out_dir.join("steps/001-x.stdout.log");
    std::fs::write(&log, "ho\n").unwrap();
    let v = rfs
        .cmd(repo.path())
        .arg("verify")
        .arg(&out.out_dir)
        .output()
        .unwrap();
    assert_eq!(v.status.code(), Some(4));
    let err = String::from_utf8_lossy(&v.stderr);
    assert_eq!(
        err.matches("was changed after it was closed").count(),
        1,
        "{err}"
    );
    let j = rfs
        .cmd(repo.path())
        .args(["journal", "verify"])
        .arg(out.out_dir.join("journal.jsonl"))
        .output()
        .unwrap();
    assert!(j.status.success());
}

/// `collect(path, #{ junit: true })`: each test case of the report the
/// tests wrote is in `--junit`'s output, under a suite named after the
/// proof and the report's suite, with the failure and its message.
#[test]
fn a_collected_junit_report_puts_each_test_case_into_the_runs_junit() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = format!(
        "{JUNIT_3_CASES_STEP}\nlet r = collect(\"reports/junit.xml\", #{{ junit: true }});\nassert(r.files == 1);\n"
    );
    let (out, xml, _) = ci_run(&rfs, &repo, &script);
    out.assert_code(0);
    for case in ["test_adds", "test_divides", "test_subtracts"] {
        assert!(
            xml.contains(&format!(
                "<testcase name=\"{case}\" classname=\"tests.test_calc\""
            )),
            "{case} not in {xml}"
        );
    }
    assert!(xml.contains("/ pytest\" tests=\"3\""), "{xml}");
    assert!(
        xml.contains("<failure message=\"ZeroDivisionError: division by zero\""),
        "{xml}"
    );
    assert!(xml.contains("&gt;       assert 1 / 0"), "{xml}");
    let c = &out.entries("artifact.collected")[0];
    assert_eq!(c["junit"]["tests"], 3);
    assert_eq!(c["junit"]["failures"], 1);
    assert!(out
        .evidence()
        .contains("a JUnit report: 3 test case(s), 1 failed"));
    // The view is the bundle's: `rfs verify` checks the copy it reads.
    let (ok, text) = rfs_verify(&rfs, repo.path(), &out.out_dir);
    assert!(ok, "{text}");
}

#[test]
fn a_malformed_junit_report_fails_its_collect_and_nothing_is_kept() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"
step("tests", "echo '<testsuite><testcase name=\"a\"></testsuite>' > junit.xml");
collect("junit.xml", #{ junit: true });
step("never", "true");
"#,
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("junit.xml is not a JUnit report rfs can read"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("collect(\"junit.xml\", #{ junit: true })"),
        "the call's span: {}",
        out.stderr
    );
    assert!(out.entries("artifact.collected").is_empty());
    assert!(!out.out_dir.join("artifacts/junit.xml").exists());
}

/// Issue #46 item 4: `rfs run --junit out.xml` inside the working tree
/// made the next run refuse ("uncommitted or untracked changes: out.xml").
/// What the person names for rfs to write, in this invocation, is not
/// dirt while untracked; the journal says it was left out.
#[test]
fn rfs_own_junit_output_in_the_tree_does_not_block_the_next_run() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = "step(\"x\", \"true\");";
    let first = rfs.run_with(repo.path(), script, &["--junit", "out.xml"]);
    first.assert_code(0);
    assert!(repo.path().join("out.xml").is_file());
    let next = rfs.run_with(repo.path(), script, &["--junit", "out.xml"]);
    next.assert_code(0);
    let r = &next.entries("source.resolved")[0];
    assert_eq!(r["own_outputs_ignored"], serde_json::json!(["out.xml"]));
    assert_eq!(r["dirty_paths_not_shipped"], serde_json::json!([]));
    // Only what this invocation names: without --junit it is dirt.
    let plain = rfs.run(repo.path(), script);
    plain.assert_code(3);
    assert!(plain.stderr.contains("out.xml"), "{}", plain.stderr);
    // And another untracked file beside it still is.
    repo.write("notes.txt", "draft\n");
    let other = rfs.run_with(repo.path(), script, &["--junit", "out.xml"]);
    other.assert_code(3);
    let refusal = other
        .stderr
        .lines()
        .find(|l| l.contains("uncommitted or untracked changes"))
        .unwrap_or_default();
    assert!(
        refusal.contains("notes.txt") && !refusal.contains("out.xml"),
        "{}",
        other.stderr
    );
}

/// The exemption is for rfs's own untracked output only: a tracked file
/// at the `--junit` path that was modified is an uncommitted edit like
/// any other, and still refuses the run.
#[test]
fn a_modified_tracked_file_at_the_junit_path_still_blocks_the_run() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("out.xml", "<committed/>\n");
    repo.commit("a committed out.xml");
    repo.write("out.xml", "<edited/>\n");
    let out = rfs.run_with(
        repo.path(),
        "step(\"x\", \"true\");",
        &["--junit", "out.xml"],
    );
    out.assert_code(3);
    assert!(
        out.stderr.contains("uncommitted or untracked changes") && out.stderr.contains("out.xml"),
        "{}",
        out.stderr
    );
    assert!(out.entries("step.start").is_empty());
}
