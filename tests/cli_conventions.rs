//! CLI conventions: completions and man page from the clap definitions,
//! `--color` with NO_COLOR / CLICOLOR_FORCE, `-v` / RUST_LOG tracing (off
//! by default), `rfs doctor`, and the CLI reference in the book checked
//! against clap.

mod common;
use common::*;

use std::process::Output;

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn completions_for_every_shell_name_the_subcommands() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = rfs
            .cmd(repo.path())
            .args(["completions", shell])
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert!(o.status.success(), "{shell}: {err}");
        for sub in ["repl", "doctor", "completions", "check"] {
            assert!(out.contains(sub), "{shell} completion lacks {sub}");
        }
    }
    // The bash script is valid bash.
    let o = rfs
        .cmd(repo.path())
        .args(["completions", "bash"])
        .output()
        .unwrap();
    let f = rfs.state.path().join("rfs.bash");
    std::fs::write(&f, &o.stdout).unwrap();
    let st = std::process::Command::new("bash")
        .arg("-n")
        .arg(&f)
        .status()
        .unwrap();
    assert!(st.success());
    let bad = rfs
        .cmd(repo.path())
        .args(["completions", "tcsh"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn man_page_is_roff_generated_from_clap() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let o = rfs.cmd(repo.path()).arg("man").output().unwrap();
    let (out, _) = text(&o);
    assert!(o.status.success());
    assert!(out.contains(".TH rfs 1"), "{out}");
    assert!(
        out.contains("doctor") && out.contains("\\-\\-color"),
        "{out}"
    );
}

fn check_broken(rfs: &Rfs, repo: &Repo, args: &[&str], env: &[(&str, &str)]) -> String {
    let (path, _) = rfs.prepare("let x = stepp(\"a\", \"b\");\n");
    let mut c = rfs.cmd(repo.path());
    c.args(args).arg("check").arg(&path);
    c.env_remove("NO_COLOR").env_remove("CLICOLOR_FORCE");
    for (k, v) in env {
        c.env(k, v);
    }
    let o = c.output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    text(&o).1
}

#[test]
fn color_flag_no_color_and_clicolor_force() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let esc = "\x1b[";
    // Not a terminal: plain by default.
    assert!(!check_broken(&rfs, &repo, &[], &[]).contains(esc));
    assert!(check_broken(&rfs, &repo, &["--color", "always"], &[]).contains(esc));
    assert!(check_broken(&rfs, &repo, &[], &[("CLICOLOR_FORCE", "1")]).contains(esc));
    assert!(!check_broken(
        &rfs,
        &repo,
        &[],
        &[("CLICOLOR_FORCE", "1"), ("NO_COLOR", "1")]
    )
    .contains(esc));
    assert!(!check_broken(
        &rfs,
        &repo,
        &["--color", "never"],
        &[("CLICOLOR_FORCE", "1")]
    )
    .contains(esc));
    // The diagnostic itself is the same.
    assert!(check_broken(&rfs, &repo, &["--color", "never"], &[]).contains("did you mean `step`?"));
}

#[test]
fn tracing_is_off_by_default_and_on_with_v_or_rust_log() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = "print(\"traced\");\n";
    let quiet = rfs.run(repo.path(), script);
    quiet.assert_code(0);
    assert!(!quiet.stderr.contains("DEBUG"), "{}", quiet.stderr);
    let v = rfs.run_with(repo.path(), script, &["-v"]);
    v.assert_code(0);
    assert!(v.stderr.contains("DEBUG rfs::"), "{}", v.stderr);
    assert!(!v.stdout.contains("DEBUG"), "tracing goes to stderr only");
    let (path, out_dir) = rfs.prepare(script);
    let o = rfs
        .cmd(repo.path())
        .env("RUST_LOG", "rfs=debug")
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    assert!(
        text(&o).1.contains("DEBUG rfs::runtime: journal"),
        "{}",
        text(&o).1
    );
}

