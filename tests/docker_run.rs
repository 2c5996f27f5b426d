//! Docker-specific behaviour of whole runs against the real engine: a
//! daemon that cannot be reached, a missing image, a container killed
//! mid-step, `rfs gc` after rfs itself was killed with SIGKILL, and a
//! daemon that cannot mount the stream lane.

mod common;
use common::*;

use std::process::{Command, Stdio};
use std::time::Duration;

fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn container_exists(id: &str) -> bool {
    Command::new("docker")
        .args(["inspect", id])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .unwrap()
        .success()
}

#[test]
fn unreachable_daemon_is_refused_before_anything_happens() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let marker = rfs.state.path().join("RAN");
    let (script, out_dir) = rfs.prepare(&format!("step(\"x\", \"touch {}\");", marker.display()));
    let out = rfs
        .cmd(repo.path())
        .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(3);
    assert!(
        out.stderr.contains("cannot reach the Docker daemon") && out.stderr.contains("DOCKER_HOST"),
        "{}",
        out.stderr
    );
    assert!(!marker.exists());
    // The refusal is evidence too: journaled, and the run ended.
    assert!(out.entries("provider.unavailable")[0]["reason"]
        .as_str()
        .unwrap()
        .contains("DOCKER_HOST"));
    assert_eq!(out.entries("run.end")[0]["outcome"], "refused");
    assert!(out.entries("placement.intent").is_empty());
}

#[test]
fn missing_image_is_a_clear_refusal_without_fallback() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let out = rfs.run_with(
        repo.path(),
        "step(\"x\", \"true\");",
        &["--image", "rfs-no-such-image:0"],
    );
    out.assert_code(3);
    assert!(
        out.stderr.contains("`rfs-no-such-image:0` is not present"),
        "{}",
        out.stderr
    );
    assert!(out.entries("placement").is_empty());
    assert!(out.entries("step.attempt").is_empty());
    rfs.assert_no_leftovers();
}

#[test]
fn sandbox_image_option_beats_the_default() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ image: \"rfs-no-such-image:1\" }); step(\"x\", \"true\");",
    );
    out.assert_code(3);
    assert!(out.stderr.contains("rfs-no-such-image:1"), "{}", out.stderr);
    rfs.assert_no_leftovers();
}

/// A Daytona snapshot named on docker is not passed on as if it were an
/// image: docker starts from images, so the snapshot is ignored with a
/// journaled warning and the run's image is used.
#[test]
fn a_snapshot_on_docker_is_ignored_with_a_warning_not_taken_for_an_image() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let out = rfs.run(
        repo.path(),
        "sandbox(#{ snapshot: \"rfs-no-such-image:2\" }); step(\"x\", \"true\");",
    );
    out.assert_code(0);
    let warnings = out.entries("placement.warning");
    assert!(
        warnings.iter().any(|w| w["message"]
            .as_str()
            .unwrap_or_default()
            .contains("has no snapshots; snapshot `rfs-no-such-image:2` is ignored")),
        "{warnings:?}"
    );
    rfs.assert_no_leftovers();
}

#[test]
fn container_killed_mid_step_fails_clearly_and_is_cleaned_up() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let (child, out_dir) = rfs.spawn(
        repo.path(),
        "sync_source(); step(\"long\", \"sleep 600\"); step(\"never\", \"true\");",
    );
    wait_for_journal(&out_dir, "step.start");
    std::thread::sleep(Duration::from_millis(500));
    let placement = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap();
    let id = placement
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["kind"] == "placement")
        .unwrap()["payload"]["sandbox_id"]
        .as_str()
        .unwrap()
        .to_owned();
    docker(&["kill", &id]);
    let out = finish(child.wait_with_output().unwrap(), out_dir);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(out.stderr.contains("long"), "{}", out.stderr);
    assert!(out
        .entries("step.start")
        .iter()
        .all(|s| s["name"] != "never"));
    assert_eq!(
        out.entries("cleanup.verified")[0]["sandbox_id"],
        id.as_str()
    );
    assert!(!container_exists(&id));
    rfs.assert_no_leftovers();
}

