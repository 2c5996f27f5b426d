//! A slow Docker daemon (issue #32, item 10): under heavy load a
//! container start took longer than the Docker client's two-minute
//! request bound and the run failed with "the Docker daemon … did not
//! answer in time". A slow start is waited for (a bound that fits a
//! loaded machine, `RFS_DOCKER_START_TIMEOUT`), said on stderr while it
//! lasts, and only a daemon that does not answer within that bound fails
//! the run, naming it.
//!
//! The slow daemon is the real one behind a proxy on a unix socket of the
//! test's own, which holds back every container start request for a
//! while before passing it on (`DOCKER_HOST` points rfs at the proxy).

mod common;
use common::*;

use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The real daemon's socket.
fn upstream() -> PathBuf {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if h.starts_with("unix://") => PathBuf::from(&h["unix://".len()..]),
        _ => PathBuf::from("/var/run/docker.sock"),
    }
}

/// Whether a chunk the client sent is the start of a `POST
/// /…/containers/ID/start` request.
fn is_container_start(chunk: &[u8]) -> bool {
    let line = String::from_utf8_lossy(&chunk[..chunk.len().min(300)]);
    let line = line.lines().next().unwrap_or_default();
    line.starts_with("POST ")
        && line.contains("/containers/")
        && (line.contains("/start ") || line.contains("/start?"))
}

/// A proxy to the real daemon that holds each container start back for
/// `delay`. Lives until the test process ends; its socket is removed
/// with `dir`.
struct SlowDaemon {
    dir: tempfile::TempDir,
    starts: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl SlowDaemon {
    fn start(delay: Duration) -> SlowDaemon {
        let dir = tempfile::tempdir().unwrap();
        let listener = UnixListener::bind(dir.path().join("docker.sock")).unwrap();
        let starts = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = starts.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { return };
                let Ok(daemon) = UnixStream::connect(upstream()) else {
                    continue;
                };
                let (c2, d2) = (client.try_clone().unwrap(), daemon.try_clone().unwrap());
                let seen = seen.clone();
                std::thread::spawn(move || pump(client, daemon, Some((delay, seen))));
                std::thread::spawn(move || pump(d2, c2, None));
            }
        });
        SlowDaemon { dir, starts }
    }

    fn host(&self) -> String {
        format!("unix://{}", self.dir.path().join("docker.sock").display())
    }

    fn starts_held_back(&self) -> usize {
        self.starts.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Copy `from` into `to` until `from` ends; with `hold`, a container
/// start request waits its delay first.
fn pump(
    mut from: UnixStream,
    mut to: UnixStream,
    hold: Option<(Duration, std::sync::Arc<std::sync::atomic::AtomicUsize>)>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => {
                let _ = to.shutdown(std::net::Shutdown::Write);
                return;
            }
            Ok(n) => n,
        };
        if let Some((delay, seen)) = &hold {
            if is_container_start(&buf[..n]) {
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                std::thread::sleep(*delay);
            }
        }
        if to.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

/// A container start that takes longer than the first progress mark (but
/// less than the bound) is waited for: the run passes, and stderr said
/// the daemon was slow, for how long, and that it still answered.
#[test]
fn a_slow_docker_container_start_is_waited_for_and_said_not_failed() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let slow = SlowDaemon::start(Duration::from_secs(13));
    let repo = Repo::new();
    let t0 = Instant::now();
    let out = rfs.run_with_env(
        repo.path(),
        r#"step("x", "echo ran");"#,
        &[],
        &[("DOCKER_HOST", &slow.host())],
    );
    out.assert_code(0);
    assert!(
        slow.starts_held_back() >= 1,
        "no container start went through the proxy"
    );
    assert!(t0.elapsed() >= Duration::from_secs(13));
    assert!(
        out.stderr.contains(&format!(
            "the Docker daemon at {} is slow to start the container (1",
            slow.host()
        )),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("s so far; it answers pings"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("RFS_DOCKER_START_TIMEOUT"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

/// A daemon that does not answer a start within the bound fails the run
/// with what it did not do and the bound (not "did not answer in time"),
/// naming the setting that waits longer, and leaves no container behind.
#[test]
fn a_docker_container_start_past_the_bound_fails_naming_it_and_leaves_nothing() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let slow = SlowDaemon::start(Duration::from_secs(8));
    let repo = Repo::new();
    let out = rfs.run_with_env(
        repo.path(),
        r#"step("x", "echo ran");"#,
        &[],
        &[
            ("DOCKER_HOST", &slow.host()),
            ("RFS_DOCKER_START_TIMEOUT", "3"),
        ],
    );
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr
            .contains("did not create and start the container within 3 s"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("set RFS_DOCKER_START_TIMEOUT"),
        "{}",
        out.stderr
    );
    assert!(!out.stdout.contains("ran"), "{}", out.stdout);
    // The held-back start reaches the daemon after rfs removed the
    // container; wait for it, then nothing of the run may be left.
    std::thread::sleep(Duration::from_secs(6));
    rfs.assert_no_leftovers();
}

/// `RFS_DOCKER_START_TIMEOUT` that is not a number of seconds is refused
/// before any container is made.
#[test]
fn a_docker_start_timeout_that_is_not_seconds_is_refused() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let out = rfs.run_with_env(
        repo.path(),
        r#"step("x", "true");"#,
        &[],
        &[("RFS_DOCKER_START_TIMEOUT", "soon")],
    );
    assert_ne!(out.code, 0);
    assert!(
        out.stderr
            .contains("RFS_DOCKER_START_TIMEOUT=`soon` is not a whole number of seconds"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}
