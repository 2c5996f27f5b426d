//! Files in and out of the sandbox (issue #36): `collect(path)` copies a
//! file or folder of the synced root into the bundle's `artifacts/`, each
//! file's sha256 journaled, symlinks recorded and never followed, bounded
//! in size; `put(local, path)` ships a file of the working tree (or one the
//! person allowed with `--allow-put`), kept in `bundle/put/`. `rfs verify`
//! checks every one. Nothing at a collected path is the failure of the
//! step before (or, `optional: true`, recorded as absent). On every
//! provider.

mod common;
use common::*;

use std::path::Path;

#[track_caller]
fn assert_does_not_verify(rfs: &Rfs, dir: &Path, bundle: &Path, needle: &str) {
    let (ok, text) = rfs_verify(rfs, dir, bundle);
    assert!(!ok, "rfs verify passed on an altered bundle");
    assert!(text.contains(needle), "{needle:?} not in:\n{text}");
}

/// A step writes a file and a folder holding a symlink to `/`; the script
/// collects both.
const COLLECT: &str = r#"
step("make", "mkdir -p out/sub && printf 'hello\n' > out/a.txt && printf 'deep' > out/sub/b.bin && ln -s / out/root && printf 'r' > result.txt");
let a = collect("out");
let b = collect("result.txt");
print(`collected ${a.files} ${b.bytes} ${a.path}`);
"#;