#[test]
fn gc_reaps_the_container_of_an_rfs_killed_with_sigkill() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let (script, out_dir) = rfs.prepare("sync_source(); step(\"long\", \"sleep 600\");");
    let mut child = rfs
        .cmd(repo.path())
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for_journal(&out_dir, "step.start");
    child.kill().unwrap(); // SIGKILL: no cleanup can run
    child.wait().unwrap();
    let out = finish(
        std::process::Output {
            status: std::process::ExitStatus::default(),
            stdout: vec![],
            stderr: vec![],
        },
        out_dir,
    );
    let id = out.sandbox_id();
    assert!(
        container_exists(&id),
        "the container must outlive a SIGKILLed rfs"
    );
    assert_eq!(rfs.leftovers(), vec![id.clone()]);

    let dry = rfs
        .cmd(repo.path())
        .args(["gc", "--dry-run", "--provider", "docker"])
        .output()
        .unwrap();
    let dry_out = String::from_utf8_lossy(&dry.stdout);
    assert!(
        dry_out.contains(&format!("{id} ")) && dry_out.contains("would destroy"),
        "{dry_out}"
    );
    assert!(container_exists(&id), "dry run destroyed it");

    let gc = rfs
        .cmd(repo.path())
        .args(["gc", "--provider", "docker"])
        .output()
        .unwrap();
    let gc_out = String::from_utf8_lossy(&gc.stdout);
    assert!(
        gc.status.success(),
        "{gc_out} {}",
        String::from_utf8_lossy(&gc.stderr)
    );
    assert!(
        gc_out.contains(&id) && gc_out.contains("destroyed"),
        "{gc_out}"
    );
    assert!(!container_exists(&id));
    rfs.assert_no_leftovers();
}

/// #12: a daemon that cannot mount this machine's stream lane (here rfs
/// runs in a mount namespace of its own whose `$TMPDIR` is a tmpfs only it
/// sees, as when rfs runs in a container that shares the host's Docker
/// socket) refuses the bind mount: the sandbox is made without a lane, the
/// archive goes over the exec's connection and rfs's executable is
/// uploaded, the sync is verified as ever, and the journal says why.
#[test]
fn a_daemon_that_cannot_mount_the_lane_gets_the_stream_over_the_exec_and_the_journal_says_why() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    repo.write("a/b.txt", "b\n");
    repo.commit("tree");
    let (script, out_dir) = rfs.prepare("sync_source();\n");
    let private_tmp = rfs.state.path().join("private-tmp");
    std::fs::create_dir_all(&private_tmp).unwrap();
    let base = rfs.cmd(repo.path());
    let mut cmd = Command::new("unshare");
    cmd.args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(r#"mount -t tmpfs rfs-private "$1" && shift && exec "$@""#)
        .arg("sh")
        .arg(&private_tmp)
        .arg(base.get_program())
        .args(base.get_args())
        .arg("run")
        .arg(&script)
        .arg("--out")
        .arg(&out_dir)
        .current_dir(repo.path())
        .env("TMPDIR", &private_tmp)
        .stdin(Stdio::null());
    for (k, v) in base.get_envs() {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    let out = finish(cmd.output().expect("unshare runs"), out_dir);
    out.assert_code(0);
    let v = &out.entries("source.verify")[0];
    assert_eq!(v["stream_route"], "stdin", "{v}");
    let why = v["stream_fallback"].as_str().unwrap_or_default();
    assert!(why.contains("cannot mount it"), "{v}");
    assert!(why.contains("bind source path"), "{v}");
    assert_eq!(v["verifier"], "native", "{v}");
    assert_eq!(v["content_equal"], true, "{v}");
    rfs.assert_no_leftovers();
}
