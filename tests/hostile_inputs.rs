//! The hostile-input suite (issue #8): a table of inputs an adversarial
//! user might try — cwds, repository shapes, file names, options, env,
//! scripts, signals, journals and evidence — each run through the real
//! `rfs` binary on every provider. For each case it asserts the exit code,
//! a clear message, that nothing ran (a side-effect step after the hostile
//! call never started, and on `local` its host marker file is absent),
//! that no sandbox is left, and that the journal (when the run got far
//! enough to have one) verifies and ends with `run.end`.

mod common;
use common::*;

use std::path::Path;

/// The repository a case runs in.
#[derive(Clone, Copy)]
enum Shape {
    /// One commit, a few files, committed symlinks.
    Plain,
    /// A directory that is no repository.
    NoRepo,
    /// `git init` without commits.
    NoCommits,
    /// A tracked file changed.
    Dirty,
    /// An untracked file.
    Untracked,
    /// A committed gitlink (submodule).
    Submodule,
    /// [`Shape::Plain`] with this `rfs.toml` committed.
    Config(&'static str),
}

struct Case {
    name: &'static str,
    shape: Shape,
    /// The hostile part of the script (`MARKER` is the side-effect path).
    script: &'static str,
    args: &'static [&'static str],
    code: i32,
    /// A part of the message on stderr.
    says: &'static str,
}

const fn case(name: &'static str, script: &'static str, code: i32, says: &'static str) -> Case {
    Case {
        name,
        shape: Shape::Plain,
        script,
        args: &[],
        code,
        says,
    }
}

const fn shaped(
    name: &'static str,
    shape: Shape,
    script: &'static str,
    code: i32,
    says: &'static str,
) -> Case {
    Case {
        name,
        shape,
        script,
        args: &[],
        code,
        says,
    }
}

const fn with_args(
    name: &'static str,
    args: &'static [&'static str],
    script: &'static str,
    code: i32,
    says: &'static str,
) -> Case {
    Case {
        name,
        shape: Shape::Plain,
        script,
        args,
        code,
        says,
    }
}

const CWD: &[Case] = &[
    case(
        "cwd-dotdot",
        r#"step("x", "true", #{ cwd: ".." });"#,
        3,
        "escapes the synced source root",
    ),
    case(
        "cwd-dotdot-deep",
        r#"step("x", "true", #{ cwd: "sub/../../x" });"#,
        3,
        "escapes the synced source root",
    ),
    case(
        "cwd-absolute",
        r#"step("x", "true", #{ cwd: "/etc" });"#,
        3,
        "is absolute",
    ),
    case(
        "cwd-nul",
        r#"step("x", "true", #{ cwd: "sub\x00" });"#,
        3,
        "NUL byte",
    ),
    case(
        "cwd-empty",
        r#"step("x", "true", #{ cwd: "" });"#,
        3,
        "its cwd is empty",
    ),
    case(
        "cwd-newline",
        r#"step("x", "true", #{ cwd: "sub\n.." });"#,
        3,
        "line break",
    ),
    case(
        "cwd-symlink-abs",
        r#"step("x", "true", #{ cwd: "to-etc" });"#,
        3,
        "leaves the synced source root",
    ),
    case(
        "cwd-symlink-up",
        r#"step("x", "true", #{ cwd: "to-up" });"#,
        3,
        "escapes the synced source root",
    ),
    case(
        "cwd-symlink-loop",
        r#"step("x", "true", #{ cwd: "loop-a" });"#,
        3,
        "too many levels of symlinks",
    ),
    case(
        "cwd-file",
        r#"step("x", "true", #{ cwd: "reproducer-marker.txt" });"#,
        3,
        "is a file, not a directory",
    ),
    case(
        "cwd-missing",
        r#"step("x", "true", #{ cwd: "no/such/dir" });"#,
        3,
        "does not exist in sandbox",
    ),
    case(
        "cwd-planted-symlink",
        "step(\"plant\", \"ln -s / evil\");\nstep(\"x\", \"true\", #{ cwd: \"evil\" });",
        3,
        "outside the synced root",
    ),
    case(
        "cwd-attach-escape",
        r#"attach("cat", #{ cwd: ".." });"#,
        3,
        "escapes the synced source root",
    ),
    case(
        "cwd-not-a-string",
        r#"step("x", "true", #{ cwd: 42 });"#,
        1,
        "`cwd` must be a string",
    ),
];