#[test]
fn doctor_prints_one_line_per_provider_and_fails_for_the_current_unusable_one() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let o = rfs
        .cmd(repo.path())
        .env_remove("DAYTONA_API_KEY")
        .env_remove("DAYTONA_JWT_TOKEN")
        .arg("doctor")
        .output()
        .unwrap();
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(lines[0].starts_with("local    ok"), "{out}");
    assert!(lines[0].contains("[what a run would use now"), "{out}");
    assert!(lines[1].starts_with("docker "), "{out}");
    assert!(
        lines[2].starts_with("daytona  FAIL  DAYTONA_API_KEY"),
        "{out}"
    );
    // The current provider unusable: exit 3.
    let o = rfs
        .cmd(repo.path())
        .env_remove("DAYTONA_API_KEY")
        .env_remove("DAYTONA_JWT_TOKEN")
        .args(["doctor", "--provider", "daytona"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(3), "{:?}", text(&o));
    // An unusable state directory (a file) fails local.
    let file = rfs.state.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let o = rfs
        .cmd(repo.path())
        .env("RFS_STATE_DIR", &file)
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .arg("doctor")
        .output()
        .unwrap();
    let (out, _) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{out}");
    assert!(out.starts_with("local    FAIL  state directory"), "{out}");
    assert!(out.contains("docker   FAIL"), "{out}");
}

/// Every subcommand and every long flag clap knows appears in the CLI
/// reference (book/src/cli.md).
#[test]
fn the_cli_reference_documents_every_subcommand_and_flag() {
    use clap::CommandFactory;
    let book = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/cli.md"),
    )
    .unwrap();
    let cli = rfs::cli::Cli::command();
    let mut missing = vec![];
    fn walk(c: &clap::Command, path: String, book: &str, missing: &mut Vec<String>) {
        for a in c.get_arguments() {
            if let Some(l) = a.get_long() {
                if l != "help" && l != "version" && !book.contains(&format!("--{l}")) {
                    missing.push(format!("{path} --{l}"));
                }
            }
        }
        for s in c.get_subcommands() {
            let p = format!("{path} {}", s.get_name());
            if s.get_name() != "help" && !book.contains(&format!("`rfs{p}")) {
                missing.push(p.clone());
            }
            walk(s, p, book, missing);
        }
    }
    walk(&cli, String::new(), &book, &mut missing);
    assert!(missing.is_empty(), "not in book/src/cli.md: {missing:?}");
}

