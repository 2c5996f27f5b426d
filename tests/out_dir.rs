//! The output directory under hostile repositories (issue #20, class 1):
//! a repository can commit symlinks inside the folder its CI passes as
//! `--out`; rfs must never write through them, never overwrite a file,
//! and refuse folders that are not new or empty.

mod common;
use common::*;

use std::path::Path;

const SCRIPT: &str = r#"step("build", "echo built");"#;

/// A host file a planted link points at, and its content before the run.
struct Bait {
    dir: tempfile::TempDir,
}

impl Bait {
    fn new() -> Bait {
        let dir = tempfile::Builder::new()
            .prefix("rfs-bait-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("bashrc"), "original\n").unwrap();
        Bait { dir }
    }
    fn file(&self) -> std::path::PathBuf {
        self.dir.path().join("bashrc")
    }
    #[track_caller]
    fn assert_untouched(&self) {
        assert_eq!(std::fs::read_to_string(self.file()).unwrap(), "original\n");
        let names: Vec<_> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "rfs wrote into the bait folder: {names:?}");
    }
}

fn run_out(rfs: &Rfs, repo: &Repo, out: &str) -> std::process::Output {
    let script = repo.path().join("proof.rhai");
    rfs.cmd(repo.path())
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

fn committed_repo() -> Repo {
    let repo = Repo::new();
    repo.write("proof.rhai", SCRIPT);
    repo.commit("proof");
    repo
}

#[track_caller]
fn assert_refused(out: &std::process::Output, says: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains(says), "expected {says:?} in:\n{stderr}");
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("built"),
        "the step ran"
    );
}

#[test]
fn a_committed_symlink_as_a_step_log_does_not_write_into_the_host_file() {
    let rfs = Rfs::new(Prov::Local);
    let bait = Bait::new();
    let repo = committed_repo();
    repo.symlink(
        ".rfs/ci/steps/001-build.stdout.log",
        bait.file().to_str().unwrap(),
    );
    repo.commit("plant");
    let out = run_out(&rfs, &repo, ".rfs/ci");
    assert_refused(&out, "is not empty");
    bait.assert_untouched();
    rfs.assert_no_leftovers();
}

#[test]
fn symlinked_steps_bundle_and_gitignore_in_out_are_refused_not_written_through() {
    let rfs = Rfs::new(Prov::Local);
    for name in [
        "steps",
        "bundle",
        ".gitignore",
        "EVIDENCE.md",
        ".EVIDENCE.md.tmp",
        "terminal",
    ] {
        let bait = Bait::new();
        let repo = committed_repo();
        let target = if name.contains('.') {
            bait.file()
        } else {
            bait.dir.path().to_path_buf()
        };
        repo.symlink(&format!(".rfs/ci/{name}"), target.to_str().unwrap());
        repo.commit("plant");
        let out = run_out(&rfs, &repo, ".rfs/ci");
        assert_refused(&out, "is not empty");
        bait.assert_untouched();
    }
    rfs.assert_no_leftovers();
}

#[test]
fn an_out_folder_that_is_a_committed_symlink_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let bait = Bait::new();
    let repo = committed_repo();
    repo.symlink(".rfs", bait.dir.path().to_str().unwrap());
    repo.commit("plant");
    let out = run_out(&rfs, &repo, ".rfs/ci");
    assert_refused(&out, "symlink");
    bait.assert_untouched();
    let out = run_out(&rfs, &repo, ".rfs");
    assert_refused(&out, "is a symlink");
    bait.assert_untouched();
    rfs.assert_no_leftovers();
}

#[test]
fn out_dot_in_a_repository_and_out_root_are_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = committed_repo();
    let out = run_out(&rfs, &repo, ".");
    assert_refused(&out, "contains the directory rfs was started in");
    let out = run_out(&rfs, &repo, "/");
    assert_refused(&out, "filesystem root");
    let out = run_out(&rfs, &repo, "..");
    assert_refused(&out, "contains");
    assert!(!repo.path().join("journal.jsonl").exists());
    assert!(!repo.path().join("steps").exists());
    rfs.assert_no_leftovers();
}

#[test]
fn an_out_dir_holding_unrelated_files_is_refused_and_left_as_it_was() {
    let rfs = Rfs::new(Prov::Local);
    let repo = committed_repo();
    let dir = tempfile::Builder::new()
        .prefix("rfs-outdir-")
        .tempdir()
        .unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine\n").unwrap();
    let out = run_out(&rfs, &repo, dir.path().to_str().unwrap());
    assert_refused(&out, "is not empty");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("notes.txt")]);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("notes.txt")).unwrap(),
        "mine\n"
    );
}

#[test]
fn a_new_or_empty_out_folder_inside_the_repository_still_works() {
    let rfs = Rfs::new(Prov::Local);
    let repo = committed_repo();
    let out = run_out(&rfs, &repo, ".rfs/run1");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(repo.path().join(".rfs/run1/journal.jsonl").is_file());
    std::fs::create_dir_all(repo.path().join(".rfs/empty")).unwrap();
    let out = run_out(&rfs, &repo, ".rfs/empty");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // An earlier run's folder is not reused.
    let again = run_out(&rfs, &repo, ".rfs/run1");
    assert_refused(&again, "output of an earlier run");
    assert!(Path::new(&repo.path().join(".rfs/run1/EVIDENCE.md")).is_file());
    rfs.assert_no_leftovers();
}