const REPOS: &[Case] = &[
    shaped(
        "repo-none",
        Shape::NoRepo,
        "sync_source();",
        3,
        "not inside a git repository",
    ),
    shaped(
        "repo-no-commits",
        Shape::NoCommits,
        "sync_source();",
        3,
        "no commits",
    ),
    shaped(
        "repo-dirty",
        Shape::Dirty,
        "sync_source();",
        3,
        "uncommitted or untracked changes",
    ),
    shaped(
        "repo-untracked",
        Shape::Untracked,
        "sync_source();",
        3,
        "uncommitted or untracked changes",
    ),
    shaped(
        "repo-submodule",
        Shape::Submodule,
        "sync_source();",
        3,
        "submodule",
    ),
    shaped(
        "repo-implicit-dirty",
        Shape::Dirty,
        r#"step("x", "true");"#,
        3,
        "no source could be bound",
    ),
    case(
        "repo-bad-rev",
        r#"sync_source(#{ rev: "no-such-rev" });"#,
        3,
        "no-such-rev",
    ),
    case(
        "repo-subdir-file",
        r#"sync_source(#{ path: "reproducer-marker.txt" });"#,
        3,
        "is not a directory",
    ),
    case(
        "repo-subdir-escape",
        r#"sync_source(#{ path: "../x" });"#,
        3,
        "path",
    ),
    case(
        "repo-missing-dir",
        r#"sync_source(#{ repo: "/nonexistent/rfs/repo" });"#,
        3,
        "/nonexistent/rfs/repo",
    ),
    case(
        "repo-dest-escape",
        r#"sync_source(#{ dest: "../outside" });"#,
        3,
        "dest",
    ),
    case(
        "repo-dest-absolute",
        r#"sync_source(#{ dest: "/tmp/x" });"#,
        3,
        "dest",
    ),
    case(
        "repo-submodules-bad",
        r#"sync_source(#{ submodules: "maybe" });"#,
        1,
        "submodules must be",
    ),
    case(
        "repo-second-sync-differs",
        "sync_source();\nsync_source(#{ dest: \"other\" });",
        3,
        "sync",
    ),
];

const NAMES: &[Case] = &[
    case(
        "name-empty",
        r#"step("", "true");"#,
        3,
        "a step name is empty",
    ),
    case(
        "name-blank",
        r#"step("   ", "true");"#,
        3,
        "a step name is empty",
    ),
    case(
        "name-newline",
        r#"step("a\nb", "true");"#,
        3,
        "control characters",
    ),
    case(
        "name-u2028-is-a-line-break-not-empty",
        "step(\"\u{2028}\", \"true\");",
        3,
        "contains a line break",
    ),
    case(
        "name-u0085-is-a-control-character-not-empty",
        "step(\"\u{85}\", \"true\");",
        3,
        "control characters",
    ),
    case(
        "name-bidi-override-is-refused-and-shown-escaped",
        "step(\"build\u{202E}gpj.exe\", \"true\");",
        3,
        "invisible character U+202E",
    ),
    case(
        "name-zero-width-space-is-refused",
        "step(\"te\u{200B}st\", \"true\");",
        3,
        "invisible character U+200B",
    ),
    case(
        "name-bom-is-refused",
        "step(\"\u{FEFF}build\", \"true\");",
        3,
        "invisible character U+FEFF",
    ),
    case(
        "name-escape-seq",
        r#"step("a\x1b[2Jb", "true");"#,
        3,
        "control characters",
    ),
    case(
        "name-nul",
        r#"step("a\x00b", "true");"#,
        3,
        "control characters",
    ),
    case(
        "command-nul",
        r#"step("x", "true\x00rm -rf /");"#,
        3,
        "NUL byte",
    ),
    case(
        "command-empty",
        r#"step("x", "  ");"#,
        3,
        "command is empty",
    ),
    case(
        "label-reserved",
        r#"sandbox(#{ labels: #{ "relayflows/run-id": "mine" } });"#,
        3,
        "is reserved",
    ),
    case(
        "label-conflict",
        "sandbox(#{ labels: #{ a: \"1\" } });\nsandbox(#{ labels: #{ a: \"2\" } });",
        3,
        "conflicting sandbox options",
    ),
    case(
        "label-not-scalar",
        r#"sandbox(#{ labels: #{ a: [1] } });"#,
        1,
        "must be a string, number or bool",
    ),
];

