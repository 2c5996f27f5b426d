//! The trust model (book: Trust model): what the person running rfs says
//! (flags, environment) sets the boundary; what a repository commits
//! (`rfs.toml`, proofs, modules) and what a script asks for can only
//! narrow it. Each test is named after the way a stranger's code reached
//! past that line before.

mod common;
use common::*;

use std::path::Path;

/// A repository other than the one rfs runs in, holding a file the
/// script must not be able to ship.
fn other_repository() -> Repo {
    let other = Repo::new();
    other.write("private.txt", "other-repository-private-content\n");
    other.commit("private");
    other
}

provider_tests! {
    // The person running rfs could not take a stranger's script offline:
    // only the script could ask for `network: false`. `--network off` is
    // the run's network when the script names none, and a script asking
    // for more is refused before anything runs, naming the flag.
    fn the_persons_network_off_holds_and_a_script_cannot_widen_it(rfs: &Rfs) {
        let repo = Repo::new();
        let ifaces = "let r = step(\"ifaces\", \"tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\\\n' ','\");\nprint(`interfaces: ${r.stdout}`);";
        let quiet = rfs.run_with(repo.path(), ifaces, &["--network", "off"]);
        quiet.assert_code(0);
        let placed = &quiet.entries("placement")[0]["isolation"]["network_policy"];
        assert_eq!(placed["policy"], "off", "{placed}");
        assert_eq!(quiet.entries("step.end")[0]["exit"], 0);
        assert!(quiet.stdout.lines().any(|l| l == "interfaces: lo,"), "{}", quiet.stdout);
        for (asked, name) in [("true", "`public`"), ("#{ allow: [\"example.org\"] }", "allow [example.org]")] {
            let out = rfs.run_with(
                repo.path(),
                &format!("sandbox(#{{ network: {asked} }});\nstep(\"x\", \"echo ran\");"),
                &["--network", "off"],
            );
            out.assert_code(3);
            assert!(
                out.stderr.contains(&format!("network {name} asked by the script's sandbox() option would widen the boundary set by --network flag (network `off`)"))
                    && out.stderr.contains("pass `--network "),
                "{}",
                out.stderr
            );
            assert!(out.entries("placement").is_empty(), "a sandbox was placed");
            assert!(out.entries("step.start").is_empty());
        }
        // The same ceiling from the environment: wider is refused naming
        // it, narrower is fine.
        let env = [("RFS_NETWORK", "off")];
        let out = rfs.run_with_env(repo.path(), "sandbox(#{ network: true });\nstep(\"x\", \"echo ran\");", &[], &env);
        out.assert_code(3);
        assert!(out.stderr.contains("set by RFS_NETWORK environment variable (network `off`)"), "{}", out.stderr);
        assert!(out.entries("step.start").is_empty());
        let out = rfs.run_with_env(repo.path(), "sandbox(#{ network: false });\nstep(\"x\", \"true\");", &[], &env);
        out.assert_code(0);
        rfs.assert_no_leftovers();
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn a_script_cannot_turn_isolation_off(rfs: &Rfs) {
        let repo = Repo::new();
        let marker = repo.path().join("host-marker");
        let out = rfs.run(
            repo.path(),
            &format!(
                "sandbox(#{{ isolation: \"none\" }});\nstep(\"x\", \"touch {}\");",
                marker.display()
            ),
        );
        out.assert_code(3);
        assert!(
            out.stderr.contains("the script's sandbox() option")
                && out.stderr.contains("pass `--isolation none`"),
            "{}",
            out.stderr
        );
        assert!(out.entries("placement").is_empty(), "a sandbox was placed");
        assert!(out.entries("step.start").is_empty());
        assert!(!marker.exists());
        rfs.assert_no_leftovers();
    }

    fn a_script_cannot_ship_another_repository(rfs: &Rfs) {
        let repo = Repo::new();
        let other = other_repository();
        let script = format!(
            "sync_source(#{{ repo: {:?} }});\nstep(\"x\", \"cat private.txt\");",
            other.path().display().to_string()
        );
        let out = rfs.run(repo.path(), &script);
        out.assert_code(3);
        assert!(out.stderr.contains("pass --allow-repo"), "{}", out.stderr);
        assert!(out.entries("step.start").is_empty());
        assert!(out.entries("source.resolved").is_empty());
        assert!(!std::fs::read_to_string(out.out_dir.join("journal.jsonl"))
            .unwrap()
            .contains("other-repository-private-content"));
        rfs.assert_no_leftovers();
        // The person running rfs may allow it.
        let other_path = other.path().display().to_string();
        let out = rfs.run_with(repo.path(), &script, &["--allow-repo", &other_path]);
        out.assert_code(0);
        let logs = step_logs(&out.out_dir);
        assert!(logs.contains("other-repository-private-content"), "{logs}");
        rfs.assert_no_leftovers();
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn a_git_file_pointing_elsewhere_cannot_ship_another_repository(rfs: &Rfs) {
        let repo = Repo::new();
        let other = other_repository();
        // A folder whose `.git` file names another repository's git dir.
        repo.write(
            "decoy/.git",
            &format!("gitdir: {}\n", other.path().join(".git").display()),
        );
        let out = rfs.run(
            repo.path(),
            "sync_source(#{ repo: \"decoy\" });\nstep(\"x\", \"cat private.txt\");",
        );
        out.assert_code(3);
        assert!(out.stderr.contains("pass --allow-repo decoy"), "{}", out.stderr);
        assert!(out.entries("step.start").is_empty());
        rfs.assert_no_leftovers();
    }

    #[not_under_gvisor = "refused before any sandbox exists: nothing of it runs under gVisor"]
    fn a_tree_too_deep_to_walk_is_refused_before_a_sandbox_exists(rfs: &Rfs) {
        let repo = Repo::new();
        let base = repo.head();
        repo.write(&format!("{}f.txt", "d/".repeat(500)), "deep\n");
        let deep = repo.commit("deep");
        // Checked out, libgit2's status scan stops at 100 levels; the
        // commit is shipped by its id from a shallow checkout.
        repo.git(&["reset", "-q", "--hard", &base]);
        let out = rfs.run(
            repo.path(),
            &format!("sync_source(#{{ rev: \"{deep}\" }});\nstep(\"x\", \"true\");"),
        );
        out.assert_code(3);
        assert!(out.stderr.contains("levels deep"), "{}", out.stderr);
        assert!(out.entries("placement").is_empty(), "a sandbox was placed");
        assert_eq!(out.kinds().last().map(String::as_str), Some("run.end"));
        rfs.assert_no_leftovers();
    }

    fn a_tree_at_the_depth_limit_ships(rfs: &Rfs) {
        let repo = Repo::new();
        let base = repo.head();
        // 100: rfs's MAX_TREE_DEPTH.
        let deep = format!("{}f.txt", "d/".repeat(100));
        repo.write(&deep, "deep-content\n");
        let commit = repo.commit("deep");
        repo.git(&["reset", "-q", "--hard", &base]);
        let out = rfs.run(
            repo.path(),
            &format!("sync_source(#{{ rev: \"{commit}\" }});\nstep(\"x\", \"cat {deep}\");"),
        );
        out.assert_code(0);
        assert!(step_logs(&out.out_dir).contains("deep-content"));
        rfs.assert_no_leftovers();
    }

    // A toolchain the host has was unreachable from a sandbox, and the
    // only way to widen what a sandbox sees of this machine must be the
    // person's: `--mount-ro` shows a host folder read-only and journals
    // its digest; a script or rfs.toml asking is refused naming the flag;
    // Daytona, which cannot see this machine, refuses before anything runs.
    fn a_host_folder_only_the_persons_flag_mounts_read_only_with_its_digest(rfs: &Rfs) {
        let repo = Repo::new();
        let host = tempfile::tempdir().unwrap();
        std::fs::write(host.path().join("hello.txt"), "host-folder-content\n").unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(host.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let flag = format!("{}:/toolchains/probe", host.path().display());
        let look = "step(\"look\", \"cat /toolchains/probe/hello.txt; touch /toolchains/probe/new 2>/dev/null && echo WROTE || echo write-refused; grep ' /toolchains/probe ' /proc/self/mounts || true\");";
        let out = rfs.run_with(repo.path(), look, &["--mount-ro", &flag]);
        if rfs.prov == Prov::Daytona {
            out.assert_code(3);
            assert!(out.stderr.contains("cannot mount a host folder") && out.stderr.contains("Daytona"), "{}", out.stderr);
            assert!(out.entries("placement").is_empty(), "a sandbox was placed");
            assert!(out.entries("step.start").is_empty());
            rfs.assert_no_leftovers();
            return;
        }
        out.assert_code(0);
        let logs = step_logs(&out.out_dir);
        assert!(logs.contains("host-folder-content") && logs.contains("write-refused"), "{logs}");
        assert!(!logs.contains("WROTE") && !host.path().join("new").exists(), "{logs}");
        if rfs.prov == Prov::Local && rfs.isolation.is_none() {
            let mount = logs.lines().find(|l| l.contains(" /toolchains/probe ")).expect("its mount");
            assert!(mount.contains("ro,") && mount.contains("nosuid") && mount.contains("nodev"), "{mount}");
        }
        let m = &out.entries("host.mount")[0];
        let canonical = std::fs::canonicalize(host.path()).unwrap();
        assert_eq!(m["host_dir"], canonical.display().to_string(), "{m}");
        assert_eq!((m["path"].as_str(), m["files"].as_u64(), m["by"].as_str()), (Some("/toolchains/probe"), Some(1), Some("--mount-ro flag")), "{m}");
        let sha = m["sha256"].as_str().unwrap();
        assert_eq!(sha.len(), 64);
        let ev = out.evidence();
        assert!(ev.contains("## Host folders") && ev.contains(sha), "{ev}");
        let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
        assert!(html.contains("host folder") && html.contains(sha));
        let (ok, said) = rfs_verify(rfs, repo.path(), &out.out_dir);
        assert!(ok, "{said}");
        // A script asking is refused naming the flag, before any step.
        let asked = format!("sandbox(#{{ mount_ro: \"{flag}\" }});\n{look}");
        let out = rfs.run(repo.path(), &asked);
        out.assert_code(3);
        assert!(out.stderr.contains("pass --mount-ro HOST_DIR:SANDBOX_PATH"), "{}", out.stderr);
        assert!(out.entries("step.start").is_empty() && out.entries("host.mount").is_empty());
        // A path that would shadow the sandbox's own /etc is refused.
        let out = rfs.run_with(repo.path(), look, &["--mount-ro", &format!("{}:/etc/x", host.path().display())]);
        out.assert_code(2);
        assert!(out.stderr.contains("would shadow /etc"), "{}", out.stderr);
        // So is a repository's rfs.toml asking.
        repo.write("rfs.toml", &format!("mount_ro = [\"{flag}\"]\n"));
        repo.commit("asks for a host folder");
        let out = rfs.run(repo.path(), look);
        out.assert_code(2);
        assert!(out.stderr.contains("rfs.toml") && out.stderr.contains("pass --mount-ro"), "{}", out.stderr);
        rfs.assert_no_leftovers();
    }
}

fn step_logs(out_dir: &Path) -> String {
    std::fs::read_dir(out_dir.join("steps"))
        .map(|d| {
            d.flatten()
                .map(|e| std::fs::read_to_string(e.path()).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

/// `rfs` in `dir` with `args` and extra environment.
fn rfs_in(rfs: &Rfs, dir: &Path, args: &[&str], env: &[(&str, &str)]) -> RunOut {
    let out_dir = rfs.prepare("").1;
    let out = rfs
        .cmd(dir)
        .envs(env.iter().copied())
        .args(args)
        .output()
        .unwrap();
    finish(out, out_dir)
}

#[test]
fn rfs_toml_cannot_turn_isolation_off() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "isolation = \"none\"\n");
    repo.commit("widen");
    let out = rfs.run(repo.path(), "step(\"x\", \"true\");");
    out.assert_code(2);
    assert!(
        out.stderr.contains("rfs.toml") && out.stderr.contains("pass `--isolation none`"),
        "{}",
        out.stderr
    );
    assert!(!out.out_dir.join("journal.jsonl").exists());
    // The person running rfs may: and the console says what it means.
    let out = rfs.run_with(
        repo.path(),
        "step(\"x\", \"true\");",
        &["--isolation", "none"],
    );
    out.assert_code(0);
    assert!(
        out.stderr.contains("isolation `none`") && out.stderr.contains("steps run on the host"),
        "isolation none is not said on the console:\n{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

#[test]
fn rfs_toml_may_narrow_isolation() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "isolation = \"namespaces\"\n");
    repo.commit("narrow");
    let out = rfs.run(repo.path(), "step(\"x\", \"true\");");
    out.assert_code(0);
    let p = &out.entries("placement")[0];
    assert_eq!(p["isolation"]["requested_by"], "rfs.toml", "{p}");
    // A script under it cannot widen again.
    let out = rfs.run(repo.path(), "sandbox(#{ isolation: \"auto\" });");
    out.assert_code(3);
    assert!(
        out.stderr.contains("pass `--isolation auto`"),
        "{}",
        out.stderr
    );
    rfs.assert_no_leftovers();
}

/// `secrets = ["GITHUB_TOKEN"]` in a committed rfs.toml handed the
/// repository's script the host's token; a missing name answered "does
/// this variable exist" with its own exit.
#[test]
fn rfs_toml_cannot_read_host_variables() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("rfs.toml", "secrets = [\"RFS_TEST_HOST_TOKEN\"]\n");
    repo.commit("ask");
    let script = "step(\"x\", \"echo token=$T\", #{ env: #{ T: arg(\"RFS_TEST_HOST_TOKEN\") } });";
    let (path, _) = rfs.prepare(script);
    let path = path.display().to_string();
    let with = rfs_in(
        &rfs,
        repo.path(),
        &["run", &path],
        &[("RFS_TEST_HOST_TOKEN", "host-token-value-42")],
    );
    let without = rfs_in(&rfs, repo.path(), &["run", &path], &[]);
    with.assert_code(2);
    without.assert_code(2);
    assert!(
        with.stderr.contains("pass --secret RFS_TEST_HOST_TOKEN"),
        "{}",
        with.stderr
    );
    assert_eq!(
        with.stderr, without.stderr,
        "the refusal tells whether the variable exists"
    );
    // The person hands it over.
    let out = rfs_in(
        &rfs,
        repo.path(),
        &["run", &path, "--secret", "RFS_TEST_HOST_TOKEN"],
        &[("RFS_TEST_HOST_TOKEN", "host-token-value-42")],
    );
    out.assert_code(0);
    rfs.assert_no_leftovers();
}

/// A committed `proofs/env.rhai -> /proc/self/environ` made `rfs test`,
/// `rfs run` and `rfs check` print rfs's environment in the compile error.
#[test]
fn committed_symlinked_proofs_cannot_read_host_files() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/ok.rhai", "print(1);\n");
    repo.symlink("proofs/env.rhai", "/proc/self/environ");
    repo.commit("proofs");
    let canary = [("RFS_TEST_CANARY", "canary-env-value-77")];
    for args in [
        &["test"][..],
        &["run", "proofs/env.rhai"],
        &["check", "proofs/env.rhai"],
    ] {
        let out = rfs_in(&rfs, repo.path(), args, &canary);
        out.assert_code(2);
        assert!(out.stderr.contains("symlink"), "{args:?}: {}", out.stderr);
        assert!(out.stderr.contains("env.rhai"), "{args:?}: {}", out.stderr);
        for text in [&out.stdout, &out.stderr] {
            assert!(!text.contains("canary-env-value-77"), "{args:?}: {text}");
        }
    }
    rfs.assert_no_leftovers();
}

#[test]
fn a_symlinked_rfs_toml_cannot_read_host_files() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.symlink("rfs.toml", "/proc/self/environ");
    repo.commit("link");
    let out = rfs_in(
        &rfs,
        repo.path(),
        &["run", &rfs.prepare("print(1);").0.display().to_string()],
        &[("RFS_TEST_CANARY", "canary-env-value-78")],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("symlink"), "{}", out.stderr);
    assert!(!out.stderr.contains("canary-env-value-78"));
}

/// `proofs = "/abs"` or `"../x"` walked host folders and ran what it found.
#[test]
fn rfs_toml_proofs_outside_the_repository_are_refused() {
    let rfs = Rfs::new(Prov::Local);
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(
        outside.path().join("host.rhai"),
        "print(\"ran-outside\");\n",
    )
    .unwrap();
    for (toml, says) in [
        (
            format!("proofs = {:?}\n", outside.path().display().to_string()),
            "is absolute",
        ),
        ("proofs = \"../x\"\n".to_owned(), "leaves the folder"),
        ("proofs = \"link\"\n".to_owned(), "is a symlink"),
    ] {
        let repo = Repo::new();
        repo.write("rfs.toml", &toml);
        repo.symlink("link", &outside.path().display().to_string());
        repo.commit("outside");
        let out = rfs_in(&rfs, repo.path(), &["test"], &[]);
        out.assert_code(2);
        assert!(out.stderr.contains(says), "{toml}: {}", out.stderr);
        assert!(!out.stdout.contains("ran-outside"), "{}", out.stdout);
    }
    rfs.assert_no_leftovers();
}

/// `--jobs 1000` ran the machine into the OOM killer; `jobs = 5000` in
/// rfs.toml the same; `jobs = 0` was reported as a `--jobs` error.
#[test]
fn jobs_without_a_bound_are_refused() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/a.rhai", "print(1);\n");
    repo.commit("proofs");
    let out = rfs_in(&rfs, repo.path(), &["test", "--jobs", "1000"], &[]);
    out.assert_code(2);
    assert!(out.stderr.contains("at most"), "{}", out.stderr);
    repo.write("b.txt", "b\n");
    repo.commit("second");
    let out = rfs_in(
        &rfs,
        repo.path(),
        &[
            "bisect",
            "HEAD~1",
            "HEAD",
            "proofs/a.rhai",
            "--jobs",
            "1000",
        ],
        &[],
    );
    out.assert_code(2);
    assert!(out.stderr.contains("at most"), "{}", out.stderr);
    for (toml, says) in [
        ("jobs = 5000\n", "rfs.toml's `jobs` asks for 5000"),
        ("jobs = 0\n", "rfs.toml's `jobs` must be at least 1"),
    ] {
        repo.write("rfs.toml", toml);
        repo.commit("jobs");
        let out = rfs_in(&rfs, repo.path(), &["test"], &[]);
        out.assert_code(2);
        assert!(out.stderr.contains(says), "{toml}: {}", out.stderr);
    }
    rfs.assert_no_leftovers();
}

/// `rfs test` and `rfs repl` take the person's ceilings as `rfs run`
/// does (a larger ask is refused naming the flag), and the repository's
/// rfs.toml `[limits]` and `isolation` as `rfs run` does.
#[test]
fn rfs_test_and_repl_honour_the_ceilings_and_rfs_toml() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "proofs/big.rhai",
        "sandbox(#{ memory: \"1G\" });\nstep(\"never\", \"echo never-ran\");\n",
    );
    repo.commit("a proof asking for 1G");
    let says = "memory: 1 GiB asked by the script's sandbox() option exceeds this run's ceiling of 64 MiB (--max-memory flag); pass --max-memory 1G to allow it";
    let out = rfs_in(&rfs, repo.path(), &["test", "--max-memory", "64M"], &[]);
    out.assert_code(3);
    assert!(
        out.stdout.contains(says) || out.stderr.contains(says),
        "{}{}",
        out.stdout,
        out.stderr
    );
    assert!(!out.stdout.contains("never-ran"), "{}", out.stdout);
    let input = b"sandbox(#{ memory: \"1G\" });\n";
    // Within rfs's own ceiling the same ask places a sandbox with it.
    let out = rfs.repl(
        repo.path(),
        b"sandbox(#{ memory: \"1G\" });\nstep(\"x\", \"true\");\n",
        &[],
    );
    out.assert_code(0);
    assert!(!out.stderr.contains("ceiling"), "{}", out.stderr);
    assert_eq!(
        out.limit_in_force("memory").map(|(v, _)| v),
        Some(1 << 30),
        "the ask within rfs's ceiling is what the sandbox got"
    );
    let out = rfs.repl(repo.path(), input, &["--max-memory", "64M"]);
    assert!(out.stderr.contains(says), "{}", out.stderr);
    assert!(out.entries("placement").is_empty());
    // The repository's defaults reach the repl's sandbox.
    repo.write("rfs.toml", "[limits]\npids = 24\n");
    repo.commit("limits");
    let out = rfs.repl(repo.path(), b"step(\"x\", \"true\");\n", &[]);
    out.assert_code(0);
    assert_eq!(out.limit_in_force("pids"), Some((24, "rfs.toml".into())));
    // rfs.toml cannot turn isolation off for either.
    repo.write("rfs.toml", "isolation = \"none\"\n");
    repo.commit("widen");
    for out in [
        rfs_in(&rfs, repo.path(), &["test"], &[]),
        rfs.repl(repo.path(), b"step(\"x\", \"true\");\n", &[]),
    ] {
        out.assert_code(2);
        assert!(
            out.stderr.contains("pass `--isolation none`"),
            "{}",
            out.stderr
        );
    }
    rfs.assert_no_leftovers();
}

