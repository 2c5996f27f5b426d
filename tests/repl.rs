//! `rfs repl`: one run across inputs, errors do not end the session, and
//! the sandbox is destroyed and verified gone when input ends.

mod common;
use common::*;

use std::io::Write;
use std::process::Stdio;

#[test]
fn repl_keeps_one_sandbox_across_inputs_and_cleans_up() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out_dir = rfs.state.path().join("repl-out");
    let mut child = rfs
        .cmd(repo.path())
        .args(["repl", "--out"])
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
        .write_all(
            b"step(\"one\", \"echo $RELAYFLOWS_SANDBOX_ID > id\");\nstep(\"oops\", \"exit 9\");\n\
              let x = 1 +\\\n 41;\nprint(`x=${x}`);\nstep(\"two\", \"cat id\").stdout.trimmed() == sandbox().id\n",
        )
        .unwrap();
    let out = finish(child.wait_with_output().unwrap(), out_dir);
    out.assert_code(0);
    assert!(
        out.stderr.contains("step `oops` failed: exit 9"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.contains("x=42"), "{}", out.stdout);
    assert!(out.stdout.lines().any(|l| l == "true"), "{}", out.stdout);
    assert_eq!(out.entries("placement").len(), 1);
    assert_eq!(out.entries("cleanup.verified").len(), 1);
    rfs.assert_no_leftovers();
}
