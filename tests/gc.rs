//! `rfs gc`: sandboxes kept by `--keep` (or left by a dead rfs) are found
//! by their labels and destroyed once their owner is gone; sandboxes of a
//! live owner, or of an owner rfs cannot judge, are left alone.

mod common;
use common::*;

use std::process::Stdio;
use std::time::{Duration, Instant};

use rfs::provider::labels::{self, Labels};
use rfs::provider::local::LocalProvider;
use rfs::provider::{CreateSpec, Provider};

/// The outcome of one `rfs gc`.
struct Gc {
    code: i32,
    stdout: String,
    stderr: String,
}

fn gc(rfs: &Rfs, args: &[&str]) -> Gc {
    let out = rfs
        .cmd(rfs.state.path())
        .arg("gc")
        .args(args)
        .args(["--provider", rfs.prov.name()])
        .output()
        .expect("rfs runs");
    let g = Gc {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    assert_eq!(
        g.code, 0,
        "rfs gc {args:?} failed\n--- stdout\n{}\n--- stderr\n{}",
        g.stdout, g.stderr
    );
    g
}

impl Gc {
    /// The one output line about sandbox `id`.
    #[track_caller]
    fn line_for(&self, id: &str) -> &str {
        let lines: Vec<&str> = self.stdout.lines().filter(|l| l.contains(id)).collect();
        assert_eq!(
            lines.len(),
            1,
            "exactly one line about {id}:\n{}",
            self.stdout
        );
        lines[0]
    }
}

/// A spawned `rfs run`; interrupted (then killed) if the test panics, so
/// no run outlives its test.
struct Running(Option<std::process::Child>);

impl Running {
    fn child(&mut self) -> &mut std::process::Child {
        self.0.as_mut().expect("running")
    }

    /// SIGINT, then wait (bounded: SIGKILL after 60 s).
    fn interrupt(&mut self) -> std::process::ExitStatus {
        let mut child = self.0.take().expect("running");
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGINT,
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(st) = child.try_wait().unwrap() {
                return st;
            }
            if Instant::now() > deadline {
                // Not stopping is reported by the caller's exit-code check.
                let _ = child.kill();
                return child.wait().unwrap();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.0.is_some() {
            let _ = self.interrupt();
        }
    }
}

/// A run with `--keep` that provisioned a sandbox; returns it and its id.
fn kept_run(rfs: &Rfs, repo: &Repo) -> (RunOut, String) {
    let out = rfs.run_with(
        repo.path(),
        "step(\"mark\", \"echo kept > kept.txt\");\n",
        &["--keep"],
    );
    out.assert_code(0);
    let id = out.sandbox_id();
    (out, id)
}

fn local(rfs: &Rfs) -> LocalProvider {
    LocalProvider::new(rfs.state.path())
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

/// Create a sandbox through the library, as rfs would, with `labels`.
fn create_with(rfs: &Rfs, run_id: &str, mut l: Labels) -> String {
    l.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
    l.insert(labels::RUN_ID.into(), run_id.into());
    let spec = CreateSpec {
        run_id: run_id.into(),
        labels: l,
        max_lifetime: Duration::from_secs(600),
        ..Default::default()
    };
    block_on(local(rfs).create(&spec)).unwrap().id
}

fn exists(rfs: &Rfs, id: &str) -> bool {
    block_on(local(rfs).get(id)).unwrap().is_some()
}

#[test]
fn keep_leaves_the_sandbox_and_journals_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (out, id) = kept_run(&rfs, &repo);
    let kept = out.entries("cleanup.kept");
    assert_eq!(kept.len(), 1, "{:?}", out.kinds());
    assert_eq!(kept[0]["sandbox_id"], id.as_str());
    assert!(out.entries("cleanup.verified").is_empty());
    assert_eq!(out.entries("run.start")[0]["keep"], true);
    assert!(out.evidence().contains("was kept (--keep)"));
    assert_eq!(rfs.leftovers(), vec![id.clone()]);
    // What the steps left is still there (the home the steps saw at
    // /home/rfs is the sandbox's folder `home` in the state directory).
    assert_eq!(out.entries("placement")[0]["home"], "/home/rfs");
    let kept_file = rfs
        .state
        .path()
        .join("local/sandboxes")
        .join(&id)
        .join("home/relayflows-source/kept.txt");
    assert_eq!(std::fs::read_to_string(kept_file).unwrap(), "kept\n");
    // Clean up for the next test run.
    gc(&rfs, &[]);
    rfs.assert_no_leftovers();
}

#[test]
fn gc_dry_run_lists_an_orphan_and_gc_destroys_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (out, id) = kept_run(&rfs, &repo);
    let run_id = out.entries("run.start")[0]["run_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let owner_pid = out.entries("placement")[0]["labels"]["relayflows/owner-pid"]
        .as_str()
        .unwrap()
        .to_owned();

    let dry = gc(&rfs, &["--dry-run"]);
    let line = dry.line_for(&id);
    assert!(line.contains("would destroy"), "{line}");
    assert!(line.contains(&format!("(run {run_id})")), "{line}");
    assert!(
        line.contains(&format!("owner pid {owner_pid} is not running")),
        "{line}"
    );
    assert!(line.starts_with("local "), "{line}");
    // A dry run destroys nothing.
    assert_eq!(rfs.leftovers(), vec![id.clone()]);
    assert!(exists(&rfs, &id));

    let real = gc(&rfs, &[]);
    let line = real.line_for(&id);
    assert!(line.contains("destroyed"), "{line}");
    assert!(line.contains("verified gone"), "{line}");
    assert!(!line.contains("would destroy"), "{line}");
    rfs.assert_no_leftovers();
    assert!(!exists(&rfs, &id));

    // Nothing is left to collect.
    let again = gc(&rfs, &[]);
    assert!(!again.stdout.contains(&id), "{}", again.stdout);
    assert!(again.stdout.trim().is_empty(), "{}", again.stdout);
}

#[test]
fn gc_keeps_a_sandbox_whose_owner_is_alive() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // Owned by this (live) test process.
    let alive = create_with(
        &rfs,
        "alive-owner-run",
        rfs::provider::owner::owner_labels(),
    );
    // And an orphan next to it: gc must tell them apart.
    let (_out, orphan) = kept_run(&rfs, &repo);
    let mut both = vec![alive.clone(), orphan.clone()];
    both.sort();
    assert_eq!(rfs.leftovers(), both);

    let dry = gc(&rfs, &["--dry-run"]);
    assert!(
        dry.line_for(&alive).contains("kept (owner alive)"),
        "{}",
        dry.stdout
    );
    assert!(dry.line_for(&alive).contains("(run alive-owner-run)"));
    assert!(dry.line_for(&orphan).contains("would destroy"));

    let real = gc(&rfs, &[]);
    assert!(
        real.line_for(&alive).contains("kept (owner alive)"),
        "{}",
        real.stdout
    );
    assert!(real.line_for(&orphan).contains("destroyed"));
    assert_eq!(rfs.leftovers(), vec![alive.clone()]);
    assert!(exists(&rfs, &alive));

    // Clean up what the test created.
    block_on(local(&rfs).destroy(&alive)).unwrap();
    rfs.assert_no_leftovers();
}

#[test]
fn gc_destroys_a_sandbox_whose_owner_pid_was_reused() {
    let rfs = Rfs::new(Prov::Local);
    // This process's pid, but a start time it never had: a reused pid.
    let mut l = rfs::provider::owner::owner_labels();
    let real_start = l[labels::OWNER_PID_START].clone();
    assert!(!real_start.is_empty(), "the test can read its start time");
    l.insert(labels::OWNER_PID_START.into(), "1".into());
    let id = create_with(&rfs, "reused-pid-run", l);

    let dry = gc(&rfs, &["--dry-run"]);
    let line = dry.line_for(&id);
    assert!(line.contains("would destroy"), "{line}");
    assert!(line.contains("reused"), "{line}");

    let real = gc(&rfs, &[]);
    assert!(real.line_for(&id).contains("destroyed"), "{}", real.stdout);
    rfs.assert_no_leftovers();
}

#[test]
fn gc_keeps_sandboxes_it_cannot_judge() {
    let rfs = Rfs::new(Prov::Local);
    // Another host's sandbox: its pid means nothing here.
    let mut other = Labels::new();
    other.insert(labels::OWNER_HOST.into(), "another-host.invalid".into());
    other.insert(labels::OWNER_PID.into(), "999999999".into());
    other.insert(labels::OWNER_PID_START.into(), "1".into());
    let foreign = create_with(&rfs, "foreign-run", other);
    // No owner labels at all.
    let unlabelled = create_with(&rfs, "unlabelled-run", Labels::new());

    let real = gc(&rfs, &[]);
    let line = real.line_for(&foreign);
    assert!(
        line.contains("kept") && line.contains("another-host.invalid"),
        "{line}"
    );
    let line = real.line_for(&unlabelled);
    assert!(
        line.contains("kept") && line.contains("no owner-host"),
        "{line}"
    );
    assert!(exists(&rfs, &foreign) && exists(&rfs, &unlabelled));

    for id in [&foreign, &unlabelled] {
        block_on(local(&rfs).destroy(id)).unwrap();
    }
    rfs.assert_no_leftovers();
}

#[test]
fn gc_keeps_the_sandbox_of_a_running_rfs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare("step(\"long\", \"sleep 300\");\n");
    let child = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rfs starts");
    let mut run = Running(Some(child));
    // The sandbox exists and is in use once the step has started.
    let journal = out_dir.join("journal.jsonl");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !std::fs::read_to_string(&journal)
        .map(|t| t.contains("\"step.start\""))
        .unwrap_or(false)
    {
        if let Ok(Some(st)) = run.child().try_wait() {
            panic!("rfs exited early: {st}");
        }
        assert!(Instant::now() < deadline, "the step never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let left = rfs.leftovers();
    assert_eq!(left.len(), 1, "{left:?}");
    let id = left[0].clone();

    let real = gc(&rfs, &[]);
    assert!(
        real.line_for(&id).contains("kept (owner alive)"),
        "{}",
        real.stdout
    );
    assert!(
        exists(&rfs, &id),
        "gc destroyed the sandbox of a running rfs"
    );

    // End the run (Ctrl-C): it cleans up after itself.
    assert_eq!(run.interrupt().code(), Some(130));
    rfs.assert_no_leftovers();
}

/// Bug 9: when the owner's start time is unknown (not recorded, or not
/// readable), a live owner was judged "pid reused" and its sandbox
/// destroyed. Unknown means keep, with the reason shown.
#[test]
fn gc_keeps_a_live_owner_whose_start_time_is_unknown() {
    let rfs = Rfs::new(Prov::Local);
    let mut ids = vec![];
    for recorded in ["", "not-a-number"] {
        // This (live) process is the owner; its start time is unknown.
        let mut l = rfs::provider::owner::owner_labels();
        l.insert(labels::OWNER_PID_START.into(), recorded.into());
        ids.push(create_with(&rfs, "unknown-start-run", l));
    }
    let real = gc(&rfs, &[]);
    for id in &ids {
        let line = real.line_for(id);
        assert!(
            line.contains("kept") && line.contains("cannot be ruled out"),
            "{line}"
        );
        assert!(exists(&rfs, id), "{id} was destroyed");
    }
    for id in &ids {
        block_on(local(&rfs).destroy(id)).unwrap();
    }
    rfs.assert_no_leftovers();
}

/// A checkpoint (#36) left by an rfs that died (its owner pid gone) is
/// found by `rfs gc` and removed, verified gone; one of a live owner is
/// kept.
#[test]
fn gc_removes_a_dead_owners_checkpoint_and_keeps_a_live_ones() {
    let rfs = Rfs::new(Prov::Local);
    let p = local(&rfs);
    let id = create_with(&rfs, "r-ckpt", Labels::new());
    let fork = p.forking().expect("local can checkpoint");
    let mut dead = rfs::provider::owner::owner_labels();
    let gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    let mut gone = gone;
    gone.wait().unwrap();
    dead.insert(labels::OWNER_PID.into(), gone_pid.to_string());
    dead.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
    dead.insert(labels::RUN_ID.into(), "r-dead".into());
    let orphan = block_on(fork.checkpoint(&id, "orphan", &dead)).unwrap();
    let mut live = rfs::provider::owner::owner_labels();
    live.insert(labels::RUN_ID.into(), "r-live".into());
    let kept = block_on(fork.checkpoint(&id, "kept", &live)).unwrap();
    block_on(p.destroy(&id)).unwrap();
    let g = gc(&rfs, &[]);
    let line = g.line_for(&orphan.id);
    assert!(
        line.contains("destroyed") && line.contains("checkpoint"),
        "{line}"
    );
    assert!(g.line_for(&kept.id).contains("kept"), "{}", g.stdout);
    let dir = rfs.state.path().join("local/checkpoints");
    assert!(!dir.join(&orphan.id).exists());
    assert!(dir.join(&kept.id).exists());
    block_on(fork.remove_checkpoint(&kept.id)).unwrap();
    rfs.assert_no_leftovers();
}

/// An rfs killed (`kill -9`) while copying a checkpoint left its
/// `.partial` copy (up to the disk cap) that `rfs gc` never saw, and a
/// removal it was making left `local/trash/` behind. The partial copy
/// names its owner from its first moment now, so `rfs gc` removes it
/// with the dead run's sandbox, and empties the trash.
#[test]
fn a_checkpoint_killed_midway_leaves_nothing_after_gc() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let script =
        "step(\"many\", \"mkdir -p $HOME/many && cd $HOME/many && seq 1 60000 | xargs touch\");\n\
                  checkpoint(\"big\");\nstep(\"after\", \"true\");";
    let (mut child, _out) = rfs.spawn(repo.path(), script);
    let dir = rfs.state.path().join("local/checkpoints");
    let partial = || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten()
                    .any(|e| e.file_name().to_string_lossy().ends_with(".partial"))
            })
            .unwrap_or(false)
    };
    // Killed while it copies (its meta.json, written first, is there).
    let copying = || {
        std::fs::read_dir(&dir)
            .map(|d| {
                d.flatten().any(|e| {
                    e.file_name().to_string_lossy().ends_with(".partial")
                        && e.path().join("meta.json").exists()
                })
            })
            .unwrap_or(false)
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while !copying() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(partial(), "the checkpoint's copy never started");
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(partial(), "the killed copy is left for gc to find");
    // A removal an earlier rfs was killed in the middle of.
    let trash = rfs.state.path().join("local/trash/local-dead-0");
    std::fs::create_dir_all(trash.join("home/deep")).unwrap();
    let g = gc(&rfs, &[]);
    assert!(g.stdout.contains("checkpoint"), "{}", g.stdout);
    assert!(!partial(), "gc left the partial checkpoint: {}", g.stdout);
    assert!(!trash.exists(), "gc left the trash");
    rfs.assert_no_leftovers();
}

