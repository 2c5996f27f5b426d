//! The Docker provider against the real local engine.
//!
//! The test image `rfs-test-busybox:latest` is built once per test binary by
//! `scripts/docker-test-image.sh` (no registry needed). Every container is
//! labelled `relayflows/created-by=rfs` plus a per-test run id, and is
//! destroyed by a guard even when the test fails.

mod common;

use std::collections::BTreeMap;
use std::io::Write;
use std::process::Command;
use std::sync::Once;
use std::time::{Duration, Instant};

use rfs::provider::docker::{DockerOptions, DockerProvider};
use rfs::provider::labels::{self, Labels};
use rfs::provider::{
    Collect, CreateSpec, ExecOutcome, ExecRequest, Provider, ProviderError, PtyChannel, PtyInput,
    PtyRequest, SandboxInfo,
};
use rfs::provider::{NativeVerifier as _, StreamInput as _};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

const IMAGE: &str = "rfs-test-busybox:latest";
const HOME: &str = "/home/rfs";

static IMAGE_READY: Once = Once::new();

/// Build the test image once per test binary.
fn ensure_image() {
    IMAGE_READY.call_once(|| {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/docker-test-image.sh");
        let status = Command::new("bash")
            .arg(script)
            .status()
            .expect("run docker-test-image.sh");
        assert!(status.success(), "docker-test-image.sh failed: {status}");
    });
}

fn options(user: Option<&str>) -> DockerOptions {
    DockerOptions {
        image: Some(IMAGE.to_string()),
        user: user.map(str::to_string),
        home: HOME.to_string(),
    }
}

fn provider(user: Option<&str>) -> DockerProvider {
    ensure_image();
    DockerProvider::connect(options(user)).expect("connect to docker")
}

/// Labels of a test sandbox: the rfs marker plus a unique run id.
fn test_labels() -> Labels {
    let mut l = labels::rfs_selector();
    l.insert(labels::RUN_ID.into(), uuid::Uuid::new_v4().to_string());
    l
}

fn run_selector(l: &Labels) -> Labels {
    let mut s = Labels::new();
    s.insert(labels::RUN_ID.into(), l[labels::RUN_ID].clone());
    s
}

fn spec(labels: Labels) -> CreateSpec {
    CreateSpec {
        run_id: labels[labels::RUN_ID].clone(),
        labels,
        env: BTreeMap::from([("SANDBOX_VAR".to_string(), "baked".to_string())]),
        base: None,
        max_lifetime: Duration::from_secs(600),
        isolation: Default::default(),
        caches: vec![],
    }
}

/// Destroys its container on drop, on a fresh runtime in its own thread, so
/// it works from any test (and while unwinding).
struct Guard {
    id: String,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let id = self.id.clone();
        let result = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            rt.block_on(async {
                let p = DockerProvider::connect(options(None)).expect("connect");
                p.destroy(&id).await
            })
        })
        .join();
        if !std::thread::panicking() {
            result.expect("guard thread").expect("destroy in guard");
        }
    }
}

/// Create a sandbox and its guard.
async fn sandbox(p: &DockerProvider) -> (SandboxInfo, Guard, Labels) {
    let labels = test_labels();
    let info = p.create(&spec(labels.clone())).await.expect("create");
    let guard = Guard {
        id: info.id.clone(),
    };
    (info, guard, labels)
}

fn req(argv: &[&str], cwd: &str) -> ExecRequest {
    ExecRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: cwd.to_string(),
        env: Vec::new(),
        timeout: None,
        cancel: CancellationToken::new(),
    }
}

