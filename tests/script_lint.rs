//! `rfs check` and `rfs run` (before anything runs) report unknown
//! functions with a "did you mean", misspelt option keys and wrong
//! argument counts at their source spans; `rfs run -` reads the script
//! from stdin.

mod common;
use common::*;

use std::io::Write;
use std::process::Stdio;

fn check(rfs: &Rfs, cwd: &std::path::Path, script: &str) -> RunOut {
    let (path, out_dir) = rfs.prepare(script);
    finish(
        rfs.cmd(cwd).arg("check").arg(&path).output().unwrap(),
        out_dir,
    )
}

#[test]
fn check_reports_unknown_function_with_did_you_mean_and_span() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = check(
        &rfs,
        repo.path(),
        "let pin = sync_source();\nlet r = stepp(\"build\", \"make\");\n",
    );
    out.assert_code(2);
    assert!(
        out.stderr.contains("unknown function `stepp`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("did you mean `step`?"),
        "{}",
        out.stderr
    );
    // The span points at the call on line 2.
    assert!(out.stderr.contains(":2:9]"), "{}", out.stderr);
}

#[test]
fn check_reports_misspelt_option_keys_and_wrong_arity_together() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = check(
        &rfs,
        repo.path(),
        "step(\"a\", \"true\", #{ timout: 5 });\nsync_source(#{ allow_dirty: true }, 1);\n",
    );
    out.assert_code(2);
    assert!(
        out.stderr.contains("step(): unknown option `timout`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("did you mean `timeout`?"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("also at 2:1: `sync_source` takes 0 or 1 arguments, not 2"),
        "{}",
        out.stderr
    );
}

#[test]
fn run_refuses_a_misspelt_script_before_anything_runs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "step(\"first\", \"touch ran\");\nstep(\"second\", \"true\", #{ retires: 2 });\n",
    );
    out.assert_code(2);
    assert!(
        out.stderr.contains("unknown option `retires`"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("did you mean `retries`?"),
        "{}",
        out.stderr
    );
    assert!(!out.out_dir.join("journal.jsonl").exists());
    assert!(rfs.leftovers().is_empty());
}

#[test]
fn run_dash_reads_the_script_from_stdin() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out_dir = rfs.state.path().join("stdin-out");
    let mut child = rfs
        .cmd(repo.path())
        .args(["run", "-", "--out"])
        .arg(&out_dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"import \"rfs/assert\" as check;\nlet r = step(\"cat\", \"cat reproducer-marker.txt\");\ncheck::contains(r.stdout, \"marker\");\nprint(\"from-stdin-ok\");\n")
        .unwrap();
    let out = finish(child.wait_with_output().unwrap(), out_dir);
    out.assert_code(0);
    assert!(out.stdout.contains("from-stdin-ok"), "{}", out.stdout);
    assert_eq!(out.entries("cleanup.verified").len(), 1);
    // A broken script on stdin is diagnosed under the name <stdin>.
    let mut child = rfs
        .cmd(repo.path())
        .args(["check", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"sandbx();\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("<stdin>:1:1"), "{err}");
    assert!(err.contains("did you mean `sandbox`?"), "{err}");
    rfs.assert_no_leftovers();
}