const OPTIONS: &[Case] = &[
    case("timeout-1e300", r#"step("x", "true", #{ timeout: 1e300 });"#, 1, "option `timeout`"),
    case("timeout-i64-max", r#"step("x", "true", #{ timeout: 9223372036854775807 });"#, 1, "option `timeout`"),
    case("timeout-negative", r#"step("x", "true", #{ timeout: -1 });"#, 1, "option `timeout`"),
    case("timeout-zero", r#"step("x", "true", #{ timeout: 0 });"#, 1, "option `timeout`"),
    case("timeout-nan", r#"step("x", "true", #{ timeout: 0.0 / 0.0 });"#, 1, "option `timeout`"),
    case("timeout-string", r#"step("x", "true", #{ timeout: "1h" });"#, 1, "a number of seconds"),
    case("retries-negative", r#"step("x", "true", #{ retries: -1 });"#, 1, "retries must be between 0 and 100"),
    case("retries-huge", r#"step("x", "true", #{ retries: 9223372036854775807 });"#, 1, "retries must be between 0 and 100"),
    case("option-typo", r#"step("x", "true", #{ timout: 5 });"#, 2, "unknown option `timout`"),
    case("allow-failure-string", r#"step("x", "true", #{ allow_failure: "yes" });"#, 1, "must be true or false"),
    case("attach-cols-zero", r#"attach("cat", #{ cols: 0 });"#, 1, "cols must be between 1 and 1000"),
    case("attach-rows-huge", r#"attach("cat", #{ rows: 70000 });"#, 1, "rows must be between 1 and 1000"),
    // A 65535x65535 terminal is 4 billion cells: the runner ran out of
    // memory before anything was refused.
    case("attach-screen-of-four-billion-cells", r#"attach("cat", #{ cols: 65535, rows: 65535 });"#, 1, "cols must be between 1 and 1000"),
    case("resize-to-four-billion-cells", "let t = attach(\"cat\");\nt.resize(65535, 65535);", 1, "cols must be between 1 and 1000"),
    case("wait-exit-1e300", "let t = attach(\"cat\");\nt.wait_exit(1e300);", 1, "wait_exit: the timeout"),
    case("assert-screen-timeout-huge", "let t = attach(\"cat\");\nassert_screen(t, #{ text: \"x\", timeout: 1e9 });", 1, "timeout must be 0..86400"),
    case("assert-screen-stable-huge", "let t = attach(\"cat\");\nassert_screen(t, #{ text: \"x\", stable_ms: 18446744073709551615 });", 1, "stable_ms"),
    with_args("max-lifetime-zero", &["--max-lifetime", "0"], "", 2, "--max-lifetime must be at least 1 second"),
    with_args("max-lifetime-huge", &["--max-lifetime", "18446744073709551615"], "", 2, "--max-lifetime must be at most"),
];

const ENV: &[Case] = &[
    case(
        "env-space",
        r#"step("x", "true", #{ env: #{ "A B": "1" } });"#,
        3,
        "not a valid name",
    ),
    case(
        "env-equals",
        r#"step("x", "true", #{ env: #{ "A=B": "1" } });"#,
        3,
        "not a valid name",
    ),
    case(
        "env-empty-name",
        r#"step("x", "true", #{ env: #{ "": "1" } });"#,
        3,
        "name is empty",
    ),
    case(
        "env-leading-digit",
        r#"step("x", "true", #{ env: #{ "1A": "1" } });"#,
        3,
        "not a valid name",
    ),
    case(
        "env-nul-value",
        r#"step("x", "true", #{ env: #{ A: "x\x00y" } });"#,
        3,
        "NUL byte",
    ),
    case(
        "env-not-a-map",
        r#"step("x", "true", #{ env: "A=1" });"#,
        1,
        "`env` must be a map",
    ),
    case(
        "env-attach-bad-name",
        r#"attach("cat", #{ env: #{ "A B": "1" } });"#,
        3,
        "not a valid name",
    ),
    case(
        "env-attach-term-nul",
        r#"attach("cat", #{ term: "xterm\x00" });"#,
        3,
        "NUL byte",
    ),
    with_args("var-bad-name", &["--var", "A B=1"], "", 2, "A B"),
    with_args("var-no-equals", &["--var", "JUSTANAME"], "", 2, "JUSTANAME"),
];

const SCRIPTS: &[Case] = &[
    case("script-syntax-error", "let = ;", 2, "rfs"),
    case(
        "script-unknown-function",
        "no_such_function(1);",
        2,
        "unknown function `no_such_function`",
    ),
    case(
        "script-deep-recursion",
        "fn f(n) { f(n + 1) }\nf(0);",
        1,
        "Stack overflow",
    ),
    case(
        "script-huge-string",
        "let s = \"x\";\nloop { s += s; }",
        1,
        "too large",
    ),
    case(
        "script-missing-import",
        "import \"no/such/module\" as m;",
        2,
        "no/such/module",
    ),
    case("script-eval-disabled", "eval(\"1\");", 2, "eval"),
    case(
        "script-throw",
        "throw \"boom from the script\";",
        1,
        "boom from the script",
    ),
    case(
        "script-fail",
        "fail(\"declared failure\");",
        1,
        "declared failure",
    ),
    case(
        "script-assert",
        "assert(1 == 2, \"math broke\");",
        1,
        "math broke",
    ),
    case(
        "script-forged-refusal-text",
        "throw \"refused: step `x` refused before running anything\";",
        1,
        "refused: step",
    ),
];

/// The trust model, line by line (book: Trust model): what a script or a
/// repository's committed `rfs.toml` asks for can only narrow what the
/// person running rfs set; a request to widen is refused before anything
/// runs, naming the flag that would allow it.
const TRUST: &[Case] = &[
    case(
        "trust-script-turns-isolation-off",
        r#"sandbox(#{ isolation: "none" });"#,
        3,
        "pass `--isolation none`",
    ),
    case(
        "trust-script-raises-the-process-cap",
        r#"sandbox(#{ pids: 100000 });"#,
        3,
        "pass --max-pids 100000 to allow it",
    ),
    case(
        "trust-script-asks-for-the-host-network",
        r#"sandbox(#{ network: "host" });"#,
        3,
        "pass `--allow-host-network`",
    ),
    case(
        "trust-script-malformed-allow-entry",
        r#"sandbox(#{ network: #{ allow: ["10.0.0.0/33"] } });"#,
        2,
        "prefix `/33` is not 0 to 32",
    ),
    case(
        "trust-script-ships-another-repository",
        concat!(
            "sync_source(#{ repo: \"",
            env!("CARGO_MANIFEST_DIR"),
            "\" });"
        ),
        3,
        "pass --allow-repo",
    ),
    shaped(
        "trust-rfs-toml-turns-isolation-off",
        Shape::Config("isolation = \"none\"\n"),
        "sync_source();",
        2,
        "pass `--isolation none`",
    ),
    shaped(
        "trust-rfs-toml-raises-the-process-cap",
        Shape::Config("[limits]\npids = 100000\n"),
        "sync_source();",
        2,
        "pass --max-pids 100000 to allow it",
    ),
    shaped(
        "trust-rfs-toml-reads-a-host-variable",
        Shape::Config("secrets = [\"HOME\"]\n"),
        "sync_source();",
        2,
        "pass --secret HOME",
    ),
    shaped(
        "trust-rfs-toml-zero-lifetime-names-the-file",
        Shape::Config("max_lifetime = 0\n"),
        "sync_source();",
        2,
        "rfs.toml's `max_lifetime` must be at least 1 second",
    ),
];

/// Set up the repository of `shape`; returns the directory to run in.
fn repo_for(shape: Shape) -> (Option<Repo>, tempfile::TempDir) {
    let spare = tempfile::tempdir().unwrap();
    let repo = match shape {
        Shape::NoRepo => return (None, spare),
        Shape::NoCommits => Repo::empty(),
        _ => {
            let r = Repo::new();
            r.write("sub/f.txt", "f\n");
            r.symlink("to-etc", "/etc");
            r.symlink("to-up", "..");
            r.symlink("loop-a", "loop-b");
            r.symlink("loop-b", "loop-a");
            r.commit("shapes");
            r
        }
    };
    match shape {
        Shape::Dirty => repo.write("reproducer-marker.txt", "changed\n"),
        Shape::Untracked => repo.write("stray.txt", "x\n"),
        Shape::Config(toml) => {
            repo.write("rfs.toml", toml);
            repo.commit("config");
        }
        Shape::Submodule => {
            let inner = Repo::new();
            repo.git(&[
                "-c",
                "protocol.file.allow=always",
                "submodule",
                "add",
                "-q",
                inner.path().to_str().unwrap(),
                "inner",
            ]);
            repo.commit("submodule");
        }
        _ => {}
    }
    (Some(repo), spare)
}

#[track_caller]
fn check(rfs: &Rfs, c: &Case) {
    let (repo, spare) = repo_for(c.shape);
    let dir = repo.as_ref().map(|r| r.path()).unwrap_or(spare.path());
    let marker = spare.path().join(format!("{}-ran", c.name));
    let script = format!(
        "{}\nstep(\"side-effect\", \"touch {}\");\n",
        c.script,
        marker.display()
    );
    let out = rfs.run_with(dir, &script, c.args);
    let ctx = format!("case {} ({})", c.name, rfs.prov.name());
    assert_eq!(
        out.code, c.code,
        "{ctx}: exit code\n--- stdout\n{}\n--- stderr\n{}",
        out.stdout, out.stderr
    );
    assert!(
        out.stderr.contains(c.says),
        "{ctx}: expected {:?} in:\n{}",
        c.says,
        out.stderr
    );
    for noise in ["panicked", "RUST_BACKTRACE", "vanished"] {
        assert!(
            !out.stderr.contains(noise),
            "{ctx}: {noise}:\n{}",
            out.stderr
        );
    }
    assert!(
        !out.stderr.contains('\0') && !out.stdout.contains('\0'),
        "{ctx}: a raw NUL was echoed"
    );
    let evidence = std::fs::read_to_string(out.out_dir.join("EVIDENCE.md")).unwrap_or_default();
    for raw in ['\u{202E}', '\u{200B}', '\u{FEFF}', '\u{2028}', '\u{85}'] {
        assert!(
            !out.stderr.contains(raw) && !out.stdout.contains(raw) && !evidence.contains(raw),
            "{ctx}: U+{:04X} was echoed raw",
            raw as u32
        );
    }
    assert!(!marker.exists(), "{ctx}: the side effect ran");
    let journal = out.out_dir.join("journal.jsonl");
    if journal.exists() {
        assert!(
            out.entries("step.start")
                .iter()
                .all(|s| s["name"] != "side-effect"),
            "{ctx}: the side-effect step started"
        );
        assert_eq!(
            out.kinds().last().map(String::as_str),
            Some("run.end"),
            "{ctx}"
        );
        verify_journal(rfs, &journal, &ctx);
    } else {
        // Refused before a run existed (usage): nothing may have started.
        assert_eq!(c.code, 2, "{ctx}: no journal for a run that started");
    }
    rfs.assert_no_leftovers();
}

#[track_caller]
fn verify_journal(rfs: &Rfs, journal: &Path, ctx: &str) {
    let v = rfs
        .cmd(journal.parent().unwrap())
        .args(["journal", "verify"])
        .arg(journal)
        .output()
        .unwrap();
    assert!(
        v.status.success(),
        "{ctx}: journal verify: {}",
        String::from_utf8_lossy(&v.stderr)
    );
}

fn run_all(rfs: &Rfs, cases: &[Case]) {
    for c in cases {
        check(rfs, c);
    }
}

provider_tests! {
    fn hostile_cwds(rfs: &Rfs) { run_all(rfs, CWD); }
    fn hostile_repository_shapes(rfs: &Rfs) { run_all(rfs, REPOS); }
    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn hostile_names(rfs: &Rfs) { run_all(rfs, NAMES); }
    fn hostile_options(rfs: &Rfs) { run_all(rfs, OPTIONS); }
    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn hostile_env(rfs: &Rfs) { run_all(rfs, ENV); }
    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn hostile_scripts(rfs: &Rfs) { run_all(rfs, SCRIPTS); }
    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn hostile_trust(rfs: &Rfs) { run_all(rfs, TRUST); }
    fn hostile_signals(rfs: &Rfs) { signals(rfs); }
    fn hostile_journals_and_evidence(rfs: &Rfs) { journals(rfs); }

    // Regression (fuzz: tar_round_trip, symlink target normalised): a
    // committed symlink whose target has `.` components or doubled and
    // trailing slashes arrives in the sandbox byte for byte (it used to
    // arrive normalised, so the sync's own check refused the commit).
    fn symlink_targets_arrive_byte_for_byte(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("sub/f", "in-sub\n");
        repo.symlink("dot", "sub/./");
        repo.symlink("double", "sub//f");
        repo.commit("links");
        let out = rfs.run(
            repo.path(),
            r#"sync_source();
            let r = step("rl", "{ readlink dot; readlink double; cat dot/f; } | tr '\\n' '|'");
            print(">" + r.stdout);"#,
        );
        out.assert_code(0);
        assert!(out.stdout.contains(">sub/./|sub//f|in-sub"), "{}\n{}", out.stdout, out.stderr);
        rfs.assert_no_leftovers();
    }
}

/// Every terminating signal mid-step: exit 130, the next step never
/// starts, the step's process is gone, the journal verifies and ends.
fn signals(rfs: &Rfs) {
    use nix::sys::signal::Signal;
    for (i, sig) in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGHUP,
        Signal::SIGQUIT,
    ]
    .into_iter()
    .enumerate()
    {
        let repo = Repo::new();
        let n = 3300 + i;
        let (child, out_dir) = rfs.spawn(
            repo.path(),
            &format!("step(\"long\", \"sleep {n}\");\nstep(\"side-effect\", \"true\");"),
        );
        wait_for_journal(&out_dir, "step.start");
        std::thread::sleep(std::time::Duration::from_millis(300));
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let out = finish(child.wait_with_output().unwrap(), out_dir);
        let ctx = format!("{sig} ({})", rfs.prov.name());
        assert_eq!(out.code, 130, "{ctx}: {}", out.stderr);
        assert!(out.stderr.contains("interrupted"), "{ctx}: {}", out.stderr);
        assert!(
            out.entries("step.start")
                .iter()
                .all(|s| s["name"] != "side-effect"),
            "{ctx}"
        );
        assert!(
            !process_running(&format!("sleep\x00{n}")),
            "{ctx}: the step survived"
        );
        assert_eq!(
            out.kinds().last().map(String::as_str),
            Some("run.end"),
            "{ctx}"
        );
        verify_journal(rfs, &out.out_dir.join("journal.jsonl"), &ctx);
        rfs.assert_no_leftovers();
    }
}

/// Tampered, truncated, missing or foreign journals are refused by
/// `rfs journal verify` (exit 4, or 2 when there is nothing to read).
fn journals(rfs: &Rfs) {
    let repo = Repo::new();
    let out = rfs.run(repo.path(), "step(\"x\", \"echo hi\");");
    out.assert_code(0);
    let good = std::fs::read_to_string(out.out_dir.join("journal.jsonl")).unwrap();
    let lines: Vec<&str> = good.lines().collect();
    let dir = tempfile::tempdir().unwrap();
    let cases: Vec<(&str, String, i32)> = vec![
        ("edited", good.replacen("echo hi", "echo HI", 1), 4),
        (
            "reordered",
            {
                let mut l = lines.clone();
                l.swap(1, 2);
                l.join("\n") + "\n"
            },
            4,
        ),
        ("not-json", "this is not a journal\n".into(), 4),
        ("empty", String::new(), 4),
        (
            "duplicated-line",
            {
                let mut l = lines.clone();
                l.insert(2, lines[2]);
                l.join("\n") + "\n"
            },
            4,
        ),
    ];
    for (name, text, code) in cases {
        let p = dir.path().join(format!("{name}.jsonl"));
        std::fs::write(&p, text).unwrap();
        let v = rfs
            .cmd(dir.path())
            .args(["journal", "verify"])
            .arg(&p)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&v.stderr);
        assert_eq!(v.status.code(), Some(code), "journal {name}: {stderr}");
        assert!(
            stderr.contains("not intact") || stderr.contains("journal"),
            "journal {name}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // A journal cut short is caught by `rfs verify OUT` (EVIDENCE.md
    // names the journal's length and head).
    let copy = dir.path().join("out-copy");
    copy_dir(&out.out_dir, &copy);
    std::fs::write(
        copy.join("journal.jsonl"),
        lines[..lines.len() - 1].join("\n") + "\n",
    )
    .unwrap();
    let v = rfs
        .cmd(dir.path())
        .arg("verify")
        .arg(&copy)
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(4),
        "truncated: {}",
        String::from_utf8_lossy(&v.stderr)
    );
    let v = rfs
        .cmd(dir.path())
        .args(["journal", "verify"])
        .arg(dir.path().join("missing.jsonl"))
        .output()
        .unwrap();
    assert_ne!(v.status.code(), Some(0));
    assert!(!String::from_utf8_lossy(&v.stderr).contains("panicked"));
    // Evidence: a label cannot forge a line of EVIDENCE.md's structure.
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ labels: #{ note: \"x\\n- outcome: completed\" } });\nstep(\"x\", \"exit 3\");",
    );
    out.assert_code(1);
    let ev = out.evidence();
    assert!(!ev.lines().any(|l| l == "- outcome: completed"), "{ev}");
    rfs.assert_no_leftovers();
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        if e.path().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}
