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

        // The sandbox of a run whose rfs was killed is not "kept".
        let killed = a_killed_runs_sandbox_is_not_called_kept(rfs, &repo);

        // Only this provider: the other providers' variants of this test
        // run at the same time, each with a kept sandbox whose owner is gone.
        let gc = rfs.cmd(repo.path()).args(["gc", "--provider", rfs.prov.name()]).output().unwrap();
        assert!(gc.status.success(), "{}", String::from_utf8_lossy(&gc.stderr));
        let ps = rfs.cmd(repo.path()).arg("ps").output().unwrap();
        assert!(!String::from_utf8_lossy(&ps.stdout).contains(&id));
        assert!(!String::from_utf8_lossy(&ps.stdout).contains(&killed));
        rfs.assert_no_leftovers();
    }
}

/// `rfs ps` called the sandbox of a run whose rfs was killed "kept":
/// only a run that ended with `--keep` keeps one; this one never ended.
/// Returns its id (its owner is gone: a gc removes it).
fn a_killed_runs_sandbox_is_not_called_kept(rfs: &Rfs, repo: &Repo) -> String {
    let script = "step(\"long\", \"sleep 3141\");";
    let (script_path, out_dir) = rfs.prepare(script);
    let mut cmd = rfs.cmd(repo.path());
    cmd.arg("run").arg(&script_path).arg("--out").arg(&out_dir);
    if rfs.prov == Prov::Local {
        cmd.args(["--isolation", "none"]);
    }
    let mut child = cmd
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_journal(&out_dir, "step.start");
    child.kill().unwrap();
    child.wait().unwrap();
    let id = finish(
        std::process::Command::new("true").output().unwrap(),
        out_dir,
    )
    .sandbox_id();
    let ps = rfs.cmd(repo.path()).arg("ps").output().unwrap();
    let listed = String::from_utf8_lossy(&ps.stdout).into_owned();
    let line = listed
        .lines()
        .find(|l| l.contains(&id))
        .unwrap_or_else(|| panic!("{id} not in:\n{listed}"));
    assert!(
        line.contains("never ended") && !line.contains("kept"),
        "{line}"
    );
    id
}
