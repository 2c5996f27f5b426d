//! `rfs ps`, `rfs shell` and `rfs rm` (issue #32, item 5): ps only points
//! at commands that work for each sandbox and says whose it is, an
//! unconfigured provider is not a warning on every ps/shell, a kept
//! namespaced local sandbox can be entered, and `rfs rm ID...` removes
//! named sandboxes (only rfs's, only this user's unless `--all`, not a
//! live run's unless `--force`), verified gone.

mod common;
use common::*;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `rfs ARGS` from `cwd` with stdin from `input` (nothing when `None`).
fn rfs_in(rfs: &Rfs, cwd: &Path, args: &[&str], input: Option<&[u8]>) -> Output {
    let mut child = rfs
        .cmd(cwd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    if let Some(i) = input {
        stdin.write_all(i).unwrap();
    }
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The `rfs ps` line of sandbox `id`.
#[track_caller]
fn ps_line(rfs: &Rfs, cwd: &Path, id: &str) -> String {
    let ps = rfs_in(rfs, cwd, &["ps"], None);
    assert!(ps.status.success(), "{}", text(&ps.stderr));
    let listed = text(&ps.stdout);
    listed
        .lines()
        .find(|l| l.contains(id))
        .unwrap_or_else(|| panic!("{id} not in:\n{listed}"))
        .to_owned()
}

/// The meta.json of a local sandbox, to stand in for a sandbox of another
/// user or one rfs did not create.
fn local_meta(rfs: &Rfs, id: &str) -> std::path::PathBuf {
    rfs.state
        .path()
        .join("local/sandboxes")
        .join(id)
        .join("meta.json")
}

// A sandbox kept by an ended run is listed as kept (never "running"),
// with the two commands that work on it; `rfs rm ID` removes it,
// verified gone.
provider_tests! {
    fn ps_says_kept_by_an_ended_run_and_rm_removes_it(rfs: &Rfs) {
        let repo = Repo::new();
        let kept = rfs.run_with(repo.path(), r#"step("x", "true");"#, &["--keep"]);
        kept.assert_code(0);
        let id = kept.sandbox_id();
        let line = ps_line(rfs, repo.path(), &id);
        assert!(line.starts_with(rfs.prov.name()), "{line}");
        assert!(line.contains("kept, its run has ended"), "{line}");
        assert!(line.contains(&format!("`rfs shell {id}`")) && line.contains(&format!("`rfs rm {id}`")), "{line}");
        assert!(!line.contains("running"), "{line}");

        let rm = rfs_in(rfs, repo.path(), &["rm", &id], None);
        assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));
        assert!(text(&rm.stdout).contains(&format!("removed {} sandbox {id}", rfs.prov.name())), "{}", text(&rm.stdout));
        assert!(text(&rm.stdout).contains("verified gone"), "{}", text(&rm.stdout));
        let ps = rfs_in(rfs, repo.path(), &["ps"], None);
        assert!(!text(&ps.stdout).contains(&id), "{}", text(&ps.stdout));
        rfs.assert_no_leftovers();
    }
}

/// A namespaced local sandbox kept by an ended run was listed with `rfs
/// shell ID`, which was then refused: now the shell enters it (a fresh
/// namespace init over the same sandbox: its own PID namespace, the
/// synced source, nothing of the host's home), and it is gone with rm.
#[test]
fn shell_enters_a_kept_namespaced_local_sandbox() {
    assert!(
        rfs::provider::local::availability().is_ok(),
        "namespaces are needed here: {:?}",
        rfs::provider::local::availability()
    );
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("v", "from the commit\n");
    repo.commit("v");
    let kept = rfs.run_with(
        repo.path(),
        r#"step("x", "echo made-by-the-run > ../made");"#,
        &["--keep", "--isolation", "namespaces"],
    );
    kept.assert_code(0);
    let id = kept.sandbox_id();
    assert_eq!(
        kept.entries("placement")[0]["isolation"]["mode"],
        "namespaces"
    );
    let line = ps_line(&rfs, repo.path(), &id);
    assert!(line.contains(&format!("`rfs shell {id}`")), "{line}");

    let out = rfs_in(
        &rfs,
        repo.path(),
        &["shell", &id],
        Some(b"cat v; cat ../made; echo pid=$$; (setsid sleep 31717 >/dev/null 2>&1 &); exit 3\n"),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stdout.contains("from the commit"), "{stdout}");
    assert!(stdout.contains("made-by-the-run"), "{stdout}");
    // PID 1 is the sandbox's init, so the shell's pid is small: it is in
    // a PID namespace of its own, not on the host.
    let pid: u32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .unwrap_or_else(|| panic!("{stdout}"))
        .trim()
        .parse()
        .unwrap();
    assert!(
        pid < 10,
        "the shell ran with host pid {pid}: not in the sandbox's namespaces\n{stdout}"
    );
    // The namespace ended with the shell: what it started in the
    // background (in a session of its own) is gone too.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while process_running("31717") && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(
        !process_running("31717"),
        "a process started in sandbox {id} outlived its shell"
    );

    let rm = rfs_in(&rfs, repo.path(), &["rm", &id], None);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));
    rfs.assert_no_leftovers();
}

