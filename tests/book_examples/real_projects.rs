//! `real-projects.md` is a walkthrough: files and shell commands, run here
//! as a reader would follow them.
//!
//! | block                         | what the test does                          |
//! |-------------------------------|---------------------------------------------|
//! | ```` ```LANG file=PATH ````   | writes the block to PATH in the project     |
//! | ```` ```console ````          | runs each `$ ` line with `sh` in the project, in order; the lines after it are its output |
//! | `project=NAME` after either   | the block belongs to project NAME (the Rust walkthrough's `adder`), not to `calc` |
//!
//! Expected output is matched line by line against what the
//! command printed (stdout, then stderr): `…` stands for anything, runs
//! of blanks count as one; each expected line matches a line of its own,
//! in any order (proofs finish in any order). The rest of the chapter's claims (setup ran
//! once, the cache was used, the server proof's process was stopped, the
//! JUnit report) are asserted on the suite's folder below.

use super::{book_src, git, run_bounded};
use std::path::Path;
use std::process::Command;

#[derive(Debug)]
enum Block {
    File {
        path: String,
        body: String,
        project: Option<String>,
    },
    Console {
        line: usize,
        body: String,
        project: Option<String>,
    },
}

impl Block {
    fn project(&self) -> Option<&str> {
        match self {
            Block::File { project, .. } | Block::Console { project, .. } => project.as_deref(),
        }
    }
}

