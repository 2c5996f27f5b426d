//! One home (#46 item 1): a setup and every proof forked from it see the
//! sandbox's home at the same path, so what the setup wrote into its
//! files (a virtualenv's shebangs, an editable install's `.pth`, a tool
//! that names its own folder) still works in every fork; and on `local`
//! that path is `/home/rfs`, never a host path of rfs's state.

use super::*;

/// The setup: a tool in the home, and a second tool that calls it by the
/// absolute path the setup saw (as a virtualenv's scripts do).
const SETUP: &str = r#"
sync_source();
step("tools", "mkdir -p $HOME/bin && printf '#!/bin/sh\necho the-setups-tool-ran\n' > $HOME/bin/tool && chmod +x $HOME/bin/tool && printf '#!/bin/sh\nexec %s/bin/tool\n' \"$HOME\" > $HOME/bin/by-setup-path && chmod +x $HOME/bin/by-setup-path && echo \"$HOME\" > $HOME/.setup-home");
"#;

/// A proof: the setup's tool by the setup's path, the same `$HOME`.
const PROOF: &str = r#"
sync_source();
let r = step("use", "$HOME/bin/by-setup-path && test \"$(cat $HOME/.setup-home)\" = \"$HOME\" && echo \"home=$HOME pwd=$(pwd)\" && env && cat /proc/self/mountinfo");
assert(r.stdout.contains("the-setups-tool-ran"), "the setup's tool: " + r.stdout);
"#;

/// What step `name` of a proof's bundle wrote on its standard output.
fn step_stdout(bundle: &Path, name: &str) -> String {
    let steps = bundle.join("steps");
    std::fs::read_dir(&steps)
        .unwrap()
        .flatten()
        .find(|e| {
            e.file_name()
                .to_string_lossy()
                .ends_with(&format!("-{name}.stdout.log"))
        })
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .unwrap_or_else(|| panic!("no {name} log in {}", steps.display()))
}

provider_tests! {
    fn a_setups_home_is_the_same_path_in_every_fork(rfs: &Rfs) {
        let repo = Repo::new();
        repo.write("proofs/_setup.rhai", SETUP);
        repo.write("proofs/a.rhai", PROOF);
        repo.write("proofs/b.rhai", PROOF);
        repo.commit("a setup that writes its home's path, two proofs");
        let s = rfs_test(rfs, repo.path(), &["--setup", "proofs/_setup.rhai", "--jobs", "2"]);
        assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
        for p in ["proofs/a.rhai", "proofs/b.rhai"] {
            let out = step_stdout(&s.bundle(p), "use");
            if rfs.prov == Prov::Local {
                assert!(
                    out.contains("home=/home/rfs pwd=/home/rfs/relayflows-source\n"),
                    "{p}: {out}"
                );
            }
            // No path of rfs's state (where local keeps its sandboxes and
            // checkpoints) reaches a step, in its environment, its folder
            // or its mount table (a fork's overlay names its layers by
            // descriptor).
            let state = rfs.state.path().display().to_string();
            assert!(!out.contains(&state), "{p} saw {state}: {out}");
            assert!(!out.contains("/sandboxes/"), "{p}: {out}");
        }
    }
}

/// A src-layout package, its tests' import, and the setup that makes a
/// virtualenv and installs the package editable into it (offline, from
/// the wheel folder committed beside it).
const PYPROJECT: &str = "[build-system]\nrequires = [\"setuptools>=70.1\"]\nbuild-backend = \"setuptools.build_meta\"\n\n[project]\nname = \"hello\"\nversion = \"0.1\"\n";
const PY_SETUP: &str = r#"
sync_source();
step("venv", "python3 -m venv $HOME/venv && $HOME/venv/bin/pip install --no-input --disable-pip-version-check --no-index --find-links wheels -e .");
"#;
const PY_PROOF: &str = r#"
sync_source();
let r = step("import", "$HOME/venv/bin/pip --version && $HOME/venv/bin/python -c 'import hello; print(hello.hi())'");
assert(r.stdout.contains("hi from src"), "the editable install: " + r.stdout);
"#;

/// Before the fix, every fork's `~/venv/bin/pip` failed with exit 127
/// (its shebang named the setup's home) and `hello` was not importable
/// (the `.pth` named the setup's synced tree).
fn a_setups_virtualenv_and_editable_install_work_in_every_fork(rfs: &Rfs) {
    let wheels = wheels().expect("checked by the test");
    let repo = Repo::new();
    repo.write("pyproject.toml", PYPROJECT);
    repo.write(
        "src/hello/__init__.py",
        "def hi():\n    return \"hi from src\"\n",
    );
    let mut found = vec![];
    for w in std::fs::read_dir(&wheels).unwrap().flatten() {
        let name = w.file_name().to_string_lossy().into_owned();
        // setuptools builds wheels itself since 70.1.
        if name.starts_with("setuptools-") {
            std::fs::create_dir_all(repo.path().join("wheels")).unwrap();
            std::fs::copy(w.path(), repo.path().join("wheels").join(&name)).unwrap();
            found.push(name);
        }
    }
    assert_eq!(
        found.len(),
        1,
        "setuptools in {}: {found:?}",
        wheels.display()
    );
    repo.write("proofs/_setup.rhai", PY_SETUP);
    repo.write("proofs/one.rhai", PY_PROOF);
    repo.write("proofs/two.rhai", PY_PROOF);
    repo.commit("a src-layout package, its wheels, a setup and two proofs");
    let s = rfs_test(
        rfs,
        repo.path(),
        &["--setup", "proofs/_setup.rhai", "--jobs", "2"],
    );
    assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
    for p in ["proofs/one.rhai", "proofs/two.rhai"] {
        assert!(
            step_stdout(&s.bundle(p), "import").contains("hi from src"),
            "{p}"
        );
    }
    rfs.assert_no_leftovers();
}

/// The wheel folder `scripts/test.sh` fills (`None`, said once, where a
/// plain `cargo test` runs without it).
fn wheels() -> Option<PathBuf> {
    let w = std::env::var_os("RFS_TEST_WHEELS").map(PathBuf::from);
    if w.is_none() {
        assert!(
            !std::env::var("RFS_REQUIRE_WHEELS").is_ok_and(|v| v == "1"),
            "RFS_REQUIRE_WHEELS=1 but RFS_TEST_WHEELS is not set"
        );
        eprintln!("skipped: no RFS_TEST_WHEELS (setuptools' wheel, fetched by scripts/test.sh)");
    }
    w
}

#[test]
fn a_setups_virtualenv_and_editable_install_work_in_every_fork_local() {
    if wheels().is_some() {
        a_setups_virtualenv_and_editable_install_work_in_every_fork(&Rfs::new(Prov::Local));
    }
}

#[test]
fn a_setups_virtualenv_and_editable_install_work_in_every_fork_gvisor() {
    if wheels().is_some() {
        under_gvisor(a_setups_virtualenv_and_editable_install_work_in_every_fork);
    }
}
