//! The script engine as a user meets it: `rfs check`, compile errors that
//! provision nothing, strict options, the one-sandbox rule, the contained
//! module resolver, `arg()` (`--var` values), interruption, and secrets kept out of the
//! journal, the logs and the console.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::{Duration, Instant};

/// `rfs check <script>` from `cwd`.
fn check(rfs: &Rfs, cwd: &Path, script: &Path) -> RunOut {
    let out = rfs
        .cmd(cwd)
        .arg("check")
        .arg(script)
        .output()
        .expect("rfs runs");
    finish(out, PathBuf::new())
}

/// `rfs run` of an already written script file.
fn run_file(rfs: &Rfs, cwd: &Path, script: &Path, out_dir: &Path, args: &[&str]) -> RunOut {
    let out = rfs
        .cmd(cwd)
        .arg("run")
        .arg(script)
        .arg("--out")
        .arg(out_dir)
        .args(args)
        .output()
        .expect("rfs runs");
    finish(out, out_dir.to_path_buf())
}

/// Where the local provider keeps its sandboxes in this environment.
fn local_sandboxes(rfs: &Rfs) -> Vec<String> {
    match std::fs::read_dir(rfs.state.path().join("local/sandboxes")) {
        Ok(d) => d
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => vec![],
    }
}

/// Nothing was provisioned by a run: no placement journaled (if a journal
/// exists at all) and no sandbox in the provider's inventory or on disk.
#[track_caller]
fn assert_nothing_provisioned(rfs: &Rfs, out: &RunOut) {
    if out.out_dir.join("journal.jsonl").exists() {
        let kinds = out.kinds();
        assert!(
            !kinds.iter().any(|k| k.starts_with("placement")),
            "a placement was journaled: {kinds:?}"
        );
    }
    rfs.assert_no_leftovers();
    assert!(
        local_sandboxes(rfs).is_empty(),
        "sandbox directories exist: {:?}",
        local_sandboxes(rfs)
    );
}

/// Fail if `needle` occurs in any file of the run's output directory.
#[track_caller]
fn assert_not_in_output_dir(out: &RunOut, needle: &str) {
    let files = files_under(&out.out_dir);
    assert!(
        files.iter().any(|f| f.ends_with("journal.jsonl")),
        "the run wrote a journal: {files:?}"
    );
    for f in files {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !String::from_utf8_lossy(&bytes).contains(needle),
            "{needle} leaked into {}",
            f.display()
        );
    }
}

/// Poll until `cond` holds (the condition is the event; the sleep only
/// paces the polling), failing after a generous deadline.
fn wait_for(what: &str, child: &mut Child, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !cond() {
        if let Ok(Some(st)) = child.try_wait() {
            panic!("rfs exited ({st}) while waiting for {what}");
        }
        if Instant::now() >= deadline {
            // Do not leave a looping rfs behind: interrupt, then kill.
            sigint(child);
            std::thread::sleep(Duration::from_secs(5));
            let _ = child.kill();
            let _ = child.wait();
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn journal_has(journal: &Path, needle: &str) -> bool {
    std::fs::read_to_string(journal)
        .map(|t| t.contains(needle))
        .unwrap_or(false)
}

fn sigint(child: &Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
}

// ---------------------------------------------------------------- check

#[test]
fn check_accepts_a_good_script_without_running_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let marker = rfs.state.path().join("check-ran-marker");
    let (script, _) = rfs.prepare(&format!(
        "import \"rfs/assert\" as a;\nlet r = step(\"touch\", \"touch {}\");\na::eq(r.exit, 0);\n",
        marker.display()
    ));
    let out = check(&rfs, repo.path(), &script);
    out.assert_code(0);
    assert!(out.stdout.contains("ok"), "{}", out.stdout);
    assert!(!marker.exists(), "check must not run the script");
    assert!(local_sandboxes(&rfs).is_empty());
    rfs.assert_no_leftovers();
}

#[test]
fn check_reports_a_syntax_error_at_its_line_with_a_label() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, _) = rfs.prepare("let x = 1;\nlet y = ;\nprint(x);\n");
    let out = check(&rfs, repo.path(), &script);
    out.assert_code(2);
    assert!(out.stderr.contains("does not compile"), "{}", out.stderr);
    // The location names line 2 (file:line:column) ...
    assert!(
        out.stderr.contains(&format!("{}:2:", script.display())),
        "{}",
        out.stderr
    );
    // ... the source line is shown with its number, and a label points at it.
    assert!(out.stderr.contains("2 │ let y = ;"), "{}", out.stderr);
    assert!(
        out.stderr.contains('┬') && out.stderr.contains("╰── here"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("ok"), "{}", out.stdout);
}

#[test]
fn run_of_a_script_with_a_syntax_error_provisions_nothing() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let marker = rfs.state.path().join("syntax-ran-marker");
    let out = rfs.run(
        repo.path(),
        &format!(
            "sync_source();\nstep(\"early\", \"touch {}\");\nlet broken = (;\n",
            marker.display()
        ),
    );
    out.assert_code(2);
    assert!(out.stderr.contains("does not compile"), "{}", out.stderr);
    assert!(out.stderr.contains("3 │ let broken = (;"), "{}", out.stderr);
    assert!(!marker.exists(), "no statement of a broken script runs");
    assert_nothing_provisioned(&rfs, &out);
}

