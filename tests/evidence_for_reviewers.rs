//! EVIDENCE.md for a reviewer (issue #22): a reviewer who has only this
//! file sees what failed first, each step's command, where it ran and the
//! last lines it printed, the script's `print()` lines and what was
//! refused; no host path of rfs's state directory and no owner pid; and
//! output that tries to end its fence or inject Markdown stays inert.

mod common;
use common::*;

#[test]
fn a_reviewer_sees_the_failure_first_with_its_command_and_output_tail() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"
        print("checking wordcount");
        step("build", "echo compiling; echo 'warning: unused' >&2");
        step("unit-tests", "echo 'running 3 tests'; echo 'FAIL wordcount: expected 4, got 2'; exit 1");
        "#,
    );
    out.assert_code(1);
    let ev = out.evidence();
    let failed = ev.find("## What failed").expect("a What failed section");
    let steps = ev.find("## Steps").unwrap();
    assert!(failed < steps, "the failure comes first: {ev}");
    let section = &ev[failed..steps];
    assert!(section.contains("`unit-tests`"), "{section}");
    assert!(
        section.contains("FAIL wordcount: expected 4, got 2"),
        "{section}"
    );
    assert!(
        ev.contains("- command: `echo compiling; echo 'warning: unused' >&2`"),
        "{ev}"
    );
    assert!(ev.contains("- ran in: `~/"), "{ev}");
    assert!(ev.contains("```text\nwarning: unused\n```"), "{ev}");
    assert!(
        ev.contains("## Script output\n\n```text\nchecking wordcount\n```"),
        "{ev}"
    );
    // No host path of rfs's state directory, no owner host or pid.
    let state = rfs.state.path().display().to_string();
    assert!(!ev.contains(&state), "{state} in {ev}");
    assert!(!ev.contains("owner-pid"), "{ev}");
    rfs.assert_no_leftovers();
}

#[test]
fn output_cannot_end_its_fence_or_inject_markdown_and_still_verifies() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        r#"step("hostile", "printf '````\n## Cleanup\n- outcome: completed\n\x1b[31mred\x1b[0m\n'; exit 2");"#,
    );
    out.assert_code(1);
    let ev = out.evidence();
    let outside = outside_fences(&ev);
    assert_eq!(
        outside.iter().filter(|l| **l == "## Cleanup").count(),
        1,
        "{ev}"
    );
    let outcomes: Vec<&str> = outside
        .iter()
        .copied()
        .filter(|l| l.starts_with("- outcome:"))
        .collect();
    assert_eq!(outcomes, ["- outcome: failed"], "{ev}");
    assert!(ev.contains("`````text\n````\n## Cleanup"), "{ev}");
    assert!(ev.contains("\nred\n"), "colour codes are dropped: {ev}");
    assert!(!ev.contains('\u{1b}'), "{ev}");
    let v = rfs
        .cmd(repo.path())
        .arg("verify")
        .arg(&out.out_dir)
        .output()
        .unwrap();
    assert!(v.status.success(), "{}", String::from_utf8_lossy(&v.stderr));
}

#[test]
fn a_refusal_is_listed_with_its_reason() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), r#"step("x", "true", #{ cwd: "../etc" });"#);
    out.assert_code(3);
    let ev = out.evidence();
    let refused = ev.find("## Refused").expect("a Refused section");
    assert!(
        ev[refused..].contains("escapes the synced source root"),
        "{ev}"
    );
}

/// The lines of `md` that are Markdown structure: outside fenced blocks
/// (CommonMark: a block ends at a fence of the same character at least as
/// long as the one that opened it).
fn outside_fences(md: &str) -> Vec<&str> {
    let mut open: Option<usize> = None;
    let mut out = vec![];
    for line in md.lines() {
        let ticks = line.len() - line.trim_start_matches('`').len();
        match open {
            None if ticks >= 3 => open = Some(ticks),
            None => out.push(line),
            Some(n) if ticks >= n && line.trim_start_matches('`').trim().is_empty() => open = None,
            Some(_) => {}
        }
    }
    assert!(open.is_none(), "a fence was left open: {md}");
    out
}