/// `ps` and `shell` printed `skipping provider daytona: DAYTONA_API_KEY is
/// not set` every time: a provider that is simply not configured is said
/// only with `-v`, or when the user asks for it.
#[test]
fn ps_and_shell_do_not_warn_about_an_unconfigured_daytona() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let kept = rfs.run_with(
        repo.path(),
        r#"step("x", "true");"#,
        &["--keep", "--isolation", "none"],
    );
    kept.assert_code(0);
    let id = kept.sandbox_id();
    let ps = rfs_in(&rfs, repo.path(), &["ps"], None);
    assert!(ps.status.success());
    assert!(
        !text(&ps.stderr).contains("daytona"),
        "{}",
        text(&ps.stderr)
    );
    let sh = rfs_in(&rfs, repo.path(), &["shell", &id], Some(b"exit 0\n"));
    assert_eq!(sh.status.code(), Some(0), "{}", text(&sh.stderr));
    assert!(
        !text(&sh.stderr).contains("daytona"),
        "{}",
        text(&sh.stderr)
    );

    let verbose = rfs_in(&rfs, repo.path(), &["ps", "-v"], None);
    assert!(
        text(&verbose.stderr).contains("provider daytona is not configured here"),
        "{}",
        text(&verbose.stderr)
    );
    let asked = rfs_in(&rfs, repo.path(), &["ps", "--provider", "daytona"], None);
    assert!(
        text(&asked.stderr).contains("skipping provider daytona: DAYTONA_API_KEY is not set"),
        "{}",
        text(&asked.stderr)
    );

    let rm = rfs_in(&rfs, repo.path(), &["rm", &id], None);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));
    assert!(
        !text(&rm.stderr).contains("daytona"),
        "{}",
        text(&rm.stderr)
    );
    rfs.assert_no_leftovers();
}

/// While its run is alive, a sandbox is "in use by its live run", not
/// "kept", with no shell suggested (a namespaced one cannot be entered
/// from another process); `rfs rm` refuses it without `--force`.
#[test]
fn ps_of_a_live_run_says_in_use_and_rm_refuses_it_without_force() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (child, out_dir) = rfs.spawn(repo.path(), r#"step("wait", "sleep 60");"#);
    wait_for_journal(&out_dir, "step.start");
    let journal = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    let id = journal
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|v| v["kind"] == "placement")
        .and_then(|v| v["payload"]["sandbox_id"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no placement in\n{journal}"));
    let line = ps_line(&rfs, repo.path(), &id);
    assert!(
        line.contains(&format!("in use by its live run (rfs pid {})", child.id())),
        "{line}"
    );
    assert!(
        !line.contains("rfs shell") && !line.contains("kept"),
        "{line}"
    );

    let rm = rfs_in(&rfs, repo.path(), &["rm", &id], None);
    assert_eq!(rm.status.code(), Some(3), "{}", text(&rm.stderr));
    assert!(
        text(&rm.stderr).contains("in use by its live run") && text(&rm.stderr).contains("--force"),
        "{}",
        text(&rm.stderr)
    );
    assert!(ps_line(&rfs, repo.path(), &id).contains("in use"));

    sigint(&child);
    let out = wait_bounded(child, out_dir);
    assert_ne!(out.code, 0);
    rfs.assert_no_leftovers();
}

/// `rfs rm` of an id no provider knows exits non-zero (2) naming it, and
/// still removes the other ids it was given; another user's sandbox needs
/// `--all`; one rfs did not create is never removed.
#[test]
fn rm_of_an_unknown_id_fails_and_only_removes_this_users_rfs_sandboxes() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let keep = || {
        let k = rfs.run_with(
            repo.path(),
            r#"step("x", "true");"#,
            &["--keep", "--isolation", "none"],
        );
        k.assert_code(0);
        k.sandbox_id()
    };
    let (a, theirs, foreign) = (keep(), keep(), keep());

    let rm = rfs_in(&rfs, repo.path(), &["rm", "local-nosuchsandbox", &a], None);
    assert_eq!(rm.status.code(), Some(2), "{}", text(&rm.stderr));
    assert!(
        text(&rm.stderr).contains("no provider knows sandbox local-nosuchsandbox"),
        "{}",
        text(&rm.stderr)
    );
    assert!(
        text(&rm.stdout).contains(&format!("removed local sandbox {a}")),
        "{}",
        text(&rm.stdout)
    );

    let edit = |id: &str, from: &str, to: &str| {
        let meta = local_meta(&rfs, id);
        let t = std::fs::read_to_string(&meta).unwrap();
        assert!(t.contains(from), "{t}");
        std::fs::write(&meta, t.replace(from, to)).unwrap();
    };
    // SAFETY: getuid cannot fail.
    let me = unsafe { libc::getuid() };
    edit(
        &theirs,
        &format!("\"relayflows/owner-uid\": \"{me}\""),
        "\"relayflows/owner-uid\": \"4242\"",
    );
    let rm = rfs_in(&rfs, repo.path(), &["rm", &theirs], None);
    assert_eq!(rm.status.code(), Some(3), "{}", text(&rm.stderr));
    assert!(
        text(&rm.stderr).contains("belongs to user id 4242") && text(&rm.stderr).contains("--all"),
        "{}",
        text(&rm.stderr)
    );
    let rm = rfs_in(&rfs, repo.path(), &["rm", "--all", &theirs], None);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));

    edit(
        &foreign,
        "\"relayflows/created-by\": \"rfs\"",
        "\"relayflows/created-by\": \"someone-else\"",
    );
    let rm = rfs_in(
        &rfs,
        repo.path(),
        &["rm", "--all", "--force", &foreign],
        None,
    );
    assert_eq!(rm.status.code(), Some(3), "{}", text(&rm.stderr));
    assert!(
        text(&rm.stderr).contains("not created by rfs"),
        "{}",
        text(&rm.stderr)
    );
    assert!(
        local_meta(&rfs, &foreign).exists(),
        "rm removed a sandbox rfs did not create"
    );
    // The test's own cleanup of the sandbox rfs left alone: its cgroups
    // (as root; left behind otherwise, one per suite run), and its
    // folder, a mount point where rfs caps its disk (a tmpfs, as root).
    let meta: serde_json::Value =
        serde_json::from_slice(&std::fs::read(local_meta(&rfs, &foreign)).unwrap()).unwrap();
    for part in meta["cgroups"].as_array().into_iter().flatten() {
        let cg = std::path::Path::new(part["dir"].as_str().unwrap());
        std::fs::remove_dir(cg).unwrap_or_else(|e| panic!("{}: {e}", cg.display()));
    }
    let dir = local_meta(&rfs, &foreign).parent().unwrap().to_path_buf();
    let _ = std::process::Command::new("umount").arg(&dir).status();
    std::fs::remove_dir_all(&dir).unwrap();
    rfs.assert_no_leftovers();
}

