//! `rfs runs` (issue #23): the run bundles in the state directory,
//! newest first, with their outcome.

mod common;
use common::*;

/// `rfs runs` lists the bundles a run without `--out` leaves in the
/// state directory, newest first, with their outcome.
#[test]
fn rfs_runs_lists_the_state_directorys_bundles_newest_first() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (path, _) = rfs.prepare("step(\"x\", \"true\");");
    for script in [&path, &path] {
        let out = rfs
            .cmd(repo.path())
            .arg("run")
            .arg(script)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let (bad, _) = rfs.prepare("step(\"x\", \"exit 1\");");
    let out = rfs.cmd(repo.path()).arg("run").arg(&bad).output().unwrap();
    assert_eq!(out.status.code(), Some(1));
    let runs = rfs.cmd(repo.path()).arg("runs").output().unwrap();
    assert!(runs.status.success());
    let text = String::from_utf8_lossy(&runs.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains(" failed ") && lines[0].contains("1 steps"),
        "{text}"
    );
    assert!(
        lines[1].contains(" completed ") && lines[2].contains(" completed "),
        "{text}"
    );
    assert!(lines
        .iter()
        .all(|l| l.contains(&rfs.state.path().join("runs").display().to_string())));
}
