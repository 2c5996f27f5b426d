//! Every runnable example in `examples/` passes on the local provider, and
//! the README's example is `examples/proof.rhai` verbatim.

mod common;
use common::*;

#[test]
fn readme_example_is_examples_proof_rhai() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let start = readme.find("```rhai\n").expect("README has a rhai example") + 8;
    let end = start + readme[start..].find("```").unwrap();
    let proof = std::fs::read_to_string(root.join("examples/proof.rhai")).unwrap();
    assert_eq!(
        &readme[start..end],
        proof,
        "README example and examples/proof.rhai differ"
    );
}

#[test]
fn every_example_runs_on_local() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for e in std::fs::read_dir(root.join("examples")).unwrap().flatten() {
        let path = e.path();
        if path.extension().is_none_or(|x| x != "rhai") {
            continue;
        }
        n += 1;
        let rfs = Rfs::new(Prov::Local);
        let repo = Repo::new();
        let out = rfs.run(repo.path(), &std::fs::read_to_string(&path).unwrap());
        assert_eq!(
            out.code,
            0,
            "{} failed:\n{}\n{}",
            path.display(),
            out.stdout,
            out.stderr
        );
        rfs.assert_no_leftovers();
    }
    assert!(n >= 2, "expected examples, found {n}");
}
