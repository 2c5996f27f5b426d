//! `rfs journal verify`: a real run's journal verifies intact, and every
//! kind of tampering with a copy of it (edited, dropped, reordered,
//! truncated, re-serialised lines; an empty file) is detected with exit 4.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::Command;

use sha2::{Digest, Sha256};

const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The script every test journals: prints around one step, so the journal
/// has run.start, prints, source/placement facts, a step and cleanup.
const SCRIPT: &str = r#"
print("alpha-marker");
step("hello", "echo hi");
print("omega-marker");
"#;

/// One real, successful run on local.
fn journaled_run(rfs: &Rfs) -> RunOut {
    let repo = Repo::new();
    let out = rfs.run(repo.path(), SCRIPT);
    out.assert_code(0);
    assert!(out.out_dir.join("EVIDENCE.md").is_file());
    out
}

/// The result of one `rfs journal verify`.
struct Verify {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Verify {
    #[track_caller]
    fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code, code,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
    }

    /// Exit 4 with a reason on stderr, nothing claiming "intact" on stdout.
    #[track_caller]
    fn assert_invalid(&self) {
        self.assert_code(4);
        assert!(
            self.stderr.contains("is not intact"),
            "stderr should explain the failure: {}",
            self.stderr
        );
        assert!(
            !self.stdout.contains("intact"),
            "stdout must not claim the journal is intact: {}",
            self.stdout
        );
    }
}

