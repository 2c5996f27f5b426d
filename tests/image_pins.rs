//! Environments pinned by content (#35): a docker sandbox's image id is
//! journaled with its name, listed in the attestation as a resolved
//! dependency and checked by `rfs replay` (a different image under the
//! same name is refused, naming both ids, unless `--allow-other-image`);
//! a script may name an image by id. A `local` sandbox journals the host's
//! fingerprint, which replay compares.
//!
//! The docker tests use the real engine: a second image is made from the
//! test image with one extra file (`docker commit`), and a tag of the
//! test's own is moved onto it to simulate a retag. Every image and tag a
//! test makes is removed when it ends.

mod common;
use common::*;

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn image_id(name: &str) -> String {
    docker(&["image", "inspect", "--format", "{{.Id}}", name])
}

/// A tag of the test's own, and a second image differing from the test
/// image by one file; both removed on drop.
struct Images {
    tag: String,
    other: String,
}

impl Images {
    fn new() -> Images {
        let u = uuid_like();
        let tag = format!("rfs-test-pin-{u}:latest");
        docker(&["tag", DOCKER_TEST_IMAGE, &tag]);
        let dir = tempfile::tempdir().unwrap();
        let extra = dir.path().join("extra");
        std::fs::write(&extra, format!("{u}\n")).unwrap();
        let name = format!("rfs-test-pin-{u}");
        docker(&["create", "--name", &name, DOCKER_TEST_IMAGE]);
        let committed = Command::new("docker")
            .args(["cp", extra.to_str().unwrap(), &format!("{name}:/extra")])
            .status()
            .unwrap()
            .success()
            .then(|| docker(&["commit", &name]));
        docker(&["rm", "-f", &name]);
        let other = committed.expect("docker cp into the container");
        Images { tag, other }
    }
}

impl Drop for Images {
    fn drop(&mut self) {
        for i in [&self.tag, &self.other] {
            let _ = Command::new("docker").args(["rmi", "-f", i]).output();
        }
    }
}