/// Re-entering a kept namespaced sandbox builds the isolation its run
/// had, not a wider one: a sandbox the script made without network
/// (`network: false`) has only its loopback in the shell too.
#[test]
fn shell_in_a_kept_sandbox_without_network_has_no_network() {
    assert!(
        rfs::provider::local::availability().is_ok(),
        "namespaces are needed here: {:?}",
        rfs::provider::local::availability()
    );
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let kept = rfs.run_with(
        repo.path(),
        r#"sandbox(#{ network: false }); step("x", "true");"#,
        &["--keep"],
    );
    kept.assert_code(0);
    let id = kept.sandbox_id();
    let ifaces = |out: &Output| -> Vec<String> {
        text(&out.stdout)
            .lines()
            .filter_map(|l| l.split_once(':').map(|(i, _)| i.trim().to_owned()))
            .filter(|i| !i.is_empty() && !i.contains('|') && !i.starts_with("rfs"))
            .collect()
    };
    let out = rfs_in(
        &rfs,
        repo.path(),
        &["shell", &id],
        Some(b"cat /proc/net/dev; exit 0\n"),
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(ifaces(&out), vec!["lo".to_owned()], "{}", text(&out.stdout));
    let rm = rfs_in(&rfs, repo.path(), &["rm", &id], None);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));
    rfs.assert_no_leftovers();
}

/// `rfs shell` takes no limit flags: it enters a kept sandbox with the
/// limits its run set (here the person's `--max-disk 16M` and
/// `--max-pids 16`), never wider: the same disk, the same process cap.
#[test]
fn shell_in_a_kept_sandbox_keeps_the_limits_its_run_set() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let kept = rfs.run_with(
        repo.path(),
        r#"step("x", "true");"#,
        &["--keep", "--max-disk", "16M", "--max-pids", "16"],
    );
    kept.assert_code(0);
    let id = kept.sandbox_id();
    let sh = rfs_in(
        &rfs,
        repo.path(),
        &["shell", &id],
        Some(b"df -k /tmp | tail -n 1; i=0; while [ $i -lt 40 ]; do sleep 31718 & i=$((i+1)); done; echo all-\"started\"; exit 0\n"),
    );
    let (stdout, stderr) = (text(&sh.stdout), text(&sh.stderr));
    assert!(stdout.contains(" 16384 "), "{stdout}\n{stderr}");
    assert!(!stdout.contains("all-started"), "{stdout}\n{stderr}");
    let rm = rfs_in(&rfs, repo.path(), &["rm", &id], None);
    assert_eq!(rm.status.code(), Some(0), "{}", text(&rm.stderr));
    assert!(!process_running("31718"));
    rfs.assert_no_leftovers();
}