fn verify(rfs: &Rfs, journal: &Path) -> Verify {
    let out = rfs
        .cmd(journal.parent().unwrap())
        .args(["journal", "verify"])
        .arg(journal)
        .output()
        .expect("rfs runs");
    Verify {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A copy of the run's journal (and, if `with_evidence`, its EVIDENCE.md
/// and the head recorded with it, `journal.head`) in a fresh directory;
/// returns the copied journal's path.
fn copy_run(out: &RunOut, with_evidence: bool) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix("rfs-journal-copy-")
        .tempdir()
        .unwrap();
    let journal = dir.path().join("journal.jsonl");
    std::fs::copy(out.out_dir.join("journal.jsonl"), &journal).unwrap();
    if with_evidence {
        std::fs::copy(
            out.out_dir.join("EVIDENCE.md"),
            dir.path().join("EVIDENCE.md"),
        )
        .unwrap();
        std::fs::copy(
            out.out_dir.join("journal.head"),
            dir.path().join("journal.head"),
        )
        .unwrap();
    }
    (dir, journal)
}

fn read_lines(journal: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(journal).unwrap();
    assert!(text.ends_with('\n'), "every line ends with a newline");
    text.lines().map(str::to_owned).collect()
}

fn write_lines(journal: &Path, lines: &[String]) {
    let mut text = lines.join("\n");
    text.push('\n');
    std::fs::write(journal, text).unwrap();
}

fn sha256_hex(s: &str) -> String {
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Line numbers (1-based) mentioned as "line N" in `text`.
fn lines_named(text: &str) -> Vec<usize> {
    let mut out = vec![];
    let mut rest = text;
    while let Some(i) = rest.find("line ") {
        rest = &rest[i + 5..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse() {
            out.push(n);
        }
    }
    out
}

/// The top-level keys of a JSON object, in the order they appear.
fn top_level_keys(line: &str) -> Vec<String> {
    struct Keys;
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = Vec<String>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a JSON object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(
            self,
            mut m: A,
        ) -> Result<Self::Value, A::Error> {
            let mut keys = vec![];
            while let Some(k) = m.next_key::<String>()? {
                m.next_value::<serde::de::IgnoredAny>()?;
                keys.push(k);
            }
            Ok(keys)
        }
    }
    let mut de = serde_json::Deserializer::from_str(line);
    serde::Deserializer::deserialize_map(&mut de, Keys).unwrap()
}

/// Index (0-based) of the first line whose raw text contains `needle`.
fn find_line(lines: &[String], needle: &str) -> usize {
    lines
        .iter()
        .position(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no journal line contains {needle}: {lines:#?}"))
}

/// Verify a copy of `out`'s run (EVIDENCE.md beside it) after `tamper`
/// changed its journal lines; the journal must be reported invalid.
fn verify_tampered(rfs: &Rfs, out: &RunOut, tamper: impl FnOnce(&mut Vec<String>)) -> Verify {
    let (_dir, journal) = copy_run(out, true);
    let mut lines = read_lines(&journal);
    tamper(&mut lines);
    write_lines(&journal, &lines);
    let v = verify(rfs, &journal);
    v.assert_invalid();
    v
}

/// The verification error names 1-based line `line`.
#[track_caller]
fn assert_names_line(v: &Verify, line: usize, what: &str) {
    assert!(
        lines_named(&v.stderr).contains(&line),
        "{what}: the error names line {line}: {}",
        v.stderr
    );
}

#[test]
fn a_fresh_journal_verifies_intact_and_its_chain_is_real() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let journal = out.out_dir.join("journal.jsonl");
    let lines = read_lines(&journal);
    assert!(lines.len() >= 8, "a run with a step journals many facts");

    // Recompute the chain independently of rfs.
    let mut prev = GENESIS.to_owned();
    for (i, raw) in lines.iter().enumerate() {
        let v: serde_json::Value = serde_json::from_str(raw).unwrap();
        assert_eq!(v["seq"], (i + 1) as u64, "line {}: {raw}", i + 1);
        assert_eq!(v["prev"], prev.as_str(), "line {}: {raw}", i + 1);
        prev = sha256_hex(raw);
    }
    let head = prev;
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(lines.last().unwrap()).unwrap()["kind"],
        "run.end"
    );
    // EVIDENCE.md records the final line count and head.
    let evidence = out.evidence();
    assert!(
        evidence.contains(&format!("`journal.jsonl` ({} lines)", lines.len())),
        "{evidence}"
    );
    assert!(
        evidence.contains(&format!("journal head: `{head}`")),
        "{evidence}"
    );

    let v = verify(&rfs, &journal);
    v.assert_code(0);
    assert!(v.stdout.contains("intact"), "{}", v.stdout);
    assert!(
        v.stdout.contains(&format!("{} lines", lines.len())),
        "{}",
        v.stdout
    );
    assert!(v.stdout.contains(&head), "{}", v.stdout);
    assert!(v.stdout.contains("matches journal.head"), "{}", v.stdout);
    assert!(!v.stdout.contains("incomplete"), "{}", v.stdout);
    // Verifying reads only: the journal is unchanged.
    assert_eq!(read_lines(&journal), lines);
    rfs.assert_no_leftovers();
}

#[test]
fn every_line_has_seq_ts_kind_payload_prev_in_that_order() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let lines = read_lines(&out.out_dir.join("journal.jsonl"));
    for raw in &lines {
        assert_eq!(
            top_level_keys(raw),
            ["seq", "ts", "kind", "payload", "prev"],
            "{raw}"
        );
        let v: serde_json::Value = serde_json::from_str(raw).unwrap();
        assert!(v["seq"].is_u64(), "{raw}");
        let ts = v["ts"].as_str().unwrap();
        assert!(
            ts.len() == 24 && ts.ends_with('Z') && ts.as_bytes()[10] == b'T',
            "RFC 3339 UTC with milliseconds: {ts}"
        );
        assert!(!v["kind"].as_str().unwrap().is_empty(), "{raw}");
        assert!(v["payload"].is_object(), "{raw}");
        let prev = v["prev"].as_str().unwrap();
        assert!(
            prev.len() == 64 && prev.bytes().all(|b| b.is_ascii_hexdigit()),
            "{raw}"
        );
    }
}

#[test]
fn an_edited_payload_value_in_a_middle_line_is_detected_and_named() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let (_dir, journal) = copy_run(&out, true);
    let mut lines = read_lines(&journal);
    let i = find_line(&lines, "\"alpha-marker\"");
    assert!(
        i > 0 && i + 1 < lines.len(),
        "the edited line is a middle line"
    );
    // Still valid, canonical JSON: only the value changed.
    lines[i] = lines[i].replace("\"alpha-marker\"", "\"alpha-markes\"");
    write_lines(&journal, &lines);

    let v = verify(&rfs, &journal);
    v.assert_invalid();
    // The edited line (i + 1, 1-based) or the line that no longer chains
    // to it (i + 2) is named.
    let named = lines_named(&v.stderr);
    assert!(
        named.contains(&(i + 1)) || named.contains(&(i + 2)),
        "the error names line {} or {}: {}",
        i + 1,
        i + 2,
        v.stderr
    );
    assert!(v.stderr.contains("edited"), "{}", v.stderr);
}

