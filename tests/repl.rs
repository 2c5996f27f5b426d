//! `rfs repl`: one run across inputs, errors do not end the session, and
//! the sandbox is destroyed and verified gone when input ends.

mod common;
use common::*;

#[test]
fn repl_keeps_one_sandbox_across_inputs_and_cleans_up() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = repl_with_input(
        &rfs,
        &repo,
        b"step(\"one\", \"echo $RELAYFLOWS_SANDBOX_ID > id\");\nstep(\"oops\", \"exit 9\");\n\
          let x = 1 +\\\n 41;\nprint(`x=${x}`);\nstep(\"two\", \"cat id\").stdout.trimmed() == sandbox().id\n",
    );
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

fn repl_with_input(rfs: &Rfs, repo: &Repo, input: &[u8]) -> RunOut {
    rfs.repl(repo.path(), input, &[])
}

/// Piped input that ended inside a statement was dropped without a word.
#[test]
fn unfinished_repl_input_at_end_of_stdin_is_reported_not_dropped() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = repl_with_input(
        &rfs,
        &repo,
        b"print(\"done\");\nstep(\"late\", \"echo ran\"\n",
    );
    out.assert_code(1);
    assert!(out.stdout.contains("done"), "{}", out.stdout);
    assert!(
        out.stderr.contains("unfinished statement"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("step(\"late\""), "{}", out.stderr);
    assert_eq!(out.entries("run.end")[0]["outcome"], "failed");
    rfs.assert_no_leftovers();
}

/// A secret typed into the REPL was kept in its history file.
#[test]
fn repl_history_does_not_keep_typed_secrets() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let secret = "typed-secret-7f3a9c21";
    let out = repl_with_input(
        &rfs,
        &repo,
        format!("step(\"use\", \"true\", #{{ env: #{{ API_TOKEN: \"{secret}\" }} }});\nprint(\"after\");\n").as_bytes(),
    );
    out.assert_code(0);
    let history = std::fs::read_to_string(rfs.state.path().join("repl-history")).unwrap();
    assert!(history.contains("API_TOKEN"), "the line is kept: {history}");
    assert!(!history.contains(secret), "{history}");
    rfs.assert_no_leftovers();
}

/// `rfs repl` with a provider that cannot work at all started the prompt
/// anyway and failed at the first input that needed a sandbox (the REPL
/// began its run its own way, without the provider's preflight); it now
/// starts through the one lifecycle: refused before the prompt, ended
/// and sealed like any run.
#[test]
fn repl_with_a_provider_that_cannot_work_refuses_before_the_prompt() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out_dir = rfs.state.path().join("out").join("repl-refused");
    let o = rfs
        .cmd(repo.path())
        .env("DOCKER_HOST", "unix:///nonexistent/rfs-test-docker.sock")
        .args(["repl", "--provider", "docker", "--out"])
        .arg(&out_dir)
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let out = finish(o, out_dir.clone());
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(!out.stdout.contains("rfs> "), "{}", out.stdout);
    assert!(out.stderr.contains("run refused"), "{}", out.stderr);
    assert!(
        out.stderr.contains("cannot reach the Docker daemon"),
        "{}",
        out.stderr
    );
    // The refusal said "provider docker is unavailable: " twice over.
    assert_eq!(
        out.stderr.matches("is unavailable").count(),
        1,
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("run.end")[0]["outcome"], "refused");
    assert_eq!(out.entries("placement").len(), 0);
    assert_bundle_verifies(&rfs, repo.path(), &out_dir);
}
