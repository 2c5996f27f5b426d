//! Errors that point at the user, not at rfs (issue #32, item 8): a
//! command not found reads as the user's shell says it (no wrapper name or
//! line); a failure inside an imported helper is shown at the helper's
//! line, with the call as context; the REPL shows a step's output once;
//! `:save` says truly whether it dirtied a working tree; the REPL's
//! `:screen` is redacted as `rfs mcp`'s is; counts of one are singular.

mod common;
use common::*;

provider_tests! {
    fn a_command_not_found_reads_as_the_users_shell_says_it_not_as_the_wrapper(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"
            let r = step("py", "python3-not-installed-here --version", #{ allow_failure: true });
            assert(r.exit == 127, `exit ${r.exit}`);
            print("STDERR<" + r.stderr + ">");
            // The command runs as `sh -c COMMAND` would: $0 is sh, no
            // arguments, and the wrapper takes no variable from it.
            let v = step("vars", "echo \"zero=$0 args=$# c=$c n=$n\"", #{ env: #{ c: "cee", n: "en" } });
            assert(v.stdout == "zero=sh args=0 c=cee n=en\n", v.stdout);
        "#);
        out.assert_code(0);
        let console = format!("{}{}", out.stdout, out.stderr);
        let said = console
            .split("STDERR<")
            .nth(1)
            .and_then(|s| s.split('>').next())
            .unwrap_or_else(|| panic!("{console}"));
        assert!(
            said.starts_with("sh: ") && said.contains("python3-not-installed-here: not found"),
            "{said}"
        );
        for wrapper in ["rfs-wrapper", "eval", "line 7", "line 8", "line 9"] {
            assert!(!console.contains(wrapper), "{wrapper} in {console}");
        }
    }

    fn counts_of_one_are_singular_and_others_plural(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), r#"sync_source(); step("s", "true");"#);
        out.assert_code(0);
        // Repo::new commits one file.
        assert!(out.stderr.contains("(tree ") && out.stderr.contains(", 1 file verified)"), "{}", out.stderr);
        let evidence = out.evidence();
        let re = regex::Regex::new(r"\((\d+) (sandbox|sandboxes) listed\) after (\d+) (poll|polls),").unwrap();
        let c = re.captures(&evidence).unwrap_or_else(|| panic!("{evidence}"));
        assert_eq!(&c[1] == "1", &c[2] == "sandbox", "{evidence}");
        assert_eq!(&c[3] == "1", &c[4] == "poll", "{evidence}");
        assert!(!evidence.contains("poll(s)"), "{evidence}");
    }
}

/// With exactly one other sandbox alive, the inventory lists one: "1
/// sandbox listed", never "1 sandboxes listed".
#[test]
fn one_sandbox_listed_is_said_in_the_singular() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (other, other_out) = rfs.spawn(repo.path(), r#"step("long", "sleep 60");"#);
    wait_for_journal(&other_out, "step.start");
    let out = rfs.run(repo.path(), r#"step("s", "true");"#);
    sigint(&other);
    let ended = wait_bounded(other, other_out);
    out.assert_code(0);
    let evidence = out.evidence();
    assert!(evidence.contains("(1 sandbox listed)"), "{evidence}");
    assert!(!evidence.contains("sandboxes listed"), "{evidence}");
    assert_ne!(ended.code, 0);
    rfs.assert_no_leftovers();
}

/// A step failing inside a helper of an imported module: the diagnostic
/// shows the helper's line in the module, and the call in the script as
/// context (it used to show only the call, `in call to 'pytest'`).
#[test]
fn a_failure_inside_an_imported_helper_points_at_the_helpers_line_with_the_call_as_context() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "proofs/helpers.rhai",
        "// test helpers\nfn pytest(args) {\n    let n = 1;\n    step(\"pytest\", \"echo running; exit 3\");\n}\n",
    );
    repo.write(
        "proofs/main.rhai",
        "import \"helpers\" as h;\n\nsync_source();\nh::pytest(\"-q\");\n",
    );
    repo.commit("a proof with a helper");
    let out = rfs
        .cmd(repo.path())
        .args(["run", "proofs/main.rhai"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    // The module's own line, with its position.
    assert!(stderr.contains("proofs/helpers.rhai:4:5"), "{stderr}");
    assert!(
        stderr.contains("step(\"pytest\", \"echo running; exit 3\");"),
        "{stderr}"
    );
    // The call in the script, as context.
    assert!(stderr.contains("called from proofs/main.rhai"), "{stderr}");
    assert!(stderr.contains("proofs/main.rhai:4:4"), "{stderr}");
    assert!(stderr.contains("h::pytest(\"-q\");"), "{stderr}");
    // The module's line comes first: the failure is there.
    assert!(
        stderr.find("helpers.rhai:4:5").unwrap() < stderr.find("main.rhai:4:4").unwrap(),
        "{stderr}"
    );
}

/// A step's output was streamed as it ran and then printed again as the
/// value of the input; now the value shows the exit and duration only.
#[test]
fn the_repl_prints_a_steps_output_once() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.repl(
        repo.path(),
        b"step(\"hello\", \"echo out-$((40+2)); echo err-$((40+3)) >&2\")\nlet r = step(\"again\", \"echo kept-$((1+1))\");\nr\n",
        &[],
    );
    out.assert_code(0);
    let all = format!("{}{}", out.stdout, out.stderr);
    assert_eq!(all.matches("out-42").count(), 1, "{all}");
    assert_eq!(all.matches("err-43").count(), 1, "{all}");
    assert!(out.stdout.contains("step ok: exit 0"), "{}", out.stdout);
    // A step result shown later (no step ran in that input) still shows
    // its output: it was not on the screen just above.
    assert_eq!(all.matches("kept-2").count(), 2, "{all}");
}

/// `:save` decided "outside the repository: the working tree stays clean"
/// from where the REPL started, so a file saved into a repository from
/// elsewhere dirtied a tree it said was clean. It now looks from the file.
#[test]
fn repl_save_says_which_working_tree_it_dirtied_wherever_the_repl_started() {
    let rfs = Rfs::new(Prov::Local);
    let here = Repo::new();
    let other = Repo::new();
    other.write(".gitignore", "ignored/\n");
    std::fs::create_dir_all(other.path().join("ignored")).unwrap();
    other.commit("ignore a folder");
    let into_other = other.path().join("saved.rhai");
    let into_ignored = other.path().join("ignored/saved.rhai");
    let out = rfs.repl(
        here.path(),
        format!(
            "1 + 1\n:save {}\n:save {}\n",
            into_other.display(),
            into_ignored.display()
        )
        .as_bytes(),
        &[],
    );
    out.assert_code(0);
    let status = other.git(&["status", "--porcelain"]);
    assert!(status.contains("saved.rhai"), "{status}");
    let root = other.path().canonicalize().unwrap();
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("saved "))
        .collect();
    assert_eq!(lines.len(), 2, "{}", out.stdout);
    assert!(lines[0].starts_with("saved 1 input to "), "{}", lines[0]);
    assert!(
        lines[0].contains(&format!("inside the repository {}", root.display()))
            && lines[0].contains("commit it")
            && !lines[0].contains("stays clean"),
        "{}",
        lines[0]
    );
    // Ignored by git: the tree stays clean, and it says so truly.
    assert!(!status.contains("ignored/"), "{status}");
    assert!(
        lines[1].contains("ignored by git") && lines[1].contains("stays clean"),
        "{}",
        lines[1]
    );
    assert!(here.git(&["status", "--porcelain"]).is_empty());
}