/// The walkthrough's blocks, in order.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = vec![];
    let mut open: Option<(String, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        match &mut open {
            None => {
                if let Some(info) = line.strip_prefix("```") {
                    open = Some((info.trim().to_owned(), i + 1, String::new()));
                }
            }
            Some((info, start, body)) => {
                if line == "```" {
                    let word = |key: &str| {
                        info.split_whitespace()
                            .find_map(|w| w.strip_prefix(key))
                            .map(str::to_owned)
                    };
                    let project = word("project=");
                    if let Some(path) = word("file=") {
                        out.push(Block::File {
                            path,
                            body: std::mem::take(body),
                            project,
                        });
                    } else if info.split_whitespace().next() == Some("console") {
                        out.push(Block::Console {
                            line: *start,
                            body: std::mem::take(body),
                            project,
                        });
                    }
                    open = None;
                } else {
                    body.push_str(line);
                    body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "an unclosed fence in real-projects.md");
    out
}

fn squeeze(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Whether `actual` shows `expected`, where `…` stands for anything.
fn line_matches(expected: &str, actual: &str) -> bool {
    let (expected, actual) = (squeeze(expected), squeeze(actual));
    let mut rest = actual.as_str();
    let parts: Vec<&str> = expected.split('…').collect();
    for (i, part) in parts.iter().enumerate() {
        let part = if i == 0 { part } else { part.trim_start() };
        let part = if i + 1 == parts.len() {
            part
        } else {
            part.trim_end()
        };
        match rest.find(part) {
            Some(at) if i > 0 || at == 0 => rest = &rest[at + part.len()..],
            _ => return false,
        }
    }
    parts.len() > 1 || rest.is_empty()
}

/// Each expected line must appear in the output, each on a line of its
/// own; in any order, since proofs finish in any order.
fn output_shows(expected: &[&str], output: &str) -> Result<(), String> {
    let mut lines: Vec<&str> = output.lines().collect();
    for want in expected {
        match lines.iter().position(|got| line_matches(want, got)) {
            Some(i) => {
                lines.remove(i);
            }
            None => return Err(format!("the output does not show `{want}`")),
        }
    }
    Ok(())
}

/// Run a console block's commands; `Err` says which command and why.
fn run_console(project: &Path, state: &Path, line: usize, body: &str) -> Result<(), String> {
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_rfs")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut commands: Vec<(String, Vec<&str>)> = vec![];
    for l in body.lines() {
        match l.strip_prefix("$ ") {
            Some(cmd) => commands.push((cmd.to_owned(), vec![])),
            None => commands
                .last_mut()
                .ok_or(format!(
                    "real-projects.md:{line}: output before any `$` line"
                ))?
                .1
                .push(l),
        }
    }
    for (cmd, expected) in commands {
        let mut c = Command::new("sh");
        c.args(["-c", &cmd])
            .current_dir(project)
            .env("PATH", &path)
            .env("RFS_STATE_DIR", state)
            .env("RELAYFLOWS_SANDBOX_PROVIDER", "local")
            .env_remove("RFS_DOCKER_IMAGE")
            .env_remove("GITHUB_STEP_SUMMARY")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_NAME", "Ada")
            .env("GIT_AUTHOR_EMAIL", "ada@example.org")
            .env("GIT_COMMITTER_NAME", "Ada")
            .env("GIT_COMMITTER_EMAIL", "ada@example.org");
        let o = run_bounded(c)?;
        let printed = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        let at = format!("real-projects.md:{line}: `{cmd}`");
        if !o.status.success() {
            return Err(format!("{at} exited {:?}:\n{printed}", o.status.code()));
        }
        output_shows(&expected, &printed).map_err(|e| format!("{at}: {e}:\n{printed}"))?;
    }
    Ok(())
}

fn json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Write the file blocks of `project` (`None`: `calc`) into `dir` (a
/// fresh repository) and run its console blocks there, in order; how
/// many of each.
fn walk(blocks: &[Block], project: Option<&str>, dir: &Path, state: &Path) -> (usize, usize) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    let (mut files, mut consoles) = (0, 0);
    for b in blocks.iter().filter(|b| b.project() == project) {
        match b {
            Block::File { path, body, .. } => {
                let to = dir.join(path);
                std::fs::create_dir_all(to.parent().unwrap()).unwrap();
                std::fs::write(to, body).unwrap();
                files += 1;
            }
            Block::Console { line, body, .. } => {
                run_console(dir, state, *line, body).unwrap_or_else(|e| panic!("{e}"));
                consoles += 1;
            }
        }
    }
    (files, consoles)
}

/// The chapter's text and its blocks, checked to be in the book.
fn chapter() -> (String, Vec<Block>) {
    let text = std::fs::read_to_string(book_src().join("real-projects.md")).unwrap();
    let summary = std::fs::read_to_string(book_src().join("SUMMARY.md")).unwrap();
    assert!(summary.contains("(real-projects.md)"), "not in SUMMARY.md");
    let blocks = blocks(&text);
    (text, blocks)
}

#[test]
fn real_projects_chapter_runs_as_written() {
    let (text, blocks) = chapter();
    let root = tempfile::Builder::new()
        .prefix("rfs-book-real-")
        .tempdir()
        .unwrap();
    let (project, state) = (root.path().join("calc"), root.path().join("state"));
    let (files, consoles) = walk(&blocks, None, &project, &state);
    assert!(
        files >= 9 && consoles >= 3,
        "{files} files, {consoles} consoles"
    );

    // The suite the chapter ran: its one folder under the state directory.
    let suites: Vec<_> = std::fs::read_dir(state.join("suites"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(suites.len(), 1, "{suites:?}");
    let index = json(&suites[0].join("index.json"));
    assert_eq!(index["exit_code"], 0, "{index}");
    assert_eq!(index["counts"]["passed"], 2, "{index}");
    // The setup ran once, and both proofs started from its checkpoint.
    let ckpt = index["setup"]["checkpoint"].as_str().unwrap().to_owned();
    assert_eq!(index["setup"]["removed"][0]["verified"], true, "{index}");
    for proof in ["proofs-unit", "proofs-server"] {
        let journal = std::fs::read_to_string(suites[0].join(proof).join("journal.jsonl")).unwrap();
        let forked = journal
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .any(|e| e.to_string().contains("placement.forked") && e.to_string().contains(&ckpt));
        assert!(forked, "{proof} did not fork {ckpt}");
    }
    // The first run made the cases into the cache; the second found them
    // there and left the cache as it was.
    let unit = std::fs::read_to_string(suites[0].join("proofs-unit/journal.jsonl")).unwrap();
    assert!(
        unit.contains(r#""kind":"cache.mount""#) && unit.contains(r#""name":"calc""#),
        "no cache in the unit proof's journal"
    );
    let log = std::fs::read_to_string(suites[0].join("proofs-unit/steps/001-unittest.stderr.log"))
        .unwrap();
    assert!(log.contains("cases: cases-v1.json made"), "{log}");
    let second = root.path().join("second-run/proofs-unit/journal.jsonl");
    let second = std::fs::read_to_string(second).unwrap();
    let end = second
        .lines()
        .find(|l| l.contains(r#""kind":"cache.end""#))
        .expect("a cache.end fact");
    assert!(end.contains(r#""changed":false"#), "{end}");
    // The server proof's process ended with the proof, its group gone.
    let server = std::fs::read_to_string(suites[0].join("proofs-server/journal.jsonl")).unwrap();
    assert!(
        server.contains("spawn.ready"),
        "the server never became ready"
    );
    assert!(server.contains("spawn.end"), "no spawn.end for the server");
    let logs = suites[0].join("proofs-server/steps");
    let listening = std::fs::read_dir(&logs)
        .unwrap()
        .flatten()
        .any(|e| std::fs::read_to_string(e.path()).is_ok_and(|s| s.contains("Listening on 8765")));
    assert!(listening, "the server's output is not in its bundle");
    // CI: the workflow runs the command the chapter ran.
    assert!(text.contains("- run: rfs test --junit rfs-junit.xml --out"));
}

#[test]
fn console_lines_match_with_ellipses() {
    assert!(line_matches(
        "  PASS [ …s] proofs/unit.rhai",
        "     PASS [   0.731s] proofs/unit.rhai"
    ));
    assert!(line_matches(
        "local calc-… pycache",
        "local    calc-6ad6   pycache   56 files"
    ));
    assert!(!line_matches(
        "  PASS [ …s] proofs/unit.rhai",
        "     FAIL [   0.731s] proofs/unit.rhai"
    ));
    assert!(!line_matches("2 passed", "2 passed, 1 failed"));
    assert!(output_shows(&["a", "b…"], "a\nx\nbc\n").is_ok());
    assert!(output_shows(&["b…", "a"], "a\nx\nbc\n").is_ok());
    assert!(output_shows(&["a…", "a…"], "a\nx\nbc\n").is_err());
}

/// The Rust walkthrough (`project=adder`), with the toolchain that builds
/// this test mounted read-only (`--mount-ro "$(rustc --print sysroot):…"`;
/// without a `rustc` on PATH whose sysroot holds `cargo`, skipped with
/// one line).
#[test]
fn real_projects_rust_walkthrough_runs_as_written() {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    if !sysroot.is_some_and(|s| Path::new(&s).join("bin/cargo").exists()) {
        eprintln!("skipped: no rustc on PATH whose sysroot holds cargo, for the Rust walkthrough");
        return;
    }
    let (_, blocks) = chapter();
    let root = tempfile::Builder::new()
        .prefix("rfs-book-rust-")
        .tempdir()
        .unwrap();
    let (project, state) = (root.path().join("adder"), root.path().join("state"));
    let (files, consoles) = walk(&blocks, Some("adder"), &project, &state);
    assert!(
        files >= 7 && consoles >= 1,
        "{files} files, {consoles} consoles"
    );
    let suite = root.path().join("adder-run");
    let index = json(&suite.join("index.json"));
    assert_eq!(index["counts"]["passed"], 1, "{index}");
    let ckpt = index["setup"]["checkpoint"].as_str().unwrap().to_owned();
    let journal = std::fs::read_to_string(suite.join("proofs-tests/journal.jsonl")).unwrap();
    assert!(
        journal.contains("placement.forked") && journal.contains(&ckpt),
        "the proof did not fork {ckpt}"
    );
    // As the chapter says: the fork compiles nothing, its home being the
    // setup's path (#46 item 1: before, a local fork's home was a path of
    // its own and cargo compiled the crate again).
    let log =
        std::fs::read_to_string(suite.join("proofs-tests/steps/001-test.stderr.log")).unwrap();
    assert!(!log.contains("Compiling"), "{log}");
    assert!(log.contains("Finished"), "{log}");
    let setup = std::fs::read_to_string(suite.join("_setup/steps/001-build.stderr.log")).unwrap();
    assert!(
        setup.contains("Compiling adder"),
        "the setup built it: {setup}"
    );
}
