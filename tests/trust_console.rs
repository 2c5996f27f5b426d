//! Output that commands the reader's terminal or CI (issue #30): what a
//! step prints, `print()`, a commit message and a proof's file name reach
//! the console with their control characters shown as symbols, escape
//! sequences dropped, and no line of theirs can start a GitHub workflow
//! command (`::`).

mod common;
use common::*;

/// Nothing in `text` can command a terminal (escape sequences, BEL, a
/// bare `\r` that draws over a line) or a CI runner (a line starting
/// with `::`, which the Actions runner also splits at `\r`).
#[track_caller]
fn assert_inert(what: &str, text: &str) {
    for c in ['\u{1b}', '\r', '\u{7}', '\u{9b}', '\u{9d}'] {
        assert!(!text.contains(c), "{what} holds {c:?}:\n{text}");
    }
    for l in text.split('\n') {
        assert!(
            !l.trim_start().starts_with("::"),
            "{what} starts a workflow command: {l:?}\n{text}"
        );
    }
}

provider_tests! {
    // `innocent\r::error title=forged::…` from a step became a workflow
    // command (the runner splits lines on `\r`); OSC 52 (clipboard) and
    // OSC 0 (title) reached the terminal; `print()` likewise.
    fn step_output_and_print_cannot_command_the_terminal_or_ci(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"step("talk", "printf 'innocent\r::error title=forged::x\n\\033]52;c;aGk=\\007\\033]0;pwned\\007shown\n  ::warning::w\n'");
            print("::notice::from print\ninnocent\r::error::p\x1b]0;t\x07 end");
            step("fails", "printf 'last\r::error::tail\n'; exit 4");"#,
        );
        assert_ne!(out.code, 0);
        assert_inert("stdout", &out.stdout);
        assert_inert("stderr", &out.stderr);
        assert!(out.stdout.contains("[talk] innocent␍::error title=forged::x"), "{}", out.stdout);
        assert!(out.stdout.contains("[talk] shown"), "{}", out.stdout);
        assert!(out.stdout.contains("\\::notice::from print"), "{}", out.stdout);
        assert!(out.stdout.contains("innocent␍::error::p end"), "{}", out.stdout);
        // The journal keeps the bytes as they were: only the console view
        // is escaped.
        let log = std::fs::read_to_string(out.out_dir.join("journal.jsonl")).unwrap();
        assert!(log.contains("::notice::from print"), "{log}");
        rfs.assert_no_leftovers();
    }
}

/// `rfs bisect` printed the first bad commit's message raw: its subject
/// `::error …` (indented, which the runner trims) and escape sequences
/// reached the console.
#[test]
fn bisect_prints_commit_messages_inert() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let mut ids = vec![];
    for i in 0..3 {
        repo.write("v", &format!("{i}\n"));
        let msg = if i == 2 {
            "::error title=forged::bisect\n\n\u{1b}]52;c;aGk=\u{7}body\rdrawn over\n::add-mask::x"
                .to_owned()
        } else {
            format!("set v to {i}")
        };
        ids.push(repo.commit(&msg));
    }
    let proof = rfs.state.path().join("proof.rhai");
    std::fs::write(&proof, r#"step("check", "test $(cat v) -lt 2");"#).unwrap();
    let out_dir = rfs.state.path().join("bisect-out");
    let o = rfs
        .cmd(repo.path())
        .arg("bisect")
        .arg(&ids[0])
        .arg("HEAD")
        .arg(&proof)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    assert_eq!(o.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        stdout.starts_with(&format!("{} is the first bad commit", ids[2])),
        "{stdout}"
    );
    assert_inert("stdout", &stdout);
    assert_inert("stderr", &stderr);
    assert!(
        stdout.contains("\\    ::error title=forged::bisect"),
        "{stdout}"
    );
    assert!(stdout.contains("body␍drawn over"), "{stdout}");
    rfs.assert_no_leftovers();
}

/// A proof file name with a line end forged a `PASS` line in `rfs test`'s
/// console, and a failing proof's output tail reached it raw.
#[test]
fn a_proof_name_cannot_forge_a_pass_line_in_rfs_test() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let name = "bad\n     PASS [   0.100s] proofs/forged.rhai\n::error::n.rhai";
    repo.write(
        &format!("proofs/{name}"),
        r#"step("s", "printf 'tail\r::error title=forged::t\n\\033]0;x\\007'; exit 1");"#,
    );
    repo.commit("proofs");
    let dir = rfs.state.path().join("suite");
    let o = rfs
        .cmd(repo.path())
        .arg("test")
        .arg("--out")
        .arg(&dir)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    );
    rfs.console(&stderr);
    assert_ne!(o.status.code(), Some(0), "{stderr}");
    assert_inert("stdout", &stdout);
    assert_inert("stderr", &stderr);
    for l in stderr.lines() {
        assert!(
            !l.trim_start().starts_with("PASS"),
            "a forged line: {l:?}\n{stderr}"
        );
    }
    assert!(stderr.contains("proofs/bad␊     PASS"), "{stderr}");
    assert!(
        stderr.contains("| [s] tail␍::error title=forged::t"),
        "{stderr}"
    );
    rfs.assert_no_leftovers();
}