/// `:screen` showed a secret the program drew; `rfs mcp`'s `screen` masks
/// it, and now so does the REPL (and a screen printed as a value).
#[test]
fn repl_screen_redacts_secrets() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let input = "let t = attach(\"sh\", #{ cols: 100, rows: 8 });\n\
        t.send(\"printf '%s-%s %s-%s all-%s\\\\n' vartok 8841 envtok 7730 shown\\n\");\n\
        assert_screen(t, #{ text: \"all-shown\", timeout: 30 });\n\
        :screen\n\
        screen(t)\n";
    let out = rfs.repl_with_env(
        repo.path(),
        input.as_bytes(),
        &["--var", "API_TOKEN=vartok-8841"],
        &[("OTHER_SERVICE_TOKEN", "envtok-7730")],
    );
    out.assert_code(0);
    for secret in ["vartok-8841", "envtok-7730"] {
        assert!(!out.stdout.contains(secret), "{secret}: {}", out.stdout);
    }
    assert!(out.stdout.contains("session 1 `sh`"), "{}", out.stdout);
    // Once on :screen, once in the printed value, each secret masked.
    assert!(
        out.stdout.matches("[REDACTED]").count() >= 4
            && out.stdout.matches("all-shown").count() >= 2,
        "{}",
        out.stdout
    );
}

trait ReplWithEnv {
    fn repl_with_env(
        &self,
        cwd: &std::path::Path,
        input: &[u8],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> RunOut;
}

impl ReplWithEnv for Rfs {
    /// [`Rfs::repl`] with extra environment variables.
    fn repl_with_env(
        &self,
        cwd: &std::path::Path,
        input: &[u8],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> RunOut {
        use std::io::Write as _;
        let out_dir = self.state.path().join("out").join(uuid_like());
        let mut child = self
            .cmd(cwd)
            .arg("repl")
            .args(args)
            .arg("--out")
            .arg(&out_dir)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("rfs repl starts");
        child.stdin.take().unwrap().write_all(input).unwrap();
        finish(child.wait_with_output().unwrap(), out_dir)
    }
}
