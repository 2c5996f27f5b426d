//! Bundles under attack (issue #20, classes 3 and 4): a bundle must hold
//! every module the run loaded, `rfs verify` must accept nothing the
//! journal does not name, and it must read only regular files inside the
//! bundle, bounded, without hanging.

mod common;
use common::*;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const SCRIPT: &str = r#"let n = "help" + "ers";
import n as h;
let r = step("build", "echo " + h::word());
assert(r.stdout.contains("from-helpers"));
"#;

/// A committed repository whose proof imports a module by a computed
/// name, run once on local into a fresh output folder.
fn bundled_run(rfs: &Rfs) -> (Repo, PathBuf, tempfile::TempDir) {
    let repo = Repo::new();
    repo.write("proof.rhai", SCRIPT);
    repo.write("helpers.rhai", "fn word() { \"from-helpers\" }\n");
    repo.commit("proof");
    let outs = tempfile::Builder::new()
        .prefix("rfs-bundles-")
        .tempdir()
        .unwrap();
    let out = outs.path().join("out");
    let run = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(repo.path().join("proof.rhai"))
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    (repo, out, outs)
}

/// `rfs verify OUT`, failing the test if it takes longer than 30 s (a
/// hang is the bug some of these tests hold).
fn verify(rfs: &Rfs, out: &Path) -> (i32, String) {
    let mut child = rfs
        .cmd(out.parent().unwrap())
        .arg("verify")
        .arg(out)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("rfs verify hung on {}", out.display());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    (o.status.code().unwrap_or(-1), text)
}

fn a_step_log(out: &Path) -> PathBuf {
    let mut logs: Vec<_> = std::fs::read_dir(out.join("steps"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| std::fs::metadata(p).unwrap().len() > 0)
        .collect();
    logs.sort();
    logs.into_iter().next().expect("a step log with output")
}

#[test]
fn a_module_imported_by_a_computed_name_is_journaled_and_bundled() {
    let rfs = Rfs::new(Prov::Local);
    let (_repo, out, _keep) = bundled_run(&rfs);
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    let module: Vec<_> = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["kind"] == "bundle.module")
        .collect();
    assert_eq!(module.len(), 1, "{journal}");
    assert_eq!(module[0]["payload"]["path"], "bundle/helpers.rhai");
    assert_eq!(module[0]["payload"]["import"], "helpers");
    assert_eq!(
        std::fs::read_to_string(out.join("bundle/helpers.rhai")).unwrap(),
        "fn word() { \"from-helpers\" }\n"
    );
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 0, "{text}");
    rfs.assert_no_leftovers();
}

#[test]
fn a_module_imported_by_a_computed_name_is_named_in_the_attestation() {
    use base64::Engine as _;
    let rfs = Rfs::new(Prov::Local);
    let (_repo, out, _keep) = bundled_run(&rfs);
    let envelope: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("attestation.intoto.json")).unwrap())
            .unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(envelope["payload"].as_str().unwrap())
        .unwrap();
    let statement: serde_json::Value = serde_json::from_slice(&payload).unwrap();
    let names: Vec<&str> = statement["predicate"]["configuration"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"bundle/helpers.rhai"), "{names:?}");
    assert_eq!(statement["predicate"]["result"], "PASSED");
    rfs.assert_no_leftovers();
}

#[test]
fn a_file_added_to_the_bundle_is_rejected_by_verify_and_replay() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, out, _keep) = bundled_run(&rfs);
    std::fs::write(out.join("bundle/extra.rhai"), "fn evil() {}\n").unwrap();
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("bundle/extra.rhai"), "{text}");
    let replay = rfs
        .cmd(repo.path())
        .arg("replay")
        .arg(&out)
        .output()
        .unwrap();
    assert_eq!(replay.status.code(), Some(4));
    assert!(!String::from_utf8_lossy(&replay.stdout).contains("all steps match"));
    std::fs::remove_file(out.join("bundle/extra.rhai")).unwrap();
    // Also at the top and in a new folder.
    std::fs::write(out.join("notes.txt"), "added").unwrap();
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("notes.txt"), "{text}");
    rfs.assert_no_leftovers();
}

#[test]
fn verify_refuses_a_log_symlinked_to_dev_zero_without_hanging() {
    let rfs = Rfs::new(Prov::Local);
    let (_repo, out, _keep) = bundled_run(&rfs);
    let log = a_step_log(&out);
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &log).unwrap();
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("symlink"), "{text}");
}

#[test]
fn verify_refuses_a_log_symlinked_outside_the_bundle_and_leaks_nothing_of_it() {
    let rfs = Rfs::new(Prov::Local);
    let (_repo, out, keep) = bundled_run(&rfs);
    let log = a_step_log(&out);
    // An identical copy outside the bundle is still outside it.
    let copy = keep.path().join("copy.log");
    std::fs::copy(&log, &copy).unwrap();
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&copy, &log).unwrap();
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("symlink"), "{text}");
    // A secret host file: neither its size nor its digest is shown.
    let secret = keep.path().join("shadow");
    std::fs::write(&secret, "root:$6$secret-hash-material:19000:0:99999:7:::\n").unwrap();
    let digest = {
        use sha2::Digest;
        hex::encode(sha2::Sha256::digest(std::fs::read(&secret).unwrap()))
    };
    std::fs::remove_file(&log).unwrap();
    std::os::unix::fs::symlink(&secret, &log).unwrap();
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(!text.contains(&digest), "{text}");
    assert!(!text.contains(" 48 bytes"), "{text}");
}

#[test]
fn verify_refuses_evidence_md_as_a_fifo_without_hanging() {
    let rfs = Rfs::new(Prov::Local);
    let (_repo, out, _keep) = bundled_run(&rfs);
    std::fs::remove_file(out.join("EVIDENCE.md")).unwrap();
    let made = Command::new("mkfifo")
        .arg(out.join("EVIDENCE.md"))
        .status()
        .unwrap();
    assert!(made.success());
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("not a regular file"), "{text}");
}

#[test]
fn verify_refuses_a_journal_symlinked_to_dev_zero_in_bounded_memory() {
    let rfs = Rfs::new(Prov::Local);
    let (_repo, out, _keep) = bundled_run(&rfs);
    std::fs::remove_file(out.join("journal.jsonl")).unwrap();
    std::os::unix::fs::symlink("/dev/zero", out.join("journal.jsonl")).unwrap();
    let (code, text) = verify(&rfs, &out);
    assert_eq!(code, 4, "{text}");
    assert!(text.contains("symlink"), "{text}");
}