/// Labels of a sandbox or checkpoint whose rfs died (its owner pid gone).
fn dead_owner_labels(run_id: &str) -> Labels {
    let mut dead = rfs::provider::owner::owner_labels();
    let mut gone = std::process::Command::new("true").spawn().unwrap();
    let gone_pid = gone.id();
    gone.wait().unwrap();
    dead.insert(labels::OWNER_PID.into(), gone_pid.to_string());
    dead.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
    dead.insert(labels::RUN_ID.into(), run_id.into());
    dead
}

/// A dead run left a checkpoint (on docker a committed image) and a
/// sandbox forked from it (a container of that image): one `rfs gc`
/// removes both, the fork first, so the checkpoint is no longer in use
/// when it is removed (removing the image first failed and took a second
/// gc); a second gc finds nothing.
#[test]
fn one_gc_removes_a_dead_runs_fork_and_the_checkpoint_it_was_forked_from() {
    for prov in [Prov::Local, Prov::Docker] {
        if prov == Prov::Docker && docker_missing() {
            continue;
        }
        let rfs = Rfs::new(prov);
        let p = rfs.provider();
        let fork = p.forking().expect("the provider can checkpoint");
        let dead = dead_owner_labels("r-dead-fork");
        let spec = CreateSpec {
            run_id: "r-dead-fork".into(),
            labels: dead.clone(),
            max_lifetime: Duration::from_secs(600),
            ..Default::default()
        };
        let setup = block_on(p.create(&spec)).unwrap().id;
        // Labelled as the runtime labels a checkpoint.
        let mut ckpt_labels = dead.clone();
        ckpt_labels.insert(rfs::provider::fork::CHECKPOINT_LABEL.into(), "setup".into());
        let ckpt = block_on(fork.checkpoint(&setup, "setup", &ckpt_labels)).unwrap();
        block_on(p.destroy(&setup)).unwrap();
        let forked = block_on(fork.fork(&ckpt, &spec)).unwrap().info.id;

        let g = gc(&rfs, &[]);
        let line = g.line_for(&forked);
        assert!(line.contains("destroyed"), "{prov:?}: {line}");
        let line = g.line_for(&ckpt.id);
        assert!(
            line.contains("destroyed") && line.contains("checkpoint"),
            "{prov:?}: {line}\n{}",
            g.stdout
        );
        assert!(
            !rfs.checkpoint_exists(&ckpt.id),
            "{prov:?}: the checkpoint is left"
        );
        assert!(
            block_on(p.get(&forked)).unwrap().is_none(),
            "{prov:?}: the fork is left"
        );
        let again = gc(&rfs, &[]);
        assert!(
            !again.stdout.contains(&ckpt.id) && !again.stdout.contains(&forked),
            "{prov:?}: a second gc found more:\n{}",
            again.stdout
        );
        rfs.assert_no_leftovers();
    }
}