#[test]
fn a_dropped_middle_line_is_detected() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let mut i = 0;
    let v = verify_tampered(&rfs, &out, |lines| {
        i = lines.len() / 2;
        lines.remove(i);
    });
    assert_names_line(&v, i + 1, "dropped line");
}

#[test]
fn two_swapped_lines_are_detected() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let mut i = 0;
    let v = verify_tampered(&rfs, &out, |lines| {
        i = lines.len() / 2;
        lines.swap(i, i + 1);
    });
    assert_names_line(&v, i + 1, "swapped lines");
}

#[test]
fn dropping_the_last_lines_is_detected_against_evidence() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let full = read_lines(&out.out_dir.join("journal.jsonl"));
    for drop in [1, 2, 3] {
        let v = verify_tampered(&rfs, &out, |lines| lines.truncate(full.len() - drop));
        assert!(
            v.stderr.contains("journal.head"),
            "dropping {drop} line(s): the error points at the recorded head: {}",
            v.stderr
        );
    }
}

#[test]
fn an_edited_last_line_is_detected_against_evidence() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let (_dir, journal) = copy_run(&out, true);
    let mut lines = read_lines(&journal);
    let last = lines.len() - 1;
    assert!(lines[last].contains("\"outcome\":\"completed\""));
    // A plausible forgery: still valid, canonical JSON, still chained.
    lines[last] = lines[last].replace("\"outcome\":\"completed\"", "\"outcome\":\"completes\"");
    write_lines(&journal, &lines);

    let v = verify(&rfs, &journal);
    v.assert_invalid();
    assert!(
        lines_named(&v.stderr).contains(&lines.len()),
        "the error names the last line ({}): {}",
        lines.len(),
        v.stderr
    );
}

#[test]
fn whitespace_or_key_order_changes_are_detected() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let original = read_lines(&out.out_dir.join("journal.jsonl"));
    let i = original.len() / 2;
    let v: serde_json::Value = serde_json::from_str(&original[i]).unwrap();

    let kind = v["kind"].as_str().unwrap();
    let first = kind.chars().next().unwrap();
    let variants: Vec<(&str, String)> = vec![
        (
            "spaces after separators",
            original[i]
                .replacen("\",\"", "\", \"", 1)
                .replacen("\":", "\": ", 1),
        ),
        ("trailing space", format!("{} ", original[i])),
        (
            "re-serialised with another key order",
            format!(
                "{{\"kind\":{},\"seq\":{},\"ts\":{},\"payload\":{},\"prev\":{}}}",
                v["kind"], v["seq"], v["ts"], v["payload"], v["prev"]
            ),
        ),
        (
            "re-serialised with an escaped character",
            original[i].replacen(
                &format!("\"kind\":\"{kind}\""),
                &format!("\"kind\":\"\\u{:04x}{}\"", first as u32, &kind[1..]),
                1,
            ),
        ),
    ];
    for (what, edited) in variants {
        // Each variant is the same JSON value as the original line.
        let parsed: serde_json::Value = serde_json::from_str(&edited)
            .unwrap_or_else(|e| panic!("{what}: not JSON ({e}): {edited}"));
        assert_eq!(parsed, v, "{what}");
        assert_ne!(edited, original[i], "{what}");
        let r = verify_tampered(&rfs, &out, |lines| lines[i] = edited);
        assert_names_line(&r, i + 1, what);
    }
}

#[test]
fn without_evidence_the_chain_is_still_verified() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let lines = read_lines(&out.out_dir.join("journal.jsonl"));

    // Intact journal alone: verifies, without claiming an EVIDENCE.md match.
    let (_dir, journal) = copy_run(&out, false);
    assert!(!journal.parent().unwrap().join("EVIDENCE.md").exists());
    assert!(!journal.parent().unwrap().join("journal.head").exists());
    let v = verify(&rfs, &journal);
    v.assert_code(0);
    assert!(v.stdout.contains("intact"), "{}", v.stdout);
    assert!(
        v.stdout.contains(&format!("{} lines", lines.len())),
        "{}",
        v.stdout
    );
    assert!(!v.stdout.contains("matches journal.head"), "{}", v.stdout);

    // Tampering in the middle is still caught by the chain alone.
    let (_dir2, journal2) = copy_run(&out, false);
    let mut edited = lines.clone();
    let i = find_line(&edited, "\"omega-marker\"");
    edited[i] = edited[i].replace("\"omega-marker\"", "\"omega-markes\"");
    write_lines(&journal2, &edited);
    verify(&rfs, &journal2).assert_invalid();

    let (_dir3, journal3) = copy_run(&out, false);
    let mut dropped = lines.clone();
    dropped.remove(1);
    write_lines(&journal3, &dropped);
    verify(&rfs, &journal3).assert_invalid();
}

