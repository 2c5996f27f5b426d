//! `rfs.toml` (issue #23): a repository's settings, after flags and the
//! environment and before rfs's defaults; an unknown key is refused as a
//! misspelt flag is.

mod common;
use common::*;

fn run_in(
    repo: &Repo,
    rfs: &Rfs,
    script: &str,
    env_provider: Option<&str>,
    args: &[&str],
) -> RunOut {
    let (path, out_dir) = rfs.prepare(script);
    let mut c = rfs.cmd(repo.path());
    match env_provider {
        Some(p) => c.env("RELAYFLOWS_SANDBOX_PROVIDER", p),
        None => c.env_remove("RELAYFLOWS_SANDBOX_PROVIDER"),
    };
    let out = c
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .args(args)
        .output()
        .unwrap();
    finish(out, out_dir)
}

fn chosen(out: &RunOut) -> (String, String) {
    let start = &out.entries("run.start")[0];
    (
        start["provider"].as_str().unwrap().to_owned(),
        start["provider_reason"].as_str().unwrap().to_owned(),
    )
}

#[test]
fn the_provider_comes_from_rfs_toml_after_the_flag_and_the_environment() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "provider = \"local\"\nmax_lifetime = 600\n");
    repo.commit("settings");
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", None, &[]);
    out.assert_code(0);
    assert_eq!(chosen(&out), ("local".into(), "rfs.toml".into()));
    // The environment beats the file; a flag beats both.
    repo.write("rfs.toml", "provider = \"no-such-provider\"\n");
    repo.commit("a provider this rfs does not know");
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", Some("local"), &[]);
    out.assert_code(0);
    assert_eq!(
        chosen(&out).1,
        "RELAYFLOWS_SANDBOX_PROVIDER environment variable"
    );
    let out = run_in(
        &repo,
        &rfs,
        "step(\"x\", \"true\");",
        Some("nope"),
        &["--provider", "local"],
    );
    out.assert_code(0);
    assert_eq!(chosen(&out).1, "--provider flag");
    // Used, the file's unknown provider is refused and named.
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", None, &[]);
    out.assert_code(2);
    assert!(out.stderr.contains("no-such-provider"), "{}", out.stderr);
    rfs.assert_no_leftovers();
}

#[test]
fn a_misspelt_key_in_rfs_toml_is_refused_before_anything_runs() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "provder = \"docker\"\n");
    repo.commit("a typo");
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", Some("local"), &[]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("rfs.toml") && out.stderr.contains("provder"),
        "{}",
        out.stderr
    );
    assert!(!out.out_dir.join("journal.jsonl").exists());
}

#[test]
fn the_image_comes_from_rfs_toml_after_the_environment() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let repo = Repo::new();
    repo.write("rfs.toml", "image = \"rfs-no-such-image:toml\"\n");
    repo.commit("an image");
    // Without RFS_DOCKER_IMAGE the file's image is the one asked for.
    let (path, out_dir) = rfs.prepare("step(\"x\", \"true\");");
    let out = rfs
        .cmd(repo.path())
        .env_remove("RFS_DOCKER_IMAGE")
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(3);
    assert!(
        out.stderr.contains("rfs-no-such-image:toml"),
        "{}",
        out.stderr
    );
    // RFS_DOCKER_IMAGE (the test image) beats it.
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", Some("docker"), &[]);
    out.assert_code(0);
    rfs.assert_no_leftovers();
}

/// `rfs.toml`'s `secrets` names what the proofs expect; the person hands
/// it over with `--secret NAME` (their environment's value), and it
/// reaches the script as `arg(NAME)`, redacted everywhere whatever its
/// name.
#[test]
fn rfs_toml_secrets_are_passed_by_secret_flag_and_redacted() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "secrets = [\"DEPLOY_PASS_PHRASE\"]\n");
    repo.commit("settings");
    let script = r#"step("use", "echo value=$V", #{ env: #{ V: arg("DEPLOY_PASS_PHRASE") } });"#;
    let (path, out_dir) = rfs.prepare(script);
    let out = rfs
        .cmd(repo.path())
        .env("DEPLOY_PASS_PHRASE", "correct-horse-battery")
        .arg("run")
        .args(["--secret", "DEPLOY_PASS_PHRASE"])
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(0);
    let logs: String = std::fs::read_dir(out.out_dir.join("steps"))
        .unwrap()
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
        .collect();
    let log = logs;
    assert!(log.contains("value=[REDACTED]"), "{log}");
    let journal = std::fs::read_to_string(out.out_dir.join("journal.jsonl")).unwrap();
    assert!(!journal.contains("correct-horse-battery"), "{journal}");
    assert!(
        !out.stdout.contains("correct-horse-battery"),
        "{}",
        out.stdout
    );
}