/// The in-toto statement of a bundle.
fn statement(out: &Path) -> Value {
    use base64::Engine as _;
    let env: Value = serde_json::from_str(
        &std::fs::read_to_string(out.join("attestation.intoto.json")).unwrap(),
    )
    .unwrap();
    let payload = base64::engine::general_purpose::STANDARD
        .decode(env["payload"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&payload).unwrap()
}

fn verify(rfs: &Rfs, cwd: &Path, out: &Path) {
    let v = rfs.cmd(cwd).arg("verify").arg(out).output().unwrap();
    assert!(
        v.status.success(),
        "rfs verify: {}{}",
        String::from_utf8_lossy(&v.stdout),
        String::from_utf8_lossy(&v.stderr)
    );
}

fn replay(rfs: &Rfs, cwd: &Path, bundle: &Path, args: &[&str]) -> RunOut {
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let o = rfs
        .cmd(cwd)
        .arg("replay")
        .arg(bundle)
        .arg("--out")
        .arg(&out_dir)
        .args(args)
        .output()
        .expect("rfs runs");
    finish(o, out_dir)
}

/// The original run of `script` (`TAG` in it: the test's tag), whose
/// journal pins (`pin`) the tag's image; then the tag is moved onto the
/// other image. The original run and the image id it ran on.
fn run_then_retag(
    rfs: &Rfs,
    repo: &Repo,
    images: &Images,
    script: &str,
    pin: impl Fn(&RunOut) -> Value,
) -> (RunOut, String) {
    let original_id = image_id(&images.tag);
    let original = rfs.run(repo.path(), &script.replace("TAG", &images.tag));
    original.assert_code(0);
    assert_eq!(pin(&original), original_id.as_str());
    // Same name, other image.
    docker(&["tag", &images.other, &images.tag]);
    (original, original_id)
}

/// A replay refused (exit 3) naming the original image and the other.
fn assert_refused_naming_both(r: &RunOut, original_id: &str, other: &str) {
    r.assert_code(3);
    assert!(
        r.stderr.contains(original_id) && r.stderr.contains(other),
        "names both images: {}",
        r.stderr
    );
}

#[test]
fn a_docker_placement_names_the_image_id_and_the_attestation_lists_it() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let id = image_id(DOCKER_TEST_IMAGE);
    let out = rfs.run(repo.path(), r#"step("hi", "echo hi");"#);
    out.assert_code(0);
    let placement = &out.entries("placement")[0];
    assert_eq!(placement["image"], DOCKER_TEST_IMAGE);
    assert_eq!(placement["environment"]["image"]["id"], id.as_str());
    let deps = &statement(&out.out_dir)["predicate"]["run"]["resolvedDependencies"];
    assert_eq!(deps[0]["name"], DOCKER_TEST_IMAGE);
    assert_eq!(deps[0]["uri"], format!("docker-image:{id}").as_str());
    assert_eq!(
        deps[0]["digest"]["sha256"],
        id.strip_prefix("sha256:").unwrap()
    );
    assert!(
        out.evidence()
            .contains(&format!("- environment: image {id}")),
        "{}",
        out.evidence()
    );
    verify(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

#[test]
fn a_replay_after_the_name_was_retagged_to_another_image_is_refused_naming_both() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let images = Images::new();
    let (original, original_id) = run_then_retag(
        &rfs,
        &repo,
        &images,
        "sandbox(#{ image: \"TAG\" }); step(\"hi\", \"echo hi\");",
        |o| o.entries("placement")[0]["environment"]["image"]["id"].clone(),
    );
    let r = replay(&rfs, repo.path(), &original.out_dir, &[]);
    assert_refused_naming_both(&r, &original_id, &images.other);
    assert!(r.stderr.contains("--allow-other-image"), "{}", r.stderr);
    assert!(r.entries("step.start").is_empty(), "nothing ran");
    assert_eq!(
        r.entries("placement")[0]["environment"]["image"]["id"],
        images.other.as_str(),
        "the journal says what was found"
    );

    // The person allows it: the replay runs, and says on what.
    let r = replay(
        &rfs,
        repo.path(),
        &original.out_dir,
        &["--allow-other-image"],
    );
    r.assert_code(0);
    assert!(
        r.stderr.contains(&format!(
            "replaying on image {}, not the original run's {original_id} (--allow-other-image)",
            images.other
        )),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.entries("run.start")[0]["replay_of"]["allow_other_image"],
        true
    );
    assert_eq!(
        r.entries("run.start")[0]["replay_of"]["environment"]["image"]["id"],
        original_id.as_str()
    );
    verify(&rfs, repo.path(), &r.out_dir);

    // The original image under its name again: the replay passes as is.
    docker(&["tag", &original_id, &images.tag]);
    let r = replay(&rfs, repo.path(), &original.out_dir, &[]);
    r.assert_code(0);
    // (Other warnings, such as the default disk cap docker does not
    // enforce, are not about the image.)
    assert!(
        r.entries("placement.warning")
            .iter()
            .all(|w| !w["message"].as_str().unwrap_or("").contains("image")),
        "{}",
        r.stderr
    );
    rfs.assert_no_leftovers();
}

#[test]
fn an_image_named_by_id_runs_and_is_pinned() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let id = image_id(DOCKER_TEST_IMAGE);
    let out = rfs.run(
        repo.path(),
        &format!("sandbox(#{{ image: \"{id}\" }}); step(\"hi\", \"echo hi\");"),
    );
    out.assert_code(0);
    let placement = &out.entries("placement")[0];
    assert_eq!(placement["image"], id.as_str());
    assert_eq!(placement["environment"]["image"]["id"], id.as_str());
    verify(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

#[test]
fn a_local_placement_journals_the_host_fingerprint_and_a_replay_on_the_same_host_warns_of_nothing()
{
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let out = rfs.run(repo.path(), r#"step("hi", "echo hi");"#);
    out.assert_code(0);
    let host = &out.entries("placement")[0]["environment"]["host"];
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(host["kernel"], kernel.trim());
    let dpkg = Command::new("dpkg-query").arg("-W").output();
    match dpkg {
        Ok(o) if o.status.success() => {
            use sha2::Digest as _;
            assert_eq!(
                host["packages_sha256"],
                hex::encode(sha2::Sha256::digest(&o.stdout)).as_str()
            );
        }
        _ => assert!(host.get("packages_sha256").is_none(), "{host}"),
    }
    assert!(
        out.entries("placement")[0]["environment"]
            .get("image")
            .is_none(),
        "no image on local"
    );
    let r = replay(&rfs, repo.path(), &out.out_dir, &[]);
    r.assert_code(0);
    assert_eq!(
        r.entries("run.start")[0]["replay_of"]["environment"]["host"],
        *host,
        "the replay compared against the original's fingerprint"
    );
    // (`local` has no images: the test environment's image is ignored
    // with a warning of its own.)
    let differs: Vec<_> = r
        .entries("placement.warning")
        .into_iter()
        .filter(|w| w["message"].as_str().unwrap().contains("host differs"))
        .collect();
    assert!(differs.is_empty(), "{differs:?}");
    verify(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

/// A service's image is pinned as the sandbox's is: a replay whose
/// service image name now points at another image is refused naming both
/// ids (the sandbox's image is the same), unless `--allow-other-image`.
/// Bug: the other image's container was created and started (its own
/// command ran) before the refusal; now nothing of it is created.
#[test]
fn a_replayed_service_whose_image_was_retagged_is_refused_before_its_container_starts() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let images = Images::new();
    let (original, original_id) = run_then_retag(
        &rfs,
        &repo,
        &images,
        "service(\"db\", #{ image: \"TAG\", cmd: \"exec sleep 600\" }); step(\"hi\", \"echo hi\");",
        |o| o.entries("service.start")[0]["image_pin"]["id"].clone(),
    );
    let r = replay(&rfs, repo.path(), &original.out_dir, &[]);
    assert_refused_naming_both(&r, &original_id, &images.other);
    assert!(r.stderr.contains("service `db`"), "{}", r.stderr);
    assert!(r.entries("step.start").is_empty(), "nothing ran");
    assert!(
        r.entries("service.start").is_empty() && r.entries("service.end").is_empty(),
        "refused before its container was created: {:?}",
        r.kinds()
    );
    let r = replay(
        &rfs,
        repo.path(),
        &original.out_dir,
        &["--allow-other-image"],
    );
    r.assert_code(0);
    assert!(r.stderr.contains("(--allow-other-image)"), "{}", r.stderr);
    rfs.assert_no_leftovers();
}

/// A service's image is a dependency of the run as the sandbox's image
/// is: the attestation lists both by content (it listed the sandbox's
/// only, so a service's software was missing from the provenance).
#[test]
fn the_attestation_lists_a_services_image_by_content_after_the_sandboxs() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    let id = image_id(DOCKER_TEST_IMAGE);
    let out = rfs.run(
        repo.path(),
        &format!(
            "service(\"db\", #{{ image: \"{DOCKER_TEST_IMAGE}\", cmd: \"exec sleep 600\" }}); step(\"hi\", \"echo hi\");"
        ),
    );
    out.assert_code(0);
    let deps = &statement(&out.out_dir)["predicate"]["run"]["resolvedDependencies"];
    assert_eq!(deps.as_array().map(Vec::len), Some(2), "{deps}");
    assert!(deps[0]["annotations"]["service"].is_null(), "{deps}");
    assert_eq!(deps[1]["annotations"]["service"], "db", "{deps}");
    assert_eq!(deps[1]["name"], DOCKER_TEST_IMAGE);
    assert_eq!(deps[1]["uri"], format!("docker-image:{id}").as_str());
    assert_eq!(
        deps[1]["digest"]["sha256"],
        id.strip_prefix("sha256:").unwrap()
    );
    verify(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}