// -------------------------------------------------------------- options

#[test]
fn an_unknown_step_option_is_an_error_naming_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // A computed map (a literal one is refused before running: script_lint.rs).
    let out = rfs.run(
        repo.path(),
        "let o = #{ timout: 3 };\nstep(\"x\", \"echo RAN\", o);\n",
    );
    out.assert_code(1);
    assert!(out.stderr.contains("`timout`"), "{}", out.stderr);
    assert!(out.stderr.contains("unknown option"), "{}", out.stderr);
    // Known options are listed so the typo is easy to fix.
    assert!(out.stderr.contains("`timeout`"), "{}", out.stderr);
    assert!(!out.stdout.contains("RAN"));
    assert_eq!(out.entries("run.end")[0]["outcome"], "failed");
    assert!(out.entries("step.start").is_empty());
    assert_nothing_provisioned(&rfs, &out);
}

#[test]
fn a_wrongly_typed_option_is_an_error() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "step(\"x\", \"echo RAN\", #{ timeout: \"3\" });\n",
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("`timeout`") && out.stderr.contains("must be a number of seconds"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("RAN"));
    assert_nothing_provisioned(&rfs, &out);

    // Other options and types, each refused with its own message.
    let out = rfs.run(
        repo.path(),
        r#"
        let msgs = [];
        for o in [#{ allow_failure: 1 }, #{ env: "A=1" }, #{ retries: "2" }, #{ cwd: 7 },
                  #{ env: #{ A: [1] } }, #{ timeout: -1 }, #{ retries: 1000 }] {
            try { step("x", "echo RAN", o); msgs.push("accepted"); }
            catch (e) { msgs.push(`${e}`); }
        }
        for m in msgs { print("MSG " + m); }
        "#,
    );
    out.assert_code(0);
    let msgs: Vec<&str> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("MSG "))
        .collect();
    assert_eq!(msgs.len(), 7, "{}", out.stdout);
    let want = [
        "`allow_failure` must be true or false",
        "`env` must be a map",
        "`retries` must be an integer",
        "`cwd` must be a string",
        "`env.A` must be a string, number or bool",
        "`timeout` must be > 0 seconds",
        "retries must be between 0 and 100",
    ];
    for (m, w) in msgs.iter().zip(want) {
        assert!(m.contains(w), "expected {w:?} in {m:?}");
    }
    assert!(!out.stdout.contains("RAN"));
    rfs.assert_no_leftovers();
}

#[test]
fn conflicting_sandbox_options_are_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ image: \"a\" });\nsandbox(#{ image: \"b\" });\nstep(\"x\", \"echo RAN\");\n",
    );
    out.assert_code(3);
    assert!(
        out.stderr.contains("conflicting sandbox options"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("2 │ sandbox("), "{}", out.stderr);
    assert!(!out.stdout.contains("RAN"));
    assert_eq!(out.entries("run.end")[0]["outcome"], "refused");
    assert_nothing_provisioned(&rfs, &out);

    // Repeating the same options is not a conflict.
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ labels: #{ team: \"qa\" } });\nsandbox(#{ labels: #{ team: \"qa\" } });\nprint(\"SAME OK\");\n",
    );
    out.assert_code(0);
    assert!(out.stdout.contains("SAME OK"));
}