const JSON_SCRIPT: &str = r#"
sandbox();
sync_source();
step("hello", "echo to-stdout; echo to-stderr >&2");
print("a print");
step("fails", "exit 3", #{ allow_failure: true });
"#;

/// `--json`: stdout is JSON lines only — the journal's events in order,
/// then one summary; step output and prints never reach stdout raw.
#[test]
fn json_stdout_is_only_the_journals_events_then_a_summary() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(repo.path(), JSON_SCRIPT, &["--json"]);
    out.assert_code(0);
    let lines: Vec<serde_json::Value> = out
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {l:?}: {e}")))
        .collect();
    let (summary, events) = lines.split_last().expect("some lines");
    // The events are the journal, fact for fact.
    let journal: Vec<(String, serde_json::Value)> = out
        .journal()
        .into_iter()
        .map(|e| (e["kind"].as_str().unwrap().to_owned(), e["payload"].clone()))
        .collect();
    let streamed: Vec<(String, serde_json::Value)> = events
        .iter()
        .map(|e| {
            assert_eq!(e["type"], "event", "{e}");
            (e["kind"].as_str().unwrap().to_owned(), e["payload"].clone())
        })
        .collect();
    assert_eq!(streamed, journal);
    // The summary.
    assert_eq!(summary["type"], "summary", "{summary}");
    assert_eq!(summary["outcome"], "completed");
    assert_eq!(summary["exit_code"], 0);
    assert_eq!(summary["provider"], "local");
    assert_eq!(
        summary["sandbox_id"].as_str(),
        Some(out.sandbox_id().as_str())
    );
    assert_eq!(summary["commit"].as_str(), Some(repo.head().as_str()));
    let pin = &out.entries("source.pin")[0];
    assert_eq!(summary["tree_digest"], pin["tree_digest"]);
    assert_eq!(
        summary["run_id"],
        out.entries("run.start")[0]["run_id"],
        "{summary}"
    );
    assert_eq!(
        summary["evidence"].as_str().map(std::path::PathBuf::from),
        Some(out.out_dir.join("EVIDENCE.md"))
    );
    let steps = summary["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 2, "{summary}");
    assert_eq!(
        (
            &steps[0]["name"],
            &steps[0]["status"],
            &steps[0]["exit"],
            &steps[0]["attempts"]
        ),
        (&"hello".into(), &"ok".into(), &0.into(), &1.into())
    );
    assert_eq!(
        (&steps[1]["name"], &steps[1]["status"], &steps[1]["exit"]),
        (&"fails".into(), &"failed".into(), &3.into())
    );
    assert!(steps[0]["duration_ms"].is_u64());
    assert_eq!(steps[0]["commit"].as_str(), Some(repo.head().as_str()));
    // Step output and the console's lines are on stderr.
    assert!(out.stderr.contains("[hello] to-stdout"), "{}", out.stderr);
    assert!(
        out.stderr.contains("[hello stderr] to-stderr"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("to-stdout\n"), "{}", out.stdout);
}

/// A run refused before it began (here: not a repository) still ends
/// stdout with a summary saying so, and nothing but JSON.
#[test]
fn json_summary_is_printed_when_the_run_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let dir = tempfile::tempdir().unwrap();
    let out = rfs.run_with(dir.path(), "sandbox(); sync_source();", &["--json"]);
    out.assert_code(3);
    let last: serde_json::Value =
        serde_json::from_str(out.stdout.lines().last().expect("a summary")).unwrap();
    assert_eq!(last["type"], "summary");
    assert_eq!(last["outcome"], "refused");
    assert_eq!(last["exit_code"], 3);
    for l in out.stdout.lines() {
        serde_json::from_str::<serde_json::Value>(l).unwrap();
    }
    assert!(
        out.stderr.contains("refused") || out.stderr.contains("not a git"),
        "{}",
        out.stderr
    );
    // Arguments refused before a run id exists: a summary all the same.
    let o = rfs
        .cmd(dir.path())
        .args(["run", "--json", "--var", "no-equals-sign", "x.rhai"])
        .output()
        .unwrap();
    let (stdout, _) = text(&o);
    let last: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(last["run_id"], serde_json::Value::Null, "{stdout}");
    assert_eq!(
        Some(last["exit_code"].as_i64().unwrap() as i32),
        o.status.code()
    );
}

/// The spinner: on a terminal a slow phase shows it (here after 0 ms),
/// then it is cleared; in a pipe, with -q or with --json, never.
#[test]
fn progress_spins_on_a_terminal_only() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare("sandbox(); sync_source(); step(\"s\", \"true\");");
    let under_pty = |extra: &str| {
        let typescript = rfs.state.path().join(format!("typescript{}", uuid_like()));
        let cmd = format!(
            "{} run {} --out {}-{} {extra}",
            rfs_bin().display(),
            script.display(),
            out_dir.display(),
            uuid_like()
        );
        // util-linux `script`: the command gets a real PTY; the raw bytes
        // it wrote land in the typescript.
        let o = std::process::Command::new("script")
            .args(["-qec", &cmd])
            .arg(&typescript)
            .current_dir(repo.path())
            .env("RFS_STATE_DIR", rfs.state.path())
            .env("RELAYFLOWS_SANDBOX_PROVIDER", "local")
            .env("RFS_PROGRESS_AFTER_MS", "0")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("util-linux script runs");
        assert_eq!(o.status.code(), Some(0), "{:?}", text(&o));
        std::fs::read_to_string(&typescript).unwrap()
    };
    let tty = under_pty("");
    assert!(tty.contains("rfs: syncing commit"), "{tty}");
    assert!(tty.contains("\x1b[2K"), "the spinner is cleared: {tty:?}");
    let quiet = under_pty("-q");
    assert!(!quiet.contains("syncing commit"), "{quiet}");
    let json = under_pty("--json");
    assert!(!json.contains("syncing commit"), "{json}");
    // A pipe.
    let o = rfs
        .cmd(repo.path())
        .env("RFS_PROGRESS_AFTER_MS", "0")
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(out_dir.join("piped"))
        .output()
        .unwrap();
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(!err.contains("syncing commit"), "{err}");
}