/// A bundle is not the person: its journal records the ceilings its run
/// had (`--max-pids 5000`), and a replay holds its script to the
/// replaying person's ceilings, never the original's.
#[test]
fn a_replayed_bundle_cannot_widen_the_persons_ceiling() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let original = rfs.run_with(
        repo.path(),
        "sandbox(#{ pids: 5000 });\nstep(\"x\", \"true\");",
        &["--max-pids", "5000"],
    );
    original.assert_code(0);
    let ceilings = original.entries("placement")[0]["isolation"]["limits"]["ceilings"].to_string();
    assert!(ceilings.contains("--max-pids flag"), "{ceilings}");
    let replay = |args: &[&str]| {
        let out_dir = rfs.state.path().join("out").join(uuid_like());
        let o = rfs
            .cmd(repo.path())
            .arg("replay")
            .arg(&original.out_dir)
            .arg("--out")
            .arg(&out_dir)
            .args(args)
            .output()
            .unwrap();
        finish(o, out_dir)
    };
    let out = replay(&[]);
    assert_ne!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("pids: 5000 asked by the script's sandbox() option exceeds this run's ceiling of 4096 (rfs's default); pass --max-pids 5000 to allow it"),
        "{}",
        out.stderr
    );
    assert!(out.entries("step.start").is_empty());
    let out = replay(&["--max-pids", "5000"]);
    out.assert_code(0);
    rfs.assert_no_leftovers();
}

