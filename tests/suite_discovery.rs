//! What a new user tripped on with `rfs test` (issue #32, items 6 and 7):
//! run from a subdirectory it did not find the repository's proofs, an
//! uncommitted `rfs.toml` made the tree dirty, and a suite run with
//! `--allow-dirty` did not say NOT REPRODUCIBLE in its index.

mod common;
use common::*;

use std::path::Path;

fn rfs_test(rfs: &Rfs, dir: &Path, args: &[&str]) -> (RunOut, serde_json::Value) {
    let out_dir = rfs.state.path().join("suite").join(uuid_like());
    let out = rfs
        .cmd(dir)
        .arg("test")
        .args(args)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir.clone());
    let index = std::fs::read_to_string(out_dir.join("index.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or(serde_json::Value::Null);
    (out, index)
}

#[test]
fn rfs_test_from_a_subdirectory_finds_the_repositorys_proofs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/a.rhai", "step(\"a\", \"true\");\n");
    repo.write("src/deep/lib.txt", "x\n");
    repo.commit("proofs");
    let (out, index) = rfs_test(&rfs, &repo.path().join("src/deep"), &[]);
    out.assert_code(0);
    assert_eq!(index["proofs"][0]["name"], "proofs/a.rhai", "{index}");
    rfs.assert_no_leftovers();
}

#[test]
fn an_uncommitted_rfs_toml_does_not_make_the_tree_dirty() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/a.rhai", "step(\"a\", \"true\");\n");
    repo.commit("proofs");
    repo.write("rfs.toml", "jobs = 1\n");
    let (out, index) = rfs_test(&rfs, repo.path(), &[]);
    out.assert_code(0);
    assert_eq!(index["jobs"], 1, "{index}");
    // The proof's run says the file was not shipped.
    let bundle = index["proofs"][0]["attempts"][0]["out_dir"]
        .as_str()
        .unwrap();
    let journal = std::fs::read_to_string(Path::new(bundle).join("journal.jsonl")).unwrap();
    let resolved = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "source.resolved")
        .unwrap();
    assert_eq!(
        resolved["payload"]["dirty_paths_not_shipped"],
        serde_json::json!(["rfs.toml"])
    );
    // Any other uncommitted file still refuses.
    repo.write("stray.txt", "x\n");
    let (out, _) = rfs_test(&rfs, repo.path(), &[]);
    out.assert_code(3);
    rfs.assert_no_leftovers();
}

#[test]
fn a_suite_with_allow_dirty_says_not_reproducible_in_its_index() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/a.rhai", "step(\"a\", \"cat edit.txt\");\n");
    repo.write("edit.txt", "committed\n");
    repo.commit("proofs");
    repo.write("edit.txt", "edited\n");
    let (out, index) = rfs_test(&rfs, repo.path(), &["--allow-dirty"]);
    out.assert_code(0);
    assert_eq!(index["reproducible"], false, "{index}");
    assert_eq!(
        index["not_reproducible"],
        serde_json::json!(["proofs/a.rhai"])
    );
    let md = std::fs::read_to_string(out.out_dir.join("index.md")).unwrap();
    assert!(md.contains("NOT REPRODUCIBLE"), "{md}");
    // A clean tree with the same flag is reproducible.
    repo.commit("edit");
    let (out, index) = rfs_test(&rfs, repo.path(), &["--allow-dirty"]);
    out.assert_code(0);
    assert_eq!(index["reproducible"], true, "{index}");
    rfs.assert_no_leftovers();
}
