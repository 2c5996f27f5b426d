//! `rfs check` and `rfs run` (before anything runs) report unknown
//! functions with a "did you mean", misspelt option keys and wrong
//! argument counts at their source spans; `rfs run -` reads the script
//! from stdin.

mod common;
use common::*;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

fn check(rfs: &Rfs, cwd: &Path, script: &str) -> RunOut {
    let (path, out_dir) = rfs.prepare(script);
    finish(
        rfs.cmd(cwd).arg("check").arg(&path).output().unwrap(),
        out_dir,
    )
}

/// `rfs ARGS` from `cwd` with `script` on its standard input.
fn piped(rfs: &Rfs, cwd: &Path, args: &[&str], out_dir: PathBuf, script: &[u8]) -> RunOut {
    let mut child = rfs
        .cmd(cwd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(script).unwrap();
    finish(child.wait_with_output().unwrap(), out_dir)
}

/// A usage error (exit 2) whose diagnostic holds every one of `needles`.
#[track_caller]
fn assert_diagnosed(out: &RunOut, needles: &[&str]) {
    out.assert_code(2);
    for n in needles {
        assert!(out.stderr.contains(n), "no {n:?} in\n{}", out.stderr);
    }
}

#[test]
fn check_reports_unknown_functions_misspelt_options_and_wrong_arity_at_their_spans() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let cases: &[(&str, &[&str])] = &[
        (
            "let pin = sync_source();\nlet r = stepp(\"build\", \"make\");\n",
            // The span points at the call on line 2.
            &["unknown function `stepp`", "did you mean `step`?", ":2:9]"],
        ),
        (
            "step(\"a\", \"true\", #{ timout: 5 });\nsync_source(#{ allow_dirty: true }, 1);\n",
            // Every problem at once, not only the first.
            &[
                "step(): unknown option `timout`",
                "did you mean `timeout`?",
                "also at 2:1: `sync_source` takes 0 or 1 arguments, not 2",
            ],
        ),
    ];
    for (script, needles) in cases {
        assert_diagnosed(&check(&rfs, repo.path(), script), needles);
    }
}

#[test]
fn run_refuses_a_misspelt_script_before_anything_runs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "step(\"first\", \"touch ran\");\nstep(\"second\", \"true\", #{ retires: 2 });\n",
    );
    assert_diagnosed(
        &out,
        &["unknown option `retires`", "did you mean `retries`?"],
    );
    assert!(!out.out_dir.join("journal.jsonl").exists());
    assert!(rfs.leftovers().is_empty());
}

#[test]
fn run_dash_reads_the_script_from_stdin() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out_dir = rfs.state.path().join("stdin-out");
    let out_arg = out_dir.to_str().unwrap().to_owned();
    let out = piped(
        &rfs,
        repo.path(),
        &["run", "-", "--out", &out_arg],
        out_dir,
        b"import \"rfs/assert\" as check;\nlet r = step(\"cat\", \"cat reproducer-marker.txt\");\ncheck::contains(r.stdout, \"marker\");\nprint(\"from-stdin-ok\");\n",
    );
    out.assert_code(0);
    assert!(out.stdout.contains("from-stdin-ok"), "{}", out.stdout);
    assert_eq!(out.entries("cleanup.verified").len(), 1);
    // A broken script on stdin is diagnosed under the name <stdin>.
    let out = piped(
        &rfs,
        repo.path(),
        &["check", "-"],
        rfs.state.path().join("unused"),
        b"sandbx();\n",
    );
    assert_diagnosed(&out, &["<stdin>:1:1", "did you mean `sandbox`?"]);
    rfs.assert_no_leftovers();
}

/// `rfs check proofs/*.rhai` was a usage error (one script at a time):
/// every script is checked, each problem shown at its line, exit 2 when
/// any has one.
#[test]
fn check_takes_many_scripts_and_reports_each() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (good, _) = rfs.prepare("step(\"x\", \"true\");\n");
    let (bad, _) = rfs.prepare("let r = stepp(\"x\", \"true\");\n");
    let out = rfs
        .cmd(repo.path())
        .arg("check")
        .arg(&good)
        .arg(&bad)
        .arg(&good)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert_eq!(stdout.matches(": ok").count(), 2, "{stdout}");
    assert!(stderr.contains("unknown function `stepp`"), "{stderr}");
    assert!(stderr.contains("1 of 3 scripts have problems"), "{stderr}");
    let ok = rfs
        .cmd(repo.path())
        .arg("check")
        .arg(&good)
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(ok.status.code(), Some(0));
}
