//! The native verifier inside Docker containers (#12): `rfs run` copies
//! its own executable (with its interpreter and libraries) into the
//! container, verifies the sync with it, and removes the copy; where the
//! copy does not start, the sync is verified with the POSIX script and the
//! journal says why. Against the real engine and the busybox test image.

mod common;
use common::*;

use std::sync::Arc;

use rfs::provider::docker::{DockerOptions, DockerProvider};
use rfs::provider::Provider;

/// A step that fails if rfs's executable is still in the sandbox home.
/// (Where the stream lane carries it, it is linked into the lane, not
/// uploaded into the home; gone from there too.)
const NO_COPY_LEFT: &str =
    "step(\"no copy left\", \"ls -a /home/rfs /.rfs-stream; ! ls -a /home/rfs /.rfs-stream | grep -q exe-\");";

fn repo() -> Repo {
    let repo = Repo::new();
    repo.write("a/b/c.txt", "content\n");
    repo.write_bytes("big.bin", &vec![7u8; 3 << 20]);
    repo.chmod_x("a/b/c.txt");
    repo.symlink("link", "a/b/c.txt");
    repo.commit("tree");
    repo
}

/// `rfs run` on docker verifies with the native verifier in the container.
#[test]
fn a_docker_sync_is_verified_by_rfs_inside_the_container_and_the_copy_is_removed() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = repo();
    let out = rfs.run(repo.path(), &format!("sync_source();\n{NO_COPY_LEFT}\n"));
    out.assert_code(0);
    let v = &out.entries("source.verify")[0];
    assert_eq!(v["verifier"], "native", "{v}");
    assert_eq!(v["archive_digest"], "tar-entries-sha256", "{v}");
    assert_eq!(
        v["archive_sha256_local"], v["archive_sha256_sandbox"],
        "{v}"
    );
    assert!(v.get("verifier_fallback").is_none(), "{v}");
    // The stream took the FIFO shared with this machine, not dockerd.
    assert_eq!(v["stream_route"], "fifo", "{v}");
    assert!(v.get("stream_fallback").is_none(), "{v}");
    assert_eq!(v["content_equal"], true, "{v}");
    rfs.assert_no_leftovers();
}

/// Runs `script` embedded, on a docker provider whose own executable is
/// `exe`.
fn run_embedded(rfs: &Rfs, repo: &Repo, exe: Option<&str>, script: &str) -> RunOut {
    let provider = DockerProvider::connect(DockerOptions {
        image: Some(DOCKER_TEST_IMAGE.into()),
        ..DockerOptions::from_env()
    })
    .unwrap()
    .with_own_executable(exe.map(Into::into));
    let provider: Arc<dyn Provider> = Arc::new(provider);
    rfs.run_embedded(repo.path(), rfs.prepare(script), provider, None)
}

/// An executable that starts but is not rfs (it does not answer the
/// probe): the sync is verified with the POSIX script, the journal says
/// why, and nothing of the copy stays behind.
#[test]
fn a_copied_verifier_that_does_not_start_falls_back_to_the_posix_script_and_says_why() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = repo();
    let out = run_embedded(
        &rfs,
        &repo,
        Some("/bin/false"),
        &format!("sync_source();\n{NO_COPY_LEFT}\n"),
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    let v = &out.entries("source.verify")[0];
    assert_eq!(v["verifier"], "posix", "{v}");
    assert_eq!(v["archive_digest"], "sha256", "{v}");
    let why = v["verifier_fallback"].as_str().unwrap_or_default();
    assert!(why.contains("does not start in sandbox"), "{v}");
    assert_eq!(v["content_equal"], true, "{v}");
    rfs.assert_no_leftovers();
}

/// An embedder that names the rfs binary gets the native verifier too; one
/// that names none keeps the POSIX script (and no fallback is reported).
#[test]
fn an_embedder_chooses_the_verifier_by_naming_an_rfs_executable_or_none() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = repo();
    let script = format!("sync_source();\n{NO_COPY_LEFT}\n");
    for (exe, want) in [(Some(env!("CARGO_BIN_EXE_rfs")), "native"), (None, "posix")] {
        let out = run_embedded(&rfs, &repo, exe, &script);
        assert_eq!(out.code, 0, "{exe:?}: {}", out.stderr);
        let v = &out.entries("source.verify")[0];
        assert_eq!(v["verifier"], want, "{v}");
        assert!(v.get("verifier_fallback").is_none(), "{v}");
    }
    rfs.assert_no_leftovers();
}
