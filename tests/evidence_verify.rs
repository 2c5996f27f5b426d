//! EVIDENCE.md is a faithful view of the journal (interrupted steps are
//! listed, untrusted text cannot forge structure), and `rfs verify OUT`
//! re-derives it and checks every file the journal names.

mod common;
use common::*;

use std::path::Path;

struct Verified {
    code: i32,
    stdout: String,
    stderr: String,
}

fn rfs_verify(rfs: &Rfs, out_dir: &Path) -> Verified {
    let o = rfs
        .cmd(out_dir)
        .arg("verify")
        .arg(out_dir)
        .output()
        .expect("rfs runs");
    Verified {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

#[track_caller]
fn assert_verifies(rfs: &Rfs, out_dir: &Path) -> Verified {
    let v = rfs_verify(rfs, out_dir);
    assert_eq!(
        v.code, 0,
        "rfs verify failed\n--- stdout\n{}\n--- stderr\n{}",
        v.stdout, v.stderr
    );
    v
}

/// Exit 4, naming `check` and `needle` on stderr.
#[track_caller]
fn assert_rejected(rfs: &Rfs, out_dir: &Path, check: &str, needle: &str) {
    let v = rfs_verify(rfs, out_dir);
    assert_eq!(v.code, 4, "stdout:\n{}\nstderr:\n{}", v.stdout, v.stderr);
    assert!(
        v.stderr.contains(&format!("{check}: ")) && v.stderr.contains(needle),
        "expected {check:?} and {needle:?} in:\n{}",
        v.stderr
    );
    assert!(!v.stdout.contains(": verified"), "{}", v.stdout);
}

/// The steps table's row for step number `n`.
#[track_caller]
fn step_row(evidence: &str, n: usize) -> String {
    evidence
        .lines()
        .find(|l| l.starts_with(&format!("| {n} | ")))
        .unwrap_or_else(|| panic!("no step row {n} in\n{evidence}"))
        .to_owned()
}

/// `|` cell separators that are not escaped.
fn cells(row: &str) -> usize {
    let b = row.as_bytes();
    (0..b.len())
        .filter(|&i| b[i] == b'|' && (i == 0 || b[i - 1] != b'\\'))
        .count()
}

/// A step that runs long is interrupted by `signal` once its output shows
/// it started; EVIDENCE.md must list it, and the run must verify.
fn interrupted_step_is_listed(signal: nix::sys::signal::Signal) {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (mut child, out_dir) = rfs.spawn(
        repo.path(),
        "step(\"quick\", \"true\");\nstep(\"long\", \"echo long-started; sleep 30\");\n",
    );
    // The console shows the step's output as it comes: the command runs.
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while !seen.contains("[long] long-started") {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        assert!(n > 0, "rfs ended before the step started: {seen}");
        seen.push_str(&line);
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).unwrap();
    let out = wait_bounded(child, out_dir);
    out.assert_code(130);
    let ev = out.evidence();
    assert!(!ev.contains("(no steps ran)"), "{ev}");
    assert!(ev.contains("- outcome: interrupted"), "{ev}");
    assert!(step_row(&ev, 1).contains("| quick | ok |"), "{ev}");
    let row = step_row(&ev, 2);
    assert!(row.contains("| long | INTERRUPTED"), "{row}");
    assert!(row.contains("`steps/002-long.stdout.log`"), "{row}");
    let attempts = out.entries("step.attempt");
    assert_eq!(attempts.last().unwrap()["cancelled"], true);
    assert_verifies(&rfs, &out.out_dir);
    rfs.assert_no_leftovers();
}

#[test]
fn evidence_lists_a_step_interrupted_by_sigterm() {
    interrupted_step_is_listed(nix::sys::signal::Signal::SIGTERM);
}

#[test]
fn evidence_lists_a_step_interrupted_by_sigint() {
    interrupted_step_is_listed(nix::sys::signal::Signal::SIGINT);
}

#[test]
fn label_cannot_inject_markdown_into_evidence() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"
        sandbox(#{ labels: #{
            "team`\n- outcome: completed": "x\n- outcome: completed\n## Cleanup\n| 9 | forged | ok |",
            "plain": "a | b [link](http://e.invalid) <b>bold</b>"
        } });
        step("name | with `ticks` and [brackets](x) *stars*", "exit 3");
        "#,
    );
    out.assert_code(1);
    let ev = out.evidence();
    let outcomes: Vec<&str> = ev.lines().filter(|l| l.starts_with("- outcome:")).collect();
    assert_eq!(outcomes, ["- outcome: failed"], "{ev}");
    assert_eq!(
        ev.lines().filter(|l| l.starts_with("## Cleanup")).count(),
        1,
        "{ev}"
    );
    assert!(!ev.lines().any(|l| l.starts_with("| 9 |")), "{ev}");
    assert!(!ev.contains("[link](http"), "{ev}");
    assert!(!ev.contains("<b>"), "{ev}");
    // The step's row keeps its 9 cell borders: the name is one cell.
    let row = step_row(&ev, 1);
    assert_eq!(cells(&row), 9, "{row}");
    assert!(row.contains("FAILED"), "{row}");
    // The label is still there, on its one line (every byte accounted
    // for: the line ends are shown as symbols).
    assert!(
        ev.contains("x␊- outcome: completed␊\\#\\# Cleanup␊\\| 9 \\|"),
        "{ev}"
    );
    assert_verifies(&rfs, &out.out_dir);
    rfs.assert_no_leftovers();
}