async fn run(p: &DockerProvider, id: &str, r: &ExecRequest) -> (ExecOutcome, String, String) {
    let mut out = Collect::default();
    let outcome = p.exec(id, r, &mut out).await.expect("exec");
    (
        outcome,
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Run a shell snippet (busybox sh) and return its stdout; it must succeed.
async fn sh(p: &DockerProvider, id: &str, script: &str) -> String {
    let (outcome, stdout, stderr) = run(p, id, &req(&["sh", "-c", script], "/")).await;
    assert!(outcome.success(), "{script}: {outcome:?} {stderr}");
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn preflight_succeeds_against_the_local_daemon() {
    if common::docker_missing() {
        return;
    }
    provider(None).preflight().await.expect("preflight");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_get_list_destroy() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("rfs"));
    let (info, guard, labels) = sandbox(&p).await;
    // The container also shows the image's labels; ours are all there.
    assert!(labels::matches(&info.labels, &labels), "{:?}", info.labels);
    assert_eq!(info.home, HOME);
    assert_eq!(info.state, "running");

    let got = p.get(&info.id).await.unwrap().expect("get finds it");
    assert_eq!(got, info);
    let listed = p.list(&run_selector(&labels)).await.unwrap();
    assert_eq!(listed.iter().map(|s| &s.id).collect::<Vec<_>>(), [&info.id]);
    let all_rfs = p.list(&labels::rfs_selector()).await.unwrap();
    assert!(all_rfs.iter().any(|s| s.id == info.id));
    // A selector it does not match leaves it out.
    let mut other = run_selector(&labels);
    other.insert(labels::RUN_ID.into(), "another-run".into());
    assert!(p.list(&other).await.unwrap().is_empty());

    // The home exists, belongs to the configured user, who runs commands;
    // the create env is baked in.
    let owner = sh(
        &p,
        &info.id,
        &format!("stat -c %U {HOME}; id -un; echo $SANDBOX_VAR"),
    )
    .await;
    assert_eq!(owner, "rfs\nrfs\nbaked\n");

    p.destroy(&info.id).await.expect("destroy");
    assert_eq!(p.get(&info.id).await.unwrap(), None);
    assert!(p.list(&run_selector(&labels)).await.unwrap().is_empty());
    p.destroy(&info.id).await.expect("second destroy is Ok");
    let gone = p
        .exec(&info.id, &req(&["true"], "/"), &mut Collect::default())
        .await;
    assert!(
        matches!(gone, Err(ProviderError::NotFound { .. })),
        "{gone:?}"
    );
    drop(guard);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exec_applies_cwd_env_and_separates_streams() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let mut r = req(
        &[
            "sh",
            "-c",
            "pwd; echo \"$FOO $BAR\"; echo to-err >&2; exit 3",
        ],
        "/tmp",
    );
    r.env = vec![
        ("FOO".into(), "first".into()),
        ("BAR".into(), "b".into()),
        ("FOO".into(), "last".into()),
    ];
    let (outcome, stdout, stderr) = run(&p, &info.id, &r).await;
    assert_eq!(stdout, "/tmp\nlast b\n");
    assert_eq!(stderr, "to-err\n");
    assert_eq!(outcome.exit, Some(3));
    assert!(!outcome.success());
    assert!(!outcome.timed_out && !outcome.cancelled);

    let (ok, stdout, _) = run(&p, &info.id, &req(&["echo", "a  b", "$HOME"], HOME)).await;
    assert!(ok.success(), "{ok:?}");
    // argv is passed as is: no shell word splitting or expansion.
    assert_eq!(stdout, "a  b $HOME\n");

    let (killed, _, _) = run(&p, &info.id, &req(&["sh", "-c", "kill -9 $$"], "/")).await;
    assert_eq!(killed.exit, Some(137));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_cwd_is_a_clear_error() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let err = p
        .exec(
            &info.id,
            &req(&["true"], "/does/not/exist"),
            &mut Collect::default(),
        )
        .await
        .expect_err("missing cwd must fail");
    let msg = err.to_string();
    assert!(msg.contains("/does/not/exist"), "{msg}");
    assert!(msg.contains("does not exist"), "{msg}");
    assert!(msg.contains(&info.id), "{msg}");
    assert!(!msg.contains("OCI runtime"), "{msg}");

    let rel = p
        .exec(
            &info.id,
            &req(&["true"], "relative"),
            &mut Collect::default(),
        )
        .await
        .expect_err("relative cwd must fail");
    assert!(rel.to_string().contains("not an absolute path"), "{rel}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_executable_is_a_clear_error() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let mut out = Collect::default();
    let err = p
        .exec(&info.id, &req(&["no-such-cmd", "x"], "/"), &mut out)
        .await
        .expect_err("missing command must fail");
    let msg = err.to_string();
    assert!(msg.contains("`no-such-cmd` not found"), "{msg}");
    assert!(msg.contains(&info.id), "{msg}");
    assert!(out.stdout.is_empty() && out.stderr.is_empty(), "{out:?}");

    let err = p
        .exec(&info.id, &req(&["/bin/no-such"], "/"), &mut out)
        .await
        .expect_err("missing path must fail");
    assert!(
        err.to_string()
            .contains("`/bin/no-such` is not an executable file"),
        "{err}"
    );

    // A command that exits 127 on its own is not mistaken for a missing one.
    let (outcome, _, stderr) = run(&p, &info.id, &req(&["sh", "-c", "exit 127"], "/")).await;
    assert_eq!(outcome.exit, Some(127), "{stderr}");
}

/// `ps` lines (non-zombie) mentioning `needle`.
async fn running(p: &DockerProvider, id: &str, needle: &str) -> Vec<String> {
    let table = sh(p, id, "ps -o stat,args").await;
    table
        .lines()
        .filter(|l| l.contains(needle) && !l.trim_start().starts_with('Z'))
        .map(str::to_string)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn timeout_kills_the_whole_process_group() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("rfs"));
    let (info, _guard, _) = sandbox(&p).await;
    let mut r = req(
        &[
            "sh",
            "-c",
            "sleep 4242 & echo started; sleep 4343; echo never",
        ],
        "/",
    );
    r.timeout = Some(Duration::from_secs(1));
    let t0 = Instant::now();
    let (outcome, stdout, _) = run(&p, &info.id, &r).await;
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(outcome.timed_out, "{outcome:?}");
    assert!(!outcome.success());
    assert_eq!(outcome.exit, None);
    assert_eq!(outcome.signal, Some(9));
    assert_eq!(stdout, "started\n");
    // The background child is gone too, not just the foreground command.
    assert_eq!(
        running(&p, &info.id, "sleep 4242").await,
        Vec::<String>::new()
    );
    assert_eq!(
        running(&p, &info.id, "sleep 4343").await,
        Vec::<String>::new()
    );
    // The killed command's group record was cleaned up: only the record of
    // the command doing the listing remains.
    assert_eq!(
        sh(&p, &info.id, "ls -a /tmp | grep -c rfs-exec || true").await,
        "1\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_kills_the_whole_process_group() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let mut r = req(&["sh", "-c", "sleep 5151 & sleep 5252"], "/");
    let cancel = CancellationToken::new();
    r.cancel = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(700)).await;
        cancel.cancel();
    });
    let (outcome, _, _) = run(&p, &info.id, &r).await;
    assert!(outcome.cancelled && !outcome.timed_out, "{outcome:?}");
    assert_eq!(
        running(&p, &info.id, "sleep 5151").await,
        Vec::<String>::new()
    );
    assert_eq!(
        running(&p, &info.id, "sleep 5252").await,
        Vec::<String>::new()
    );

    // Already cancelled: nothing runs.
    let r = req(&["sh", "-c", "touch /tmp/ran"], "/");
    r.cancel.cancel();
    let (outcome, _, _) = run(&p, &info.id, &r).await;
    assert!(outcome.cancelled);
    assert_eq!(
        sh(&p, &info.id, "[ -e /tmp/ran ] && echo yes || echo no").await,
        "no\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upload_streams_a_big_file_intact() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("rfs"));
    let (info, _guard, _) = sandbox(&p).await;
    let mut tmp = tempfile::NamedTempFile::new().unwrap();
    let mut hasher = Sha256::new();
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..50 {
        for b in block.iter_mut() {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            *b = state as u8;
        }
        hasher.update(&block);
        tmp.write_all(&block).unwrap();
    }
    tmp.flush().unwrap();
    let digest = hex::encode(hasher.finalize());
    let remote = format!("{HOME}/big.bin");
    p.upload(&info.id, tmp.path(), &remote)
        .await
        .expect("upload");
    let out = sh(
        &p,
        &info.id,
        &format!("sha256sum {remote}; stat -c '%s %U' {remote}"),
    )
    .await;
    assert_eq!(out, format!("{digest}  {remote}\n52428800 rfs\n"));

    let err = p
        .upload(&info.id, tmp.path(), "/no/such/dir/f.bin")
        .await
        .expect_err("missing directory");
    let msg = err.to_string();
    assert!(
        msg.contains("directory /no/such/dir does not exist"),
        "{msg}"
    );
}

/// Read PTY output until it contains `needle` (or fail after 10 s).
async fn read_until(ch: &mut PtyChannel, seen: &mut String, needle: &str) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !seen.contains(needle) {
        match tokio::time::timeout_at(deadline, ch.output.recv()).await {
            Ok(Some(chunk)) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Ok(None) => panic!("output ended before {needle:?}; got {seen:?}"),
            Err(_) => panic!("no {needle:?} within 10 s; got {seen:?}"),
        }
    }
}

