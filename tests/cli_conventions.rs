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