#[test]
fn reserved_relayflows_labels_are_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ labels: #{ \"relayflows/x\": \"y\" } });\nstep(\"x\", \"echo RAN\");\n",
    );
    out.assert_code(3);
    assert!(
        out.stderr.contains("`relayflows/x`") && out.stderr.contains("reserved"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("RAN"));
    assert_eq!(out.entries("run.end")[0]["outcome"], "refused");
    assert_nothing_provisioned(&rfs, &out);

    // Ordinary labels reach the sandbox next to rfs's own.
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ labels: #{ team: \"qa\" } });\nstep(\"x\", \"true\");\n",
    );
    out.assert_code(0);
    let labels = &out.entries("placement")[0]["labels"];
    assert_eq!(labels["team"], "qa");
    assert_eq!(labels["relayflows/created-by"], "rfs");
    rfs.assert_no_leftovers();
}

// -------------------------------------------------------------- modules

#[test]
fn the_stdlib_assert_module_works_and_fails_with_its_message() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "import \"rfs/assert\" as a;\na::eq(1, 1);\na::contains(\"haystack\", \"st\");\nprint(\"PASSED\");\n",
    );
    out.assert_code(0);
    assert!(out.stdout.contains("PASSED"), "{}", out.stdout);

    let out = rfs.run(
        repo.path(),
        "import \"rfs/assert\" as a;\na::eq(1, 2);\nprint(\"AFTER\");\n",
    );
    out.assert_code(1);
    assert!(
        out.stderr.contains("assert eq failed: left = 1, right = 2"),
        "{}",
        out.stderr
    );
    // Reported at the call site in the script.
    assert!(out.stderr.contains("2 │ a::eq(1, 2);"), "{}", out.stderr);
    assert!(!out.stdout.contains("AFTER"));
    assert_eq!(out.entries("run.end")[0]["outcome"], "failed");
}

#[test]
fn a_module_next_to_the_script_can_be_imported() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare(
        "import \"helpers\" as h;\nimport \"lib/more.rhai\" as m;\nprint(h::greet(\"rfs\") + \" \" + m::twice(21));\n",
    );
    let dir = script.parent().unwrap();
    std::fs::write(dir.join("helpers.rhai"), "fn greet(n) { `hello ${n}` }\n").unwrap();
    std::fs::create_dir_all(dir.join("lib")).unwrap();
    std::fs::write(dir.join("lib/more.rhai"), "fn twice(x) { x * 2 }\n").unwrap();
    let out = run_file(&rfs, repo.path(), &script, &out_dir, &[]);
    out.assert_code(0);
    assert!(out.stdout.contains("hello rfs 42"), "{}", out.stdout);
}

/// A script in `<state>/scripts/sub/` and a valid module one level up that
/// prints a marker if it is ever loaded.
fn script_beside_outside_module(rfs: &Rfs, import: &str) -> (PathBuf, PathBuf) {
    let scripts = rfs.state.path().join("scripts");
    let sub = scripts.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::write(
        scripts.join("outside.rhai"),
        "print(\"OUTSIDE MODULE LOADED\");\nfn f() { 1 }\n",
    )
    .unwrap();
    let script = sub.join(format!("{}.rhai", uuid_like()));
    std::fs::write(
        &script,
        format!("import \"{import}\" as m;\nstep(\"after\", \"echo RAN\");\n"),
    )
    .unwrap();
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    (script, out_dir)
}

