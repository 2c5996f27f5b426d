//! `rfs ps`, `rfs shell ID` and `rfs runs prune` (issue #23, item 5):
//! the live sandboxes across providers, a shell in a kept one, and old
//! bundles removed on request.

mod common;
use common::*;

use std::io::Write;
use std::process::Stdio;

provider_tests! {
    #[not_under_gvisor = "pins its own isolation (none) on local"]
    fn ps_lists_a_kept_sandbox_and_shell_enters_its_synced_source(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("v", "from the commit\n");
        repo.commit("v");
        // A local sandbox in namespaces belongs to its rfs process; one
        // without them can be entered later.
        let extra: &[&str] = if rfs.prov == Prov::Local { &["--keep", "--isolation", "none"] } else { &["--keep"] };
        let kept = rfs.run_with(repo.path(), r#"step("x", "true");"#, extra);
        kept.assert_code(0);
        let id = kept.sandbox_id();
        let ps = rfs.cmd(repo.path()).arg("ps").output().unwrap();
        assert!(ps.status.success());
        let listed = String::from_utf8_lossy(&ps.stdout).into_owned();
        let line = listed.lines().find(|l| l.contains(&id)).unwrap_or_else(|| panic!("{id} not in:\n{listed}"));
        assert!(line.starts_with(rfs.prov.name()) && line.contains("kept, its run has ended"), "{line}");

        let mut child = rfs
            .cmd(repo.path())
            .args(["shell", &id])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"cat v; echo id=$RELAYFLOWS_SANDBOX_ID; exit 3\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(3), "{text}\n{}", String::from_utf8_lossy(&out.stderr));
        assert!(text.contains("from the commit"), "{text}");
        assert!(text.contains(&format!("id={id}")), "{text}");

        // Only this provider: the other providers' variants of this test
        // run at the same time, each with a kept sandbox whose owner is gone.
        let gc = rfs.cmd(repo.path()).args(["gc", "--provider", rfs.prov.name()]).output().unwrap();
        assert!(gc.status.success(), "{}", String::from_utf8_lossy(&gc.stderr));
        let ps = rfs.cmd(repo.path()).arg("ps").output().unwrap();
        assert!(!String::from_utf8_lossy(&ps.stdout).contains(&id));
        rfs.assert_no_leftovers();
    }
}

/// `rfs shell` of an id no provider knows is a usage error naming `rfs ps`.
#[test]
fn shell_of_an_unknown_sandbox_says_so() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs
        .cmd(repo.path())
        .args(["shell", "local-no-such-sandbox", "--provider", "local"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("rfs ps"));
}

/// `rfs runs prune`: `--keep N` removes all but the newest N finished
/// runs, `--dry-run` removes nothing, and without a rule it refuses.
#[test]
fn runs_prune_keeps_the_newest_and_dry_run_removes_nothing() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, _) = rfs.prepare(r#"step("x", "true");"#);
    for _ in 0..3 {
        let out = rfs
            .cmd(repo.path())
            .arg("run")
            .arg(&script)
            .output()
            .unwrap();
        assert!(out.status.success());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let count = || {
        let out = rfs.cmd(repo.path()).arg("runs").output().unwrap();
        String::from_utf8_lossy(&out.stdout).lines().count()
    };
    assert_eq!(count(), 3);
    let none = rfs
        .cmd(repo.path())
        .args(["runs", "prune"])
        .output()
        .unwrap();
    assert_eq!(none.status.code(), Some(2));
    let dry = rfs
        .cmd(repo.path())
        .args(["runs", "prune", "--keep", "1", "--dry-run"])
        .output()
        .unwrap();
    assert!(dry.status.success());
    assert_eq!(
        String::from_utf8_lossy(&dry.stdout)
            .matches("would remove")
            .count(),
        2
    );
    assert_eq!(count(), 3);
    let newest =
        String::from_utf8_lossy(&rfs.cmd(repo.path()).arg("runs").output().unwrap().stdout)
            .lines()
            .next()
            .unwrap()
            .to_owned();
    let pruned = rfs
        .cmd(repo.path())
        .args(["runs", "prune", "--keep", "1"])
        .output()
        .unwrap();
    assert!(pruned.status.success());
    let left = String::from_utf8_lossy(&rfs.cmd(repo.path()).arg("runs").output().unwrap().stdout)
        .into_owned();
    assert_eq!(left.trim(), newest.trim());
}