/// An allow list the person set is the most a script may ask: a subset
/// of its entries runs, an entry beyond it is refused naming the flag
/// (and its value that would allow it), as is the public internet.
#[test]
fn a_script_may_narrow_the_persons_allow_list_but_not_add_to_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let flag = ["--network", "example.org,10.1.2.0/24:443"];
    let ok = rfs.run_with(
        repo.path(),
        "sandbox(#{ network: #{ allow: [\"10.1.2.0/24:443\"] } });\nstep(\"x\", \"true\");",
        &flag,
    );
    ok.assert_code(0);
    let placed = &ok.entries("placement")[0]["isolation"]["network_policy"];
    assert_eq!(placed["policy"], "allow", "{placed}");
    assert_eq!(
        placed["allow"],
        serde_json::json!(["10.1.2.0/24:443"]),
        "the script's list, not the person's: {placed}"
    );
    let more = rfs.run_with(
        repo.path(),
        "sandbox(#{ network: #{ allow: [\"example.org\", \"pypi.org\"] } });\nstep(\"x\", \"echo ran\");",
        &flag,
    );
    more.assert_code(3);
    assert!(
        more.stderr.contains("network allow [example.org, pypi.org] asked by the script's sandbox() option would widen the boundary set by --network flag (network allow [example.org, 10.1.2.0/24:443])")
            && more.stderr.contains("pass `--network example.org,pypi.org`"),
        "{}",
        more.stderr
    );
    assert!(more.entries("step.start").is_empty());
    let default = rfs.run_with(repo.path(), "step(\"x\", \"true\");", &flag);
    default.assert_code(0);
    assert_eq!(
        default.entries("placement")[0]["isolation"]["network_policy"]["policy"],
        "allow"
    );
    // Under `--network public` an allow list naming a private or
    // link-local address reaches past the public internet: refused.
    for beyond in ["10.0.0.0/8", "169.254.169.254"] {
        let out = rfs.run_with(
            repo.path(),
            &format!("sandbox(#{{ network: #{{ allow: [\"{beyond}\"] }} }});\nstep(\"x\", \"echo ran\");"),
            &["--network", "public"],
        );
        out.assert_code(3);
        assert!(
            out.stderr
                .contains("would widen the boundary set by --network flag (network `public`)"),
            "{beyond}: {}",
            out.stderr
        );
        assert!(out.entries("step.start").is_empty());
    }
    let bad = rfs.run_with(
        repo.path(),
        "step(\"x\", \"true\");",
        &["--network", "exa mple"],
    );
    bad.assert_code(2);
    assert!(
        bad.stderr.contains("--network flag: network allow entry"),
        "{}",
        bad.stderr
    );
    rfs.assert_no_leftovers();
}