#[track_caller]
fn assert_import_refused(rfs: &Rfs, out: &RunOut, path: &str, why: &str) {
    // Refused before running (2, like a compile error) or when the import
    // executes (1 script failure, 3 refusal): never success, never internal.
    assert!(
        (1..=3).contains(&out.code),
        "a refused import fails the run with 1, 2 or 3, got {}\n{}",
        out.code,
        out.stderr
    );
    assert!(out.stderr.contains(path), "{}", out.stderr);
    assert!(
        out.stderr.contains(why),
        "the error should say why the import was refused ({why:?}):\n{}",
        out.stderr
    );
    assert!(
        !out.stdout.contains("OUTSIDE MODULE LOADED"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("RAN"), "{}", out.stdout);
    assert_nothing_provisioned(rfs, out);
}

#[test]
fn an_import_leaving_the_script_dir_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, out_dir) = script_beside_outside_module(&rfs, "../outside");
    let out = run_file(&rfs, repo.path(), &script, &out_dir, &[]);
    assert_import_refused(
        &rfs,
        &out,
        "../outside",
        "imports may not leave the script's directory",
    );

    // The same path computed at run time is refused by the resolver itself.
    let dynamic = script.with_file_name(format!("{}.rhai", uuid_like()));
    std::fs::write(
        &dynamic,
        "let p = \"..\" + \"/outside\";\nimport p as m;\nstep(\"after\", \"echo RAN\");\n",
    )
    .unwrap();
    let out = run_file(
        &rfs,
        repo.path(),
        &dynamic,
        &out_dir.with_extension("dyn"),
        &[],
    );
    assert_import_refused(
        &rfs,
        &out,
        "../outside",
        "imports may not leave the script's directory",
    );
}

#[test]
fn an_absolute_import_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "import \"/etc/passwd\" as m;\nstep(\"after\", \"echo RAN\");\n",
    );
    assert_import_refused(
        &rfs,
        &out,
        "/etc/passwd",
        "absolute import paths are not allowed",
    );

    // Also for a real, valid module outside the script's directory.
    let outside = rfs.state.path().join("elsewhere/outside.rhai");
    std::fs::create_dir_all(outside.parent().unwrap()).unwrap();
    std::fs::write(&outside, "print(\"OUTSIDE MODULE LOADED\");\n").unwrap();
    let out = rfs.run(
        repo.path(),
        &format!(
            "import \"{}\" as m;\nstep(\"after\", \"echo RAN\");\n",
            outside.display()
        ),
    );
    assert_import_refused(
        &rfs,
        &out,
        &outside.display().to_string(),
        "absolute import paths are not allowed",
    );
}

#[test]
fn a_symlinked_module_pointing_outside_the_script_dir_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, out_dir) = script_beside_outside_module(&rfs, "link");
    let dir = script.parent().unwrap();
    std::os::unix::fs::symlink("../outside.rhai", dir.join("link.rhai")).unwrap();
    let out = run_file(&rfs, repo.path(), &script, &out_dir, &[]);
    assert_import_refused(
        &rfs,
        &out,
        "link",
        "is a symlink: modules are regular files",
    );
}

// ------------------------------------------------------------- builtins

#[test]
fn eval_is_not_available() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, _) = rfs.prepare("let x = eval(\"1\");\nprint(`EVALUATED ${x}`);\n");
    let out = check(&rfs, repo.path(), &script);
    out.assert_code(2);
    assert!(out.stderr.contains("eval"), "{}", out.stderr);

    let out = rfs.run(
        repo.path(),
        "let x = eval(\"1\");\nprint(`EVALUATED ${x}`);\n",
    );
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("eval"), "{}", out.stderr);
    assert!(!out.stdout.contains("EVALUATED"));

    // Not through a function pointer built at run time either.
    let out = rfs.run(
        repo.path(),
        "let f = Fn(\"ev\" + \"al\");\nlet x = f.call(\"40 + 2\");\nprint(`EVALUATED ${x}`);\n",
    );
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("eval"), "{}", out.stderr);
    assert!(!out.stdout.contains("EVALUATED"));
}

#[test]
fn arg_returns_the_value_given_with_dash_dash_var() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        "print(\"GOT \" + arg(\"NAME\"));\nprint(\"DEFAULT \" + arg(\"OTHER\", \"fallback\"));\n",
        &["--var", "NAME=value-42"],
    );
    out.assert_code(0);
    assert!(out.stdout.contains("GOT value-42"), "{}", out.stdout);
    assert!(out.stdout.contains("DEFAULT fallback"), "{}", out.stdout);
    // Non-secret vars are journaled as given.
    assert_eq!(out.entries("run.start")[0]["vars"]["NAME"], "value-42");
}