/// `[limits]` in rfs.toml is the repository's default for its sandboxes;
/// a script may ask for less, or for more up to the person's ceiling
/// (rfs.toml is the repository's word, not the person's).
#[test]
fn rfs_toml_limits_are_the_repositorys_default_and_a_script_may_ask_up_to_the_ceiling() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "rfs.toml",
        "[limits]\nmemory = \"64M\"\npids = 32\ndisk = \"64M\"\n",
    );
    repo.commit("limits");
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", None, &[]);
    out.assert_code(0);
    assert_eq!(
        out.limit_in_force("memory"),
        Some((64 << 20, "rfs.toml".into()))
    );
    assert_eq!(out.limit_in_force("pids"), Some((32, "rfs.toml".into())));
    assert_eq!(
        out.limit_in_force("disk"),
        Some((64 << 20, "rfs.toml".into()))
    );
    assert!(
        out.evidence().contains("pids 32 (rfs.toml)"),
        "{}",
        out.evidence()
    );
    // The script lowers one and raises another, within rfs's default cap.
    let out = run_in(
        &repo,
        &rfs,
        "sandbox(#{ pids: 16, memory: \"128M\" });\nstep(\"x\", \"true\");",
        None,
        &[],
    );
    out.assert_code(0);
    let script = "the script's sandbox() option".to_owned();
    assert_eq!(out.limit_in_force("pids"), Some((16, script.clone())));
    assert_eq!(out.limit_in_force("memory"), Some((128 << 20, script)));
    assert_eq!(
        out.limit_in_force("disk"),
        Some((64 << 20, "rfs.toml".into()))
    );
    rfs.assert_no_leftovers();
}

/// rfs.toml cannot set a limit above the person's ceiling (rfs's default
/// caps, or a flag's): refused before anything runs, naming the file and
/// the flag that would allow it.
#[test]
fn rfs_toml_limits_cannot_exceed_the_persons_ceiling() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "[limits]\npids = 100000\n");
    repo.commit("a pids cap above rfs's default");
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", None, &[]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("rfs.toml: [limits] pids: 100000 asked by rfs.toml exceeds this run's ceiling of 4096 (rfs's default); pass --max-pids 100000 to allow it"),
        "{}",
        out.stderr
    );
    assert!(!out.out_dir.join("journal.jsonl").exists());
    let out = run_in(
        &repo,
        &rfs,
        "step(\"x\", \"true\");",
        None,
        &["--max-pids", "100000"],
    );
    out.assert_code(0);
    assert_eq!(
        out.limit_in_force("pids"),
        Some((100000, "rfs.toml".into()))
    );
    // Under a flag's ceiling, and its environment variable's.
    repo.write("rfs.toml", "[limits]\nmemory = \"1G\"\n");
    repo.commit("a memory limit");
    let out = run_in(
        &repo,
        &rfs,
        "step(\"x\", \"true\");",
        None,
        &["--max-memory", "256M"],
    );
    out.assert_code(2);
    assert!(
        out.stderr.contains("exceeds this run's ceiling of 256 MiB (--max-memory flag); pass --max-memory 1G to allow it"),
        "{}",
        out.stderr
    );
    let (path, out_dir) = rfs.prepare("step(\"x\", \"true\");");
    let out = rfs
        .cmd(repo.path())
        .env("RFS_MAX_MEMORY", "512M")
        .arg("run")
        .arg(&path)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .unwrap();
    let out = finish(out, out_dir);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("(RFS_MAX_MEMORY environment variable); pass --max-memory 1G"),
        "{}",
        out.stderr
    );
    // A malformed value names the file.
    repo.write("rfs.toml", "[limits]\nmemory = \"lots\"\n");
    repo.commit("a bad size");
    let out = run_in(&repo, &rfs, "step(\"x\", \"true\");", None, &[]);
    out.assert_code(2);
    assert!(
        out.stderr
            .contains("rfs.toml: [limits] `memory`: `lots` is not a size"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

/// Issue #43: `rfs.toml`'s `[limits] log_bytes` may lower the run's log
/// bound, never raise it past the person's (`--max-log-bytes`, else
/// `RFS_MAX_LOG_BYTES`, else 256 MiB): above it the run is refused
/// before anything runs, naming the flag; under it the logs are cut at
/// the file's value, said as set by `rfs.toml`.
#[test]
fn rfs_toml_may_lower_the_log_bound_never_raise_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "[limits]\nlog_bytes = \"1G\"\n");
    repo.commit("a log bound above rfs's default");
    let script = "step(\"loud\", \"head -c 3000000 /dev/zero | tr '\\\\0' x\");";
    let out = run_in(&repo, &rfs, script, None, &[]);
    out.assert_code(2);
    assert!(
        out.stderr.contains("refused: rfs.toml: [limits] log_bytes: 1 GiB exceeds this run's log bound of 256 MiB (rfs's default); pass --max-log-bytes 1G to allow it"),
        "{}",
        out.stderr
    );
    assert!(!out.out_dir.join("journal.jsonl").exists());
    let out = run_in(&repo, &rfs, script, None, &["--max-log-bytes", "2G"]);
    out.assert_code(0);
    assert!(out.entries("step.attempt")[0].get("output_cut").is_none());
    repo.write("rfs.toml", "[limits]\nlog_bytes = \"1M\"\n");
    repo.commit("a log bound under rfs's default");
    let out = run_in(&repo, &rfs, script, None, &[]);
    out.assert_code(0);
    let cut = &out.entries("step.attempt")[0]["output_cut"];
    assert_eq!(cut["bound_bytes"], 1u64 << 20, "{cut}");
    assert_eq!(cut["set_by"], "rfs.toml", "{cut}");
    let kept = std::fs::metadata(out.out_dir.join("steps/001-loud.stdout.log"))
        .unwrap()
        .len();
    assert_eq!(kept, 1 << 20);
    rfs.assert_no_leftovers();
}