fn pty_req(argv: &[&str]) -> PtyRequest {
    PtyRequest {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: HOME.to_string(),
        env: vec![("PS1".into(), "rfs$ ".into())],
        cols: 80,
        rows: 24,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_echoes_input_resizes_and_exits() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let mut ch = p.open_pty(&info.id, &pty_req(&["sh"])).await.expect("pty");
    let mut seen = String::new();
    ch.input
        .send(PtyInput::Data(b"stty size\n".to_vec()))
        .unwrap();
    read_until(&mut ch, &mut seen, "24 80").await;
    // The quotes prove the shell ran it: the echoed input keeps them.
    ch.input
        .send(PtyInput::Data(b"echo hel''lo-pty; pwd\n".to_vec()))
        .unwrap();
    read_until(&mut ch, &mut seen, "hello-pty").await;
    read_until(&mut ch, &mut seen, HOME).await;
    assert!(seen.contains("hel''lo-pty"), "{seen:?}");
    ch.input
        .send(PtyInput::Resize {
            cols: 123,
            rows: 45,
        })
        .unwrap();
    ch.input
        .send(PtyInput::Data(b"stty size\n".to_vec()))
        .unwrap();
    read_until(&mut ch, &mut seen, "45 123").await;
    ch.input.send(PtyInput::Data(b"exit 5\n".to_vec())).unwrap();
    while ch.output.recv().await.is_some() {}
    let outcome = tokio::time::timeout(Duration::from_secs(10), ch.exit)
        .await
        .expect("exit in time")
        .expect("exit sent");
    assert_eq!(outcome.exit, Some(5));
    assert!(!outcome.cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_kill_ends_the_session_and_its_children() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let mut ch = p.open_pty(&info.id, &pty_req(&["sh"])).await.expect("pty");
    let mut seen = String::new();
    ch.input
        .send(PtyInput::Data(b"sleep 6161 & echo bg-started\n".to_vec()))
        .unwrap();
    read_until(&mut ch, &mut seen, "bg-started\r\n").await;
    ch.input.send(PtyInput::Kill).unwrap();
    while ch.output.recv().await.is_some() {}
    let outcome = tokio::time::timeout(Duration::from_secs(10), ch.exit)
        .await
        .expect("exit in time")
        .expect("exit sent");
    assert!(outcome.cancelled, "{outcome:?}");
    assert_eq!(
        running(&p, &info.id, "sleep 6161").await,
        Vec::<String>::new()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pty_reports_a_missing_cwd_or_command() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (info, _guard, _) = sandbox(&p).await;
    let mut r = pty_req(&["sh"]);
    r.cwd = "/nowhere".into();
    let err = p.open_pty(&info.id, &r).await.err().expect("missing cwd");
    assert!(
        err.to_string().contains("`/nowhere` does not exist"),
        "{err}"
    );
    let err = p
        .open_pty(&info.id, &pty_req(&["no-such-shell"]))
        .await
        .err()
        .expect("missing command");
    assert!(
        err.to_string().contains("`no-such-shell` not found"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn missing_image_is_a_clear_error_and_leaves_nothing() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let labels = test_labels();
    let mut s = spec(labels.clone());
    s.base = Some(rfs::provider::Base::Image("rfs-no-such-image:never".into()));
    let err = p.create(&s).await.expect_err("missing image");
    let msg = err.to_string();
    assert!(
        msg.contains("`rfs-no-such-image:never` is not present"),
        "{msg}"
    );
    assert!(p.list(&run_selector(&labels)).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_start_leaves_no_container() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("no-such-user"));
    let labels = test_labels();
    let err = p.create(&spec(labels.clone())).await.expect_err("bad user");
    assert!(err.to_string().contains("no-such-user"), "{err}");
    assert!(p.list(&run_selector(&labels)).await.unwrap().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dead_man_switch_removes_an_abandoned_sandbox() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let labels = test_labels();
    let mut s = spec(labels.clone());
    s.max_lifetime = Duration::from_secs(2);
    let info = p.create(&s).await.expect("create");
    let _guard = Guard {
        id: info.id.clone(),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while p.get(&info.id).await.unwrap().is_some() {
        assert!(Instant::now() < deadline, "sandbox outlived its lifetime");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(p.list(&run_selector(&labels)).await.unwrap().is_empty());
    // Its home volume went with it.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !volumes_of(&labels).is_empty() {
        assert!(
            Instant::now() < deadline,
            "the home volume outlived its sandbox"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    p.destroy(&info.id)
        .await
        .expect("destroying a self-removed sandbox");
}

/// The labelled volumes of a test run, per `docker volume ls`.
fn volumes_of(labels: &Labels) -> Vec<String> {
    let out = Command::new("docker")
        .args(["volume", "ls", "-q", "--filter"])
        .arg(format!(
            "label={}={}",
            labels::RUN_ID,
            labels[labels::RUN_ID]
        ))
        .output()
        .expect("docker volume ls");
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The sandbox home is a volume of its own carrying the sandbox's labels
/// (the synced tree is written to the daemon host's filesystem, not
/// through the storage driver's writable layer), and destroying the
/// sandbox removes that volume too: a run leaves no volume behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn destroying_a_docker_sandbox_leaves_no_home_volume() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("rfs"));
    let (info, guard, labels) = sandbox(&p).await;
    let vols = volumes_of(&labels);
    assert_eq!(vols.len(), 1, "one labelled home volume: {vols:?}");
    // The home is a mount point of its own inside the container.
    let mounts = sh(&p, &info.id, "cat /proc/mounts").await;
    assert!(
        mounts.lines().any(|l| l.split(' ').nth(1) == Some(HOME)),
        "{HOME} is not a mount: {mounts}"
    );
    sh(
        &p,
        &info.id,
        &format!("echo kept > {HOME}/f && cat {HOME}/f"),
    )
    .await;
    p.destroy(&info.id).await.expect("destroy");
    assert_eq!(volumes_of(&labels), Vec::<String>::new());
    drop(guard);
}

/// The host directory Docker bind-mounted at the sandbox's stream lane
/// (`/.rfs-stream`), per `docker inspect`.
fn lane_source(id: &str) -> std::path::PathBuf {
    let out = Command::new("docker")
        .args([
            "inspect",
            "-f",
            "{{range .Mounts}}{{if eq .Destination \"/.rfs-stream\"}}{{.Source}}{{end}}{{end}}",
            id,
        ])
        .output()
        .expect("docker inspect");
    assert!(out.status.success(), "{out:?}");
    let src = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    assert!(!src.is_empty(), "no stream lane mounted in {id}");
    src.into()
}

/// 20 MiB of pseudo-random bytes and their SHA-256.
fn stream_bytes() -> (Vec<u8>, String) {
    let mut state: u64 = 0x2545_F491_4F6C_DD1D;
    let data: Vec<u8> = (0..20 << 20)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    let digest = hex::encode(Sha256::digest(&data));
    (data, digest)
}

/// Stream `data` into `readlink /proc/self/fd/0; sha256sum`: what the
/// command's standard input is, and the digest of what it read.
async fn stream_into(p: &DockerProvider, id: &str, data: Vec<u8>) -> (String, String) {
    let r = req(
        &[
            "sh",
            "-c",
            "readlink /proc/$$/fd/0; sha256sum | cut -d' ' -f1",
        ],
        "/",
    );
    let mut out = Collect::default();
    let input = rfs::provider::InputStream::new(std::io::Cursor::new(data));
    let outcome = p
        .exec_with_input(id, &r, input, &mut out)
        .await
        .expect("exec with input");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        outcome.success(),
        "{outcome:?} {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut lines = stdout.lines().map(str::to_owned);
    (
        lines.next().unwrap_or_default(),
        lines.next().unwrap_or_default(),
    )
}

/// #12: on a local daemon a stream reaches the sandbox command through
/// the FIFO shared with this machine (not through dockerd and the shim),
/// whole, for an unprivileged sandbox user; destroying the sandbox
/// removes the lane's directory on this machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_reaches_the_command_whole_through_the_shared_fifo() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("rfs"));
    let (info, guard, _) = sandbox(&p).await;
    let route = p.input_route(&info.id).await;
    assert_eq!(route.via, "fifo", "{route:?}");
    assert_eq!(route.fallback, None);
    let (data, digest) = stream_bytes();
    let (stdin, got) = stream_into(&p, &info.id, data.clone()).await;
    assert_eq!(stdin, "/.rfs-stream/in");
    assert_eq!(got, digest);
    // Reused by the next stream.
    let (_, again) = stream_into(&p, &info.id, data).await;
    assert_eq!(again, digest);
    // Only rfs's user reaches the lane on this machine.
    let source = lane_source(&info.id);
    let parent = source.parent().unwrap().to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&parent).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700, "{}", parent.display());
    p.destroy(&info.id).await.expect("destroy");
    std::mem::forget(guard);
    assert!(
        !parent.exists(),
        "{} outlived its sandbox",
        parent.display()
    );
}

/// #12: a lane whose FIFO the sandbox does not share (here the host's
/// path names a new FIFO while the container keeps the old one, as with a
/// daemon in a VM) or that holds something else (a regular file) fails its
/// probe; the stream then goes over the exec's own connection, whole, and
/// the route says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lane_the_sandbox_does_not_share_falls_back_to_the_exec_stdin_and_says_why() {
    if common::docker_missing() {
        return;
    }
    let p = provider(None);
    let (unshared, _g1, _) = sandbox(&p).await;
    let (regular, _g2, _) = sandbox(&p).await;
    // Not shared: the container keeps the renamed directory's FIFO.
    unshare_lane(&lane_source(&unshared.id));
    // Something else: a regular file where the FIFO was.
    let fifo = lane_source(&regular.id).join("in");
    std::fs::remove_file(&fifo).unwrap();
    std::fs::write(&fifo, "not the nonce\n").unwrap();

    let (data, digest) = stream_bytes();
    for (id, why) in [
        (&unshared.id, "read nothing from it"),
        (&regular.id, "its probe failed"),
    ] {
        let route = p.input_route(id).await;
        assert_eq!(route.via, "stdin", "{route:?}");
        let fallback = route.fallback.unwrap_or_default();
        assert!(fallback.contains(why), "{fallback}");
        let (stdin, got) = stream_into(&p, id, data.clone()).await;
        assert!(stdin.starts_with("pipe:"), "{stdin}");
        assert_eq!(got, digest);
    }
}

/// Make `dir` (a lane's directory on this machine) one the sandbox does
/// not share: the container keeps the old directory (renamed), this
/// machine's path names a new one with a FIFO nobody in the sandbox reads.
fn unshare_lane(dir: &std::path::Path) {
    std::fs::rename(dir, dir.with_extension("moved")).unwrap();
    std::fs::create_dir(dir).unwrap();
    assert!(Command::new("mkfifo")
        .arg(dir.join("in"))
        .status()
        .unwrap()
        .success());
}

/// Run rfs's own executable's probe in `id` the way a sync runs the
/// verifier (prepare, then exec with input).
async fn own_probe(p: &DockerProvider, id: &str) -> String {
    p.prepare_own_executable(id).await.expect("prepare");
    let r = req(&["rfs", "__verify-source", "--probe"], "/");
    let mut out = Collect::default();
    let input = rfs::provider::InputStream::new(std::io::Cursor::new(Vec::new()));
    let outcome = p
        .exec_own_with_input(id, &r, input, &mut out)
        .await
        .expect("exec own");
    assert!(
        outcome.success(),
        "{outcome:?} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// #12: with a lane, rfs's executable (with its interpreter and
/// libraries) is linked into it on this machine and runs from there, read
/// only, with nothing uploaded into the home; without one it is uploaded
/// into the home as before. Either way nothing of it stays behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rfs_runs_from_the_lane_without_an_upload_and_is_uploaded_where_there_is_none() {
    if common::docker_missing() {
        return;
    }
    let p = provider(Some("rfs")).with_own_executable(Some(env!("CARGO_BIN_EXE_rfs").into()));
    let (laned, _g1, _) = sandbox(&p).await;
    let (unshared, _g2, _) = sandbox(&p).await;
    unshare_lane(&lane_source(&unshared.id));
    let answer = format!("rfs {} verifier\n", env!("CARGO_PKG_VERSION"));

    p.prepare_own_executable(&laned.id).await.expect("prepare");
    let listing = sh(&p, &laned.id, "ls /.rfs-stream; ls -a /home/rfs").await;
    assert!(listing.contains("exe-"), "{listing}");
    assert!(!listing.contains(".rfs-exe-"), "uploaded anyway: {listing}");
    // Read-only in the sandbox, even for a process that tries.
    let (outcome, _, _) = run(
        &p,
        &laned.id,
        &req(&["sh", "-c", "rm -rf /.rfs-stream/exe-*"], "/"),
    )
    .await;
    assert!(!outcome.success());
    // Not only for lack of permission (the user is not root): the mount
    // itself is read-only.
    let mounts = sh(&p, &laned.id, "grep ' /.rfs-stream ' /proc/mounts").await;
    let options = mounts.split_whitespace().nth(3).unwrap_or_default();
    assert!(options.split(',').any(|o| o == "ro"), "{mounts}");
    assert_eq!(own_probe(&p, &laned.id).await, answer);
    let listing = sh(&p, &laned.id, "ls -a /.rfs-stream /home/rfs").await;
    assert!(!listing.contains("exe-"), "left behind: {listing}");

    assert_eq!(own_probe(&p, &unshared.id).await, answer);
    let listing = sh(&p, &unshared.id, "ls -a /home/rfs").await;
    assert!(!listing.contains(".rfs-exe-"), "left behind: {listing}");
}