#[test]
fn a_missing_arg_is_an_error_naming_dash_dash_var() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "let v = arg(\"NAME\");\nprint(\"GOT \" + v);\n",
    );
    out.assert_code(1);
    assert!(out.stderr.contains("`NAME`"), "{}", out.stderr);
    assert!(out.stderr.contains("--var NAME="), "{}", out.stderr);
    assert!(out.stderr.contains("1 │ let v = arg("), "{}", out.stderr);
    assert!(!out.stdout.contains("GOT"));
}

// ------------------------------------------------------------ interrupt

#[test]
fn an_infinite_loop_is_stopped_by_sigint() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // A step first, so the sandbox must be torn down too; the loop has
    // started once the print after it is journaled. (SIGINT that arrives
    // right at startup is the next test's business.)
    let (mut child, out_dir) = rfs.spawn(
        repo.path(),
        "step(\"ready\", \"true\");\nprint(\"looping\");\nloop { }\n",
    );
    let journal = out_dir.join("journal.jsonl");
    wait_for("the script's print", &mut child, || {
        journal_has(&journal, "\"looping\"")
    });
    sigint(&child);
    let out = wait_bounded(child, out_dir);
    out.assert_code(130);
    assert!(out.stderr.contains("interrupted"), "{}", out.stderr);
    let end = out.entries("run.end");
    assert_eq!(end.len(), 1, "{:?}", out.kinds());
    assert_eq!(end[0]["outcome"], "interrupted");
    assert!(out.evidence().contains("- outcome: interrupted"));
    let cleanup = out.entries("cleanup.verified");
    assert_eq!(cleanup.len(), 1, "{:?}", out.kinds());
    assert_eq!(cleanup[0]["sandbox_id"], out.sandbox_id().as_str());
    rfs.assert_no_leftovers();
}

#[test]
fn sigint_as_soon_as_the_journal_exists_is_an_orderly_interrupt() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (mut child, out_dir) = rfs.spawn(repo.path(), "loop { }\n");
    let journal = out_dir.join("journal.jsonl");
    wait_for("the journal", &mut child, || journal.exists());
    sigint(&child);
    let out = wait_bounded(child, out_dir);
    // Once rfs has started journaling, Ctrl-C must end the run in order:
    // exit 130 and a journaled run.end, never death by the signal.
    out.assert_code(130);
    let end = out.entries("run.end");
    assert_eq!(end.len(), 1, "{:?}", out.kinds());
    assert_eq!(end[0]["outcome"], "interrupted");
    rfs.assert_no_leftovers();
}

#[test]
fn sigint_during_a_step_kills_it_and_tears_down_the_sandbox() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (mut child, out_dir) = rfs.spawn(
        repo.path(),
        "step(\"long\", \"echo started; sleep 300\");\nstep(\"never\", \"echo NEVER\");\n",
    );
    let journal = out_dir.join("journal.jsonl");
    wait_for("the step to start", &mut child, || {
        journal_has(&journal, "\"step.start\"")
    });
    sigint(&child);
    let out = wait_bounded(child, out_dir);
    out.assert_code(130);
    assert!(!out.stdout.contains("NEVER"));
    assert_eq!(out.entries("run.end")[0]["outcome"], "interrupted");
    let attempt = &out.entries("step.attempt")[0];
    assert_eq!(attempt["cancelled"], true, "{attempt}");
    let cleanup = out.entries("cleanup.verified");
    assert_eq!(cleanup.len(), 1, "{:?}", out.kinds());
    assert_eq!(cleanup[0]["sandbox_id"], out.sandbox_id().as_str());
    rfs.assert_no_leftovers();
}

// -------------------------------------------------------------- secrets

const TOKEN: &str = "s3cr3t-value-123";
const PASSWORD: &str = "hunter2-xyz";

