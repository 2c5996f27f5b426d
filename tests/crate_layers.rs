//! The layers are crates (issue #33): Cargo, not a text search, keeps a
//! lower layer from naming the ones built on it. What is checked here is
//! what an embedder relies on: the evidence crate can be depended on
//! alone, without an async runtime or a script engine, and the sandbox
//! crate knows nothing of scripts or of the `rfs` crate.

use std::process::Command;

/// The crates `package` depends on (normal dependencies, transitively).
fn dependencies(package: &str) -> Vec<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--offline",
            "-e",
            "normal",
            "--prefix",
            "none",
            "-p",
        ])
        .arg(package)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree -p {package}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .collect();
    names.sort();
    names.dedup();
    names
}

#[test]
fn the_evidence_crate_has_no_async_runtime_no_script_engine_and_no_sandboxes() {
    let deps = dependencies("rfs-evidence");
    assert!(deps.contains(&"rfs-evidence".to_owned()), "{deps:?}");
    for banned in ["tokio", "rhai", "rfs-sandbox", "rfs", "bollard", "reqwest"] {
        assert!(
            !deps.iter().any(|d| d == banned),
            "rfs-evidence depends on {banned}: {deps:?}"
        );
    }
}

#[test]
fn the_sandbox_crate_knows_nothing_of_scripts_or_the_rfs_crate() {
    let deps = dependencies("rfs-sandbox");
    assert!(deps.contains(&"rfs-evidence".to_owned()), "{deps:?}");
    for banned in ["rhai", "rfs", "clap", "rustyline", "rmcp"] {
        assert!(
            !deps.iter().any(|d| d == banned),
            "rfs-sandbox depends on {banned}: {deps:?}"
        );
    }
}