provider_tests! {
    fn collect_a_file_and_a_folder_with_a_symlink_verifies(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), COLLECT);
        out.assert_code(0);
        assert!(out.stdout.contains("collected 2 1 artifacts/out"), "{}", out.stdout);
        let c = out.entries("artifact.collected");
        assert_eq!(c.len(), 2);
        assert_eq!(c[0]["path"], "out");
        let files: Vec<&str> = c[0]["files"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["path"].as_str().unwrap())
            .collect();
        assert!(files.contains(&"artifacts/out/a.txt") && files.contains(&"artifacts/out/sub/b.bin"), "{files:?}");
        // The link is recorded with its target, never followed or written.
        assert_eq!(c[0]["links"][0]["path"], "artifacts/out/root");
        assert_eq!(c[0]["links"][0]["target"], "/");
        assert!(std::fs::symlink_metadata(out.out_dir.join("artifacts/out/root")).is_err());
        assert_eq!(std::fs::read_to_string(out.out_dir.join("artifacts/out/a.txt")).unwrap(), "hello\n");
        assert_eq!(std::fs::read(out.out_dir.join("artifacts/out/sub/b.bin")).unwrap(), b"deep");
        assert_eq!(c[1]["files"][0]["sha256"], "454349e422f05297191ead13e21d3db520e5abef52055e4964b82fb213f593a1");
        assert!(out.evidence().contains("## Artifacts"));
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn an_edited_missing_or_extra_artifact_fails_verify(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(repo.path(), COLLECT);
        out.assert_code(0);
        let a = out.out_dir.join("artifacts/out/a.txt");
        std::fs::write(&a, "HELLO\n").unwrap();
        assert_does_not_verify(rfs, repo.path(), &out.out_dir, "artifacts/out/a.txt");
        std::fs::remove_file(&a).unwrap();
        assert_does_not_verify(rfs, repo.path(), &out.out_dir, "artifacts/out/a.txt");
        std::fs::write(&a, "hello\n").unwrap();
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
        std::fs::write(out.out_dir.join("artifacts/out/extra.txt"), "x").unwrap();
        assert_does_not_verify(rfs, repo.path(), &out.out_dir, "artifacts/out/extra.txt");
    }

    fn an_artifact_over_the_bound_is_refused(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
step("make", "head -c 5000 /dev/zero > big.bin");
collect("big.bin", #{ max_bytes: 1000 });
"#,
        );
        out.assert_code(3);
        assert!(out.stderr.contains("more than 1000 bytes"), "{}", out.stderr);
        assert!(out.entries("artifact.collected").is_empty());
        assert!(!out.out_dir.join("artifacts").exists());
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
        // A script may only lower the run's bound.
        let out = rfs.run(repo.path(), r#"collect("x", #{ max_bytes: 1000000000000 });"#);
        out.assert_code(3);
        assert!(out.stderr.contains("a script may only lower it"), "{}", out.stderr);
    }

    // A 100 GB sparse file made `collect()` fail as "tar failed" (the
    // archive cut at the bound closed tar's pipe): it is over the bound,
    // and says so.
    fn collect_of_a_huge_sparse_file_is_refused_as_over_the_bound(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
step("make", "truncate -s 100G sparse.bin");
collect("sparse.bin", #{ max_bytes: 100000 });
"#,
        );
        out.assert_code(3);
        assert!(out.stderr.contains("more than 100000 bytes"), "{}", out.stderr);
        assert!(!out.stderr.contains("tar failed"), "{}", out.stderr);
        assert!(out.entries("artifact.collected").is_empty());
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    // `collect()` of a folder with a hard-linked file kept one of its
    // names: tar writes the second as a link to the first, which was
    // skipped. Both names are kept now, each a file.
    fn collect_of_a_hard_linked_file_keeps_both_names(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
step("make", "mkdir -p out && echo same > out/a && ln out/a out/b");
collect("out");
"#,
        );
        out.assert_code(0);
        for n in ["a", "b"] {
            let p = out.out_dir.join("artifacts/out").join(n);
            assert_eq!(std::fs::read_to_string(&p).unwrap_or_default(), "same\n", "{}", p.display());
        }
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn collect_through_a_symlinked_folder_is_refused(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
step("link", "ln -s / escape");
collect("escape/etc/passwd");
"#,
        );
        out.assert_code(3);
        assert!(out.stderr.contains("escape is a symlink"), "{}", out.stderr);
        assert!(!out.out_dir.join("artifacts").exists());
    }

    // Issue #46 item 3: a report the tests did not write was a refusal
    // (exit 3) that hid the test run's own failure; it is the failure of
    // the step that should have written it, shown with its output.
    fn collect_of_a_report_the_tests_did_not_write_is_the_steps_failure_with_its_output(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
step("tests", "echo 'E   ImportError: no module named calc'; exit 2", #{ allow_failure: true });
collect("reports/junit.xml", #{ junit: true });
step("never", "echo ran");
"#,
        );
        out.assert_code(1);
        assert!(out.stderr.contains("step `tests` failed"), "{}", out.stderr);
        assert!(out.stderr.contains("it wrote no `reports/junit.xml`"), "{}", out.stderr);
        // (Daytona's network line says "nothing refused": not a refusal.)
        assert!(!out.stderr.contains("× refused"), "{}", out.stderr);
        let a = out.entries("artifact.absent");
        assert_eq!(a.len(), 1);
        assert_eq!(a[0]["path"], "reports/junit.xml");
        assert_eq!(a[0]["optional"], false);
        assert_eq!(a[0]["step"], "tests");
        assert!(out.entries("artifact.collected").is_empty());
        assert_eq!(out.entries("step.start").len(), 1, "nothing ran after it");
        assert_eq!(out.entries("run.end")[0]["outcome"], "failed");
        // Every view shows the step failed, with the last lines it printed.
        let ev = out.evidence();
        let failed = ev.split("## What failed").nth(1).unwrap_or_default();
        assert!(failed.contains("Step 1 `tests`"), "{ev}");
        assert!(failed.contains("it wrote no reports/junit.xml, which collect() takes"), "{ev}");
        assert!(failed.contains("ImportError: no module named calc"), "{ev}");
        assert!(ev.contains("`reports/junit.xml` was absent when collected (it failed step `tests`)"), "{ev}");
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    fn collect_optional_of_a_missing_report_goes_on(rfs: &Rfs) {
        let repo = Repo::new();
        let out = rfs.run(
            repo.path(),
            r#"
step("tests", "true");
let r = collect("reports/junit.xml", #{ junit: true, optional: true });
assert(r.absent && r.files == 0 && r.bytes == 0 && r.path == "");
step("after", "true");
let here = collect("reproducer-marker.txt", #{ optional: true });
assert(!here.absent && here.files == 1);
"#,
        );
        out.assert_code(0);
        let a = out.entries("artifact.absent");
        assert_eq!(a.len(), 1);
        assert_eq!(a[0]["path"], "reports/junit.xml");
        assert_eq!(a[0]["optional"], true);
        assert_eq!(out.entries("step.start").len(), 2);
        assert_eq!(out.entries("artifact.collected").len(), 1);
        assert!(out.evidence().contains("`reports/junit.xml` was absent when collected (optional: the run went on)"), "{}", out.evidence());
        assert!(!out.evidence().contains("## What failed"));
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn escapes_are_refused_before_anything_runs(rfs: &Rfs) {
        let repo = Repo::new();
        for (call, why) in [
            (r#"collect("../x")"#, "escapes the synced source root"),
            (r#"collect("/etc/passwd")"#, "is absolute"),
            (r#"collect("a/../..")"#, "escapes the synced source root"),
            (r#"put("reproducer-marker.txt", "../m")"#, "escapes the synced source root"),
            (r#"put("reproducer-marker.txt", "/tmp/m")"#, "is absolute"),
        ] {
            let out = rfs.run(repo.path(), &format!("{call};\nstep(\"never\", \"echo ran\");\n"));
            out.assert_code(3);
            assert!(out.stderr.contains(why), "{call}: {}", out.stderr);
            assert!(out.stderr.contains("refused before anything ran"), "{call}: {}", out.stderr);
            // Nothing ran: no sandbox, no step.
            assert!(out.entries("placement").is_empty(), "{call}");
            assert!(out.entries("step.start").is_empty(), "{call}");
        }
    }

    fn put_a_file_and_read_it_in_a_step(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write(".gitignore", "fixtures/\n");
        repo.commit("ignore fixtures");
        repo.write("fixtures/data.txt", "not in the commit\n");
        let script = r#"
let p = put("fixtures/data.txt", "in/data.txt");
let r = step("read", "cat in/data.txt");
assert(r.stdout == "not in the commit\n", r.stdout);
print(`put ${p.path} ${p.bytes}`);
"#;
        // Ignored by git (where secrets live): only the person may allow it.
        let out = rfs.run(repo.path(), script);
        out.assert_code(3);
        assert!(out.stderr.contains("--allow-put fixtures/data.txt"), "{}", out.stderr);
        assert!(out.entries("step.start").is_empty());
        let out = rfs.run_with(repo.path(), script, &["--allow-put", "fixtures"]);
        out.assert_code(0);
        assert!(out.stdout.contains("put bundle/put/in/data.txt 18"), "{}", out.stdout);
        let p = &out.entries("artifact.put")[0];
        assert_eq!(p["path"], "in/data.txt");
        assert_eq!(p["bundled"], "bundle/put/in/data.txt");
        assert_eq!(
            std::fs::read_to_string(out.out_dir.join("bundle/put/in/data.txt")).unwrap(),
            "not in the commit\n"
        );
        assert_bundle_verifies(rfs, repo.path(), &out.out_dir);
        std::fs::write(out.out_dir.join("bundle/put/in/data.txt"), "edited\n").unwrap();
        assert_does_not_verify(rfs, repo.path(), &out.out_dir, "bundle/put/in/data.txt");
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn put_from_outside_the_repository_is_refused_naming_the_flag(rfs: &Rfs) {
        let repo = Repo::new();
        let elsewhere = tempfile::tempdir().unwrap();
        let f = elsewhere.path().join("secret.txt");
        std::fs::write(&f, "s3cret\n").unwrap();
        let script = format!("put({:?}, \"s.txt\");\nstep(\"never\", \"echo ran\");\n", f.display().to_string());
        let out = rfs.run(repo.path(), &script);
        out.assert_code(3);
        assert!(out.stderr.contains("is outside the working tree"), "{}", out.stderr);
        assert!(out.stderr.contains("--allow-put"), "{}", out.stderr);
        assert!(out.entries("placement").is_empty());
        // Nor through a link inside the repository, nor from .git.
        repo.symlink("peek", &f.display().to_string());
        let out = rfs.run(repo.path(), r#"put("peek", "s.txt");"#);
        out.assert_code(3);
        assert!(out.stderr.contains("is outside the working tree"), "{}", out.stderr);
        let out = rfs.run(repo.path(), r#"put(".git/config", "c");"#);
        out.assert_code(3);
        assert!(out.stderr.contains("--allow-put"), "{}", out.stderr);
    }
}

/// Issue #43: a step replaced the container's `/bin/sh` (which runs
/// `collect()`'s `tar | head | base64`) with a program that writes
/// without end.
/// rfs reads at most the collect's own bound of it (its archive bound,
/// base64-encoded, and a little slack), kills it and refuses the collect
/// naming that bound, quickly, its memory never holding the endless
/// stream (rfs's peak resident size stays small); nothing is kept.
#[test]
fn a_replaced_docker_helper_writing_without_end_cannot_fill_rfss_memory_through_collect() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let script = r#"
step("replace sh", "echo hi > f.txt && printf '#!/bin/busybox yes\n' > /tmp/sh && chmod 755 /tmp/sh && mv -f /tmp/sh /bin/sh");
collect("f.txt", #{ max_bytes: 1000 });
"#;
    let (mut child, out_dir) = rfs.spawn(repo.path(), script);
    let start = std::time::Instant::now();
    let mut peak_kib = 0u64;
    const MAX_KIB: u64 = 512 * 1024;
    while child.try_wait().unwrap().is_none() {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
        if let Some(kib) = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kib = peak_kib.max(kib);
        }
        if peak_kib > MAX_KIB || start.elapsed() > std::time::Duration::from_secs(90) {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "rfs held {peak_kib} KiB after {:?} reading the endless helper\n{}",
                start.elapsed(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = finish(child.wait_with_output().unwrap(), out_dir);
    out.assert_code(3);
    assert!(
        out.stderr
            .contains("bytes on its stdout, the most rfs reads from it")
            && out.stderr.contains("collect(\"f.txt\""),
        "{}",
        out.stderr
    );
    assert!(out.entries("artifact.collected").is_empty());
    assert!(!out.out_dir.join("artifacts").exists());
    assert!(peak_kib < MAX_KIB, "{peak_kib} KiB");
    eprintln!(
        "rfs's peak resident size: {peak_kib} KiB in {:?}\n{}",
        start.elapsed(),
        out.stderr
    );
    rfs.assert_no_leftovers();
}