#[test]
fn a_secret_step_env_value_never_reaches_journal_logs_or_stdout() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        &format!(
            r#"
            let r = step("tok", "echo $API_TOKEN; echo \"err $API_TOKEN\" >&2",
                         #{{ env: #{{ API_TOKEN: "{TOKEN}" }} }});
            print("script saw: " + r.stdout.trimmed());
            assert(!r.stdout.contains("{TOKEN}"), "the script gets redacted output");
            "#
        ),
    );
    out.assert_code(0);
    // The command really ran with the value: its output was redacted.
    assert!(out.stdout.contains("[tok] [REDACTED]"), "{}", out.stdout);
    assert!(
        out.stdout.contains("script saw: [REDACTED]"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(TOKEN), "{}", out.stdout);
    assert!(!out.stderr.contains(TOKEN), "{}", out.stderr);
    // The journal records that the env was set, without its value.
    let start = &out.entries("step.start")[0];
    assert_eq!(start["env"][0][0], "API_TOKEN");
    assert_eq!(start["env"][0][1], "[REDACTED]");
    let stdout_log = out.out_dir.join("steps/001-tok.stdout.log");
    assert_eq!(
        std::fs::read_to_string(&stdout_log).unwrap(),
        "[REDACTED]\n"
    );
    assert_not_in_output_dir(&out, TOKEN);
    rfs.assert_no_leftovers();
}

#[test]
fn a_secret_var_is_redacted_in_the_journal() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        "print(\"no secrets here\");\n",
        &[
            "--var",
            &format!("DB_PASSWORD={PASSWORD}"),
            "--var",
            "PLAIN=visible-1",
        ],
    );
    out.assert_code(0);
    let vars = &out.entries("run.start")[0]["vars"];
    assert_eq!(vars["DB_PASSWORD"], "[REDACTED]");
    assert_eq!(vars["PLAIN"], "visible-1");
    assert_not_in_output_dir(&out, PASSWORD);
    assert!(!out.stdout.contains(PASSWORD) && !out.stderr.contains(PASSWORD));
}

#[test]
fn a_secret_var_used_by_the_script_never_reaches_journal_logs_or_stdout() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        r#"
        let pw = arg("DB_PASSWORD");
        print("password is " + pw);
        debug(pw);
        let r = step("use-pw", "echo pw=" + pw + "; echo " + pw + " >&2", #{ env: #{ PGPASS_PLAIN: pw } });
        assert(r.stdout.contains("pw=[REDACTED]"), r.stdout);
        "#,
        &["--var", &format!("DB_PASSWORD={PASSWORD}")],
    );
    out.assert_code(0);
    assert!(
        out.stdout.contains("password is [REDACTED]"),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains(PASSWORD), "{}", out.stdout);
    assert!(!out.stderr.contains(PASSWORD), "{}", out.stderr);
    // The command is journaled with the value redacted, and so is the env
    // entry whose name does not look secret but whose value is.
    let start = &out.entries("step.start")[0];
    assert!(
        start["command"].as_str().unwrap().contains("[REDACTED]"),
        "{start}"
    );
    assert_eq!(start["env"][0][1], "[REDACTED]");
    assert_not_in_output_dir(&out, PASSWORD);
    rfs.assert_no_leftovers();
}

#[test]
fn a_script_error_carrying_a_secret_is_redacted_on_the_console() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // The literal is far from the failing line, so the source excerpt
    // miette shows around the error does not contain it.
    let out = rfs.run(
        repo.path(),
        &format!(
            "let t = \"{TOKEN}\";\nstep(\"tok\", \"true\", #{{ env: #{{ API_TOKEN: t }} }});\nprint(\"token: \" + t);\n\n\n\nfail(\"bad token \" + t);\n"
        ),
    );
    out.assert_code(1);
    assert!(out.stdout.contains("token: [REDACTED]"), "{}", out.stdout);
    assert!(out.stderr.contains("bad token"), "{}", out.stderr);
    assert!(
        !out.stderr.contains(TOKEN),
        "print() is redacted, so a script error must be too:\n{}",
        out.stderr
    );
    assert_not_in_output_dir(&out, TOKEN);
    rfs.assert_no_leftovers();
}