/// Regression: `-v` printed the raw command line, `--var` secrets included.
#[test]
fn verbose_tracing_never_prints_a_secret() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = "let t = arg(\"API_TOKEN\");\n\
                  step(\"uses\", \"true\", #{ env: #{ STEP_TOKEN: \"step-tok-4471\" } });\n";
    for v in ["-v", "-vv"] {
        let (path, out_dir) = rfs.prepare(script);
        let o = rfs
            .cmd(repo.path())
            .env("DAYTONA_API_KEY", "dtn-key-9931-secret")
            .args([v, "run"])
            .arg(&path)
            .arg("--out")
            .arg(&out_dir)
            .args(["--var", "API_TOKEN=s3cretvalue-5512"])
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(0), "{out}{err}");
        assert!(err.contains("DEBUG rfs"), "{v} traces: {err}");
        assert!(
            err.contains("[REDACTED]"),
            "{v}: the var is shown redacted: {err}"
        );
        for secret in ["s3cretvalue-5512", "dtn-key-9931-secret", "step-tok-4471"] {
            assert!(!err.contains(secret), "{v} printed {secret}: {err}");
            assert!(!out.contains(secret), "{v} printed {secret}: {out}");
        }
    }
}

#[test]
fn v_traces_each_provider_call_and_vv_its_command_lines() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script = "step(\"hello\", \"echo traced-command-line\");\n";
    let v = rfs.run_with(repo.path(), script, &["-v"]);
    v.assert_code(0);
    for op in ["op=\"create\"", "op=\"exec\"", "op=\"destroy\""] {
        assert!(
            v.stderr.contains(op) && v.stderr.contains("rfs::provider"),
            "-v traces {op}: {}",
            v.stderr
        );
    }
    assert!(!v.stderr.contains("TRACE"), "{}", v.stderr);
    let vv = rfs.run_with(repo.path(), script, &["-vv"]);
    vv.assert_code(0);
    assert!(
        vv.stderr
            .lines()
            .any(|l| l.contains("TRACE rfs::provider") && l.contains("traced-command-line")),
        "-vv traces the command line: {}",
        vv.stderr
    );
}

/// A retried step's console line said `ended with exit Some(1)`: user
/// output carries no Rust `Some(..)` / `None`.
#[test]
fn user_output_has_no_rust_debug_text() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"let r = step("flaky", "exit 3", #{ retries: 1, allow_failure: true });
        step("fails", "exit 1");"#,
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("attempt 1 ended with exit 3"),
        "{}",
        out.stderr
    );
    for debug in ["Some(", "None"] {
        assert!(!out.stderr.contains(debug), "{debug} in:\n{}", out.stderr);
        assert!(!out.evidence().contains(debug), "{debug} in EVIDENCE.md");
    }
    rfs.assert_no_leftovers();
}

/// `rfs test --help` gave `rfs run`'s `--out` default (`runs/<run-id>`)
/// though a suite goes to `suites/<suite-id>` (#46 item 8); each command
/// says its own.
#[test]
fn each_commands_help_gives_its_own_out_default() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    for (cmd, default) in [
        ("run", "$RFS_STATE_DIR/runs/<run-id>"),
        ("test", "$RFS_STATE_DIR/suites/<suite-id>"),
        ("bisect", "$RFS_STATE_DIR/bisects/<run-id>"),
    ] {
        let o = rfs.cmd(repo.path()).args([cmd, "--help"]).output().unwrap();
        let (out, _) = text(&o);
        let line = out
            .lines()
            .skip_while(|l| !l.contains("--out"))
            .take(3)
            .collect::<Vec<_>>()
            .join(" ");
        assert!(line.contains(default), "rfs {cmd} --help: {line}");
    }
}
