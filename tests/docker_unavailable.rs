//! An unreachable daemon is reported as `Unavailable`, naming the address.
//!
//! Its own test binary with a single test, because it changes `DOCKER_HOST`
//! for the whole process.

use rfs::provider::docker::{DockerOptions, DockerProvider};
use rfs::provider::{Provider, ProviderError};

/// The error of connecting to `host` and preflighting it.
async fn failure_for(host: &str) -> ProviderError {
    std::env::set_var("DOCKER_HOST", host);
    match DockerProvider::connect(DockerOptions::default()) {
        Err(e) => e,
        Ok(p) => p.preflight().await.expect_err("preflight must fail"),
    }
}

#[tokio::test]
async fn unreachable_daemon_is_unavailable() {
    // No socket at all.
    let host = "unix:///nonexistent.sock";
    match failure_for(host).await {
        ProviderError::Unavailable { provider, message } => {
            assert_eq!(provider, "docker");
            assert!(message.contains(host), "{message}");
            assert!(message.contains("DOCKER_HOST"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }

    // A socket file nobody listens on: fails at the first request instead.
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("not-docker.sock");
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let host = format!("unix://{}", sock.display());
    let err = failure_for(&host).await;
    assert!(
        matches!(&err, ProviderError::Unavailable { message, .. } if message.contains(&host)),
        "{err:?}"
    );
}