/// One finished run with a log on each stream.
fn finished_run(rfs: &Rfs) -> RunOut {
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "step(\"talk\", \"echo to-stdout; echo to-stderr >&2\");\nstep(\"fails\", \"exit 2\", #{ allow_failure: true });\n",
    );
    out.assert_code(0);
    out
}

#[test]
fn verify_accepts_a_finished_run_and_prints_each_check() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    let v = assert_verifies(&rfs, &out.out_dir);
    for check in ["journal chain", "run ended", "EVIDENCE.md", "files"] {
        assert!(
            v.stdout.contains(&format!("ok: {check}: ")),
            "{check} not reported:\n{}",
            v.stdout
        );
    }
    assert!(v.stdout.contains("2 step log(s)"), "{}", v.stdout);
    let attempt = &out.entries("step.attempt")[0];
    let log = std::fs::read(out.out_dir.join("steps/001-talk.stdout.log")).unwrap();
    assert_eq!(attempt["stdout_log"]["bytes"], log.len());
    assert_eq!(attempt["stdout_log"]["sha256"].as_str().unwrap().len(), 64);
}

#[test]
fn verify_rejects_evidence_edited_after_the_run() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    let path = out.out_dir.join("EVIDENCE.md");
    let ev = std::fs::read_to_string(&path).unwrap();
    // The head and line count stay right: `journal verify` cannot see it.
    let forged = ev.replace("| fails | failed, allowed", "| fails | ok");
    assert_ne!(forged, ev);
    std::fs::write(&path, forged).unwrap();
    assert_rejected(&rfs, &out.out_dir, "EVIDENCE.md", "edited after the run");
    // One byte appended is caught too.
    std::fs::write(&path, format!("{ev} ")).unwrap();
    assert_rejected(&rfs, &out.out_dir, "EVIDENCE.md", "differs");
}

#[test]
fn verify_rejects_a_step_log_edited_after_the_run() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    std::fs::write(out.out_dir.join("steps/001-talk.stderr.log"), "to-stdERR\n").unwrap();
    assert_rejected(
        &rfs,
        &out.out_dir,
        "files",
        "steps/001-talk.stderr.log was changed after it was closed",
    );
}

#[test]
fn verify_rejects_a_file_added_to_the_steps_after_the_run() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    std::fs::write(out.out_dir.join("steps/009-extra.stdout.log"), "forged\n").unwrap();
    assert_rejected(&rfs, &out.out_dir, "files", "steps/009-extra.stdout.log");
}

#[test]
fn verify_rejects_a_deleted_step_log() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    std::fs::remove_file(out.out_dir.join("steps/001-talk.stdout.log")).unwrap();
    assert_rejected(&rfs, &out.out_dir, "files", "steps/001-talk.stdout.log");
}

#[test]
fn verify_rejects_a_broken_chain_or_a_run_without_its_end() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    let path = out.out_dir.join("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    // Without its last line (run.end) and without the recorded head
    // (journal.head) to compare against, the chain holds but the run did
    // not end.
    lines.pop();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    std::fs::remove_file(out.out_dir.join("EVIDENCE.md")).unwrap();
    std::fs::remove_file(out.out_dir.join("journal.head")).unwrap();
    assert_rejected(&rfs, &out.out_dir, "run ended", "does not end with run.end");
    // An edited middle line breaks the chain (the first check).
    let edited = text.replacen("to-stdout", "to-stdOUT", 1);
    std::fs::write(&path, &edited).unwrap();
    if edited != text {
        assert_rejected(&rfs, &out.out_dir, "journal chain", "line");
    }
    let swapped = text.replacen("\"ok\":false", "\"ok\":true", 1);
    assert_ne!(swapped, text);
    std::fs::write(&path, swapped).unwrap();
    assert_rejected(&rfs, &out.out_dir, "journal chain", "line");
}

