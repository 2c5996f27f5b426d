//! The stdlib modules shipped with rfs (`rfs/proof`, `rfs/poll`), observed
//! through a real run's output and journal.

mod common;
use common::*;

#[test]
fn proof_two_step_proves_continuity_and_the_run_proves_cleanup() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "import \"rfs/proof\" as proof;\nlet p = proof::two_step();\nprint(`proved ${p.sandbox} ${p.commit} ${p.tree_digest}`);\n",
    );
    out.assert_code(0);
    let id = out.sandbox_id();
    assert!(
        out.stdout
            .contains(&format!("proved {id} {} {}", repo.head(), repo.tree())),
        "{}",
        out.stdout
    );
    // Both steps ran, in the one sandbox, and the scratch file is gone.
    assert!(
        out.stdout
            .contains(&format!("[proof-step-2] {id} {}", repo.head())),
        "{}",
        out.stdout
    );
    let cleaned = out.entries("cleanup.verified");
    assert_eq!(cleaned.len(), 1);
    assert_eq!(cleaned[0]["sandbox_id"], id.as_str());
    rfs.assert_no_leftovers();
}

#[test]
fn proof_two_step_passes_its_options_to_sync_source() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "import \"rfs/proof\" as proof;\nproof::two_step(#{ path: \"no-such-dir\" });\n",
    );
    out.assert_code(3);
    assert!(out.stderr.contains("no-such-dir"), "{}", out.stderr);
    rfs.assert_no_leftovers();
}

#[test]
fn poll_wait_for_is_one_step_and_fails_at_its_deadline() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "import \"rfs/poll\" as poll;\npoll::wait_for(\"never\", \"false\", #{ timeout: 1, interval: 0.2 });\n",
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("poll::wait_for never: \"false\" did not succeed within 1 s"),
        "{}",
        out.stderr
    );
    assert_eq!(out.entries("step.start").len(), 1);
    let bad = rfs.run(
        repo.path(),
        "import \"rfs/poll\" as poll;\npoll::wait_for(\"x\", \"true\", #{ timout: 1 });\n",
    );
    bad.assert_code(1);
    assert!(
        bad.stderr.contains("unknown option timout"),
        "{}",
        bad.stderr
    );
    rfs.assert_no_leftovers();
}

#[test]
fn poll_retry_gives_up_with_the_last_error() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "import \"rfs/poll\" as poll;\nlet n = 0;\npoll::retry(|| { throw \"still broken\"; }, #{ attempts: 3 });\n",
    );
    out.assert_code(1);
    assert!(
        out.stderr
            .contains("poll::retry: gave up after 3 attempts: still broken"),
        "{}",
        out.stderr
    );
}