#[test]
fn an_empty_journal_is_invalid() {
    let rfs = Rfs::new(Prov::Local);
    let dir = tempfile::Builder::new()
        .prefix("rfs-journal-empty-")
        .tempdir()
        .unwrap();
    let journal = dir.path().join("journal.jsonl");
    std::fs::write(&journal, "").unwrap();
    let v = verify(&rfs, &journal);
    v.assert_invalid();
    assert!(v.stderr.contains("empty"), "{}", v.stderr);
}

/// A journal whose last line was cut short (as a full disk cuts it) is
/// reported as incomplete, not as tampering ("not a journal entry").
#[test]
fn a_journal_cut_by_a_full_disk_is_reported_incomplete_not_tampered() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let (_dir, journal) = copy_run(&out, false);
    let text = std::fs::read_to_string(&journal).unwrap();
    let cut = text.len() - 40;
    std::fs::write(&journal, &text[..cut]).unwrap();
    let v = verify(&rfs, &journal);
    v.assert_invalid();
    assert!(v.stderr.contains("incomplete"), "{}", v.stderr);
    assert!(v.stderr.contains("cut short"), "{}", v.stderr);
    assert!(!v.stderr.contains("not a journal entry"), "{}", v.stderr);
}

/// A run whose output directory fills up leaves no `.tmp` files behind
/// (the disk really fills: a 64 KiB tmpfs, mounted as root).
#[test]
fn a_full_disk_leaves_no_tmp_files_in_the_output_directory() {
    let mnt = tempfile::Builder::new()
        .prefix("rfs-full-")
        .tempdir()
        .unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=64k",
            "rfs-full",
            mnt.path().to_str().unwrap(),
        ])
        .status()
        .is_ok_and(|s| s.success());
    if !mounted {
        assert!(
            std::env::var_os("RFS_REQUIRE_DOCKER").is_none(),
            "CI runs as root and must be able to mount a tmpfs"
        );
        eprintln!("skipped: cannot mount a tmpfs here (not root)");
        return;
    }
    struct Unmount<'a>(&'a Path);
    impl Drop for Unmount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.0).status();
        }
    }
    let _unmount = Unmount(mnt.path());
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out_dir = mnt.path().join("out");
    let script = repo.path().join("../fill.rhai");
    std::fs::write(
        &script,
        r#"for i in 0..40 { step(`s${i}`, "head -c 4000 /dev/zero | tr '\\0' x; echo", #{ allow_failure: true }); }"#,
    )
    .unwrap();
    let run = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&script);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "the disk filled up: {stderr}");
    assert!(stderr.contains("No space left"), "{stderr}");
    assert!(!stderr.contains("not a journal entry"), "{stderr}");
    let mut stack = vec![out_dir.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                assert!(!name.ends_with(".tmp"), "left behind: {}", p.display());
            }
        }
    }
    rfs.assert_no_leftovers();
}

/// The journal checker read the head it checks against back out of
/// EVIDENCE.md's Markdown, a view for people whose wording may change: it
/// reads `journal.head`, data written with it, and EVIDENCE.md's text
/// plays no part (`rfs verify` checks that text against the journal).
#[test]
fn journal_verify_reads_the_recorded_head_from_data_not_from_evidence_markdown() {
    let rfs = Rfs::new(Prov::Local);
    let out = journaled_run(&rfs);
    let (dir, journal) = copy_run(&out, true);
    let lines = read_lines(&journal);
    std::fs::write(
        dir.path().join("EVIDENCE.md"),
        "# reworded\n- journal head: `0`\n",
    )
    .unwrap();
    let v = verify(&rfs, &journal);
    v.assert_code(0);
    assert!(v.stdout.contains("matches journal.head"), "{}", v.stdout);

    // The record, not the Markdown, is what a cut journal is held to.
    let (_dir2, journal2) = copy_run(&out, true);
    write_lines(&journal2, &lines[..lines.len() - 1]);
    let v = verify(&rfs, &journal2);
    v.assert_invalid();
    assert!(
        v.stderr.contains(&format!(
            "journal.head records {} lines but the journal has {}",
            lines.len(),
            lines.len() - 1
        )),
        "{}",
        v.stderr
    );
}