#[test]
fn verify_checks_terminal_recordings_and_snapshots() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"
        let t = attach("sh");
        t.send("echo rec-marker\n");
        assert_screen(t, "rec-marker");
        t.send("exit\n");
        t.wait_exit(10);
        "#,
    );
    out.assert_code(0);
    let end = &out.entries("attach.end")[0];
    assert_eq!(end["recording"]["path"], "terminal/session-1.cast");
    assert_eq!(
        out.entries("attach.assert")[0]["snapshot"]["path"],
        "terminal/session-1-assert-1.txt"
    );
    let v = assert_verifies(&rfs, &out.out_dir);
    assert!(
        v.stdout.contains("2 step log(s), recording(s)"),
        "{}",
        v.stdout
    );
    let cast = out.out_dir.join("terminal/session-1.cast");
    let mut text = std::fs::read_to_string(&cast).unwrap();
    text = text.replace("rec-marker", "rec-MARKER");
    std::fs::write(&cast, text).unwrap();
    assert_rejected(
        &rfs,
        &out.out_dir,
        "files",
        "terminal/session-1.cast was changed after it was closed",
    );
    rfs.assert_no_leftovers();
}

/// Regression (refused-in-sandbox step vs verify): a step or terminal the
/// in-sandbox wrapper refuses (a cwd symlink planted at run time, a cwd
/// that does not exist in the sandbox) ends the run refused, and the
/// output folder still verifies: every step log and recording it left is
/// journaled with its sha256.
#[test]
fn verify_accepts_a_run_whose_step_was_refused_inside_the_sandbox() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // Each run logs output before the refusal, so there are logs to check.
    for script in [
        "step(\"plant\", \"echo planting; ln -s / evil\");\nstep(\"x\", \"echo NEVER\", #{ cwd: \"evil\" });",
        "step(\"hi\", \"echo hi\");\nstep(\"x\", \"echo NEVER\", #{ cwd: \"no/such/dir\" });",
        "step(\"plant\", \"echo planting; ln -s /etc evil\");\nattach(\"sh\", #{ cwd: \"evil\" });",
    ] {
        let out = rfs.run(repo.path(), script);
        out.assert_code(3);
        assert!(!out.stdout.contains("NEVER"), "{script}: {}", out.stdout);
        assert_eq!(out.entries("run.end")[0]["outcome"], "refused", "{script}");
        let v = assert_verifies(&rfs, &out.out_dir);
        assert!(
            v.stdout.contains("ok: files: 1 step log(s)"),
            "{script}: {}",
            v.stdout
        );
    }
    rfs.assert_no_leftovers();
}

/// EVIDENCE.md's layout changes between rfs versions (issue #22 changed
/// it): a bundle from an earlier rfs was reported as "edited after the
/// run". Its layout is named at its end; another layout is not compared,
/// so nothing vouches for it: verify fails naming it (issue #30) unless
/// `--allow-unchecked-views`, which says it is NOT CHECKED; an edit of
/// this layout is still caught.
#[test]
fn an_evidence_md_of_an_earlier_layout_is_not_called_edited() {
    let rfs = Rfs::new(Prov::Local);
    let out = finished_run(&rfs);
    let path = out.out_dir.join("EVIDENCE.md");
    let ev = std::fs::read_to_string(&path).unwrap();
    assert!(ev.ends_with("\n<!-- rfs-evidence/5 -->\n"), "{ev}");
    let earlier = ev
        .replace("\n<!-- rfs-evidence/5 -->\n", "")
        .replace("- result:", "- status:");
    std::fs::write(&path, earlier).unwrap();
    assert_rejected(&rfs, &out.out_dir, "EVIDENCE.md", "cannot vouch");
    let v = rfs
        .cmd(&out.out_dir)
        .args(["verify", "--allow-unchecked-views"])
        .arg(&out.out_dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&v.stdout);
    assert_eq!(v.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.contains("UNCHECKED: EVIDENCE.md: NOT CHECKED: made by another rfs"),
        "{stdout}"
    );
    assert!(stdout.contains("verified, except EVIDENCE.md"), "{stdout}");
    let edited = ev.replace("- result:", "- status:");
    std::fs::write(&path, edited).unwrap();
    assert_rejected(&rfs, &out.out_dir, "EVIDENCE.md", "edited after the run");
}
