//! Real programs end to end (#36): pip installing from a local wheel
//! index served by a spawned Python `http.server` (with PyPI's cache headers), its downloads kept
//! in a cache between runs, and pytest's own `--junitxml` collected into
//! the suite's JUnit. The wheels (pytest and what it needs) are fetched
//! once by `scripts/test.sh` into `RFS_TEST_WHEELS` and committed into the
//! test's repository: nothing in the sandbox reaches past its loopback.

use super::*;

const LIB: &str = "def add(a, b):\n    return a + b\n";
const TESTS: &str = "from calc import add\n\n\ndef test_adds():\n    assert add(2, 3) == 5\n\n\ndef test_adds_negatives():\n    assert add(-2, -3) == -5\n\n\ndef test_fails_on_purpose_not():\n    assert add(0, 0) == 0\n";

/// A local wheel index as PyPI serves one: its files cacheable.
const SERVE: &str = "import functools, http.server\n\n\nclass Index(http.server.SimpleHTTPRequestHandler):\n    def end_headers(self):\n        self.send_header(\"Cache-Control\", \"max-age=86400\")\n        super().end_headers()\n\n\nhttp.server.ThreadingHTTPServer(\n    (\"127.0.0.1\", 8765), functools.partial(Index, directory=\"wheels\")\n).serve_forever()\n";

/// The proof: serve the wheels, pip-install pytest from them into
/// `.deps` (downloads cached in `~/.cache/pip`: pip caches only what an
/// HTTPS or trusted host served), run pytest with its
/// JUnit report, collect it.
const PROOF: &str = r#"
sandbox(#{ caches: #{ pip: "~/.cache/pip" } });
sync_source();
let index = spawn("index", "python3 serve_wheels.py");
index.wait_for(#{ port: 8765, timeout: 30 });
let pip = step("pip", "python3 -m pip install --no-input --disable-pip-version-check --target .deps --no-index --trusted-host 127.0.0.1 --find-links http://127.0.0.1:8765/ pytest");
print(`pip: ${pip.stdout}`);
index.stop();
step("pytest", "mkdir -p reports && PYTHONPATH=.deps:. python3 -m pytest -q -p no:cacheprovider --junitxml=reports/junit.xml tests");
collect("reports/junit.xml", #{ junit: true });
"#;

#[test]
fn pip_from_a_local_wheel_index_fills_a_cache_and_pytests_own_junitxml_reaches_the_suite() {
    let Some(wheels) = std::env::var_os("RFS_TEST_WHEELS").map(PathBuf::from) else {
        assert!(
            !std::env::var("RFS_REQUIRE_WHEELS").is_ok_and(|v| v == "1"),
            "RFS_REQUIRE_WHEELS=1 but RFS_TEST_WHEELS is not set"
        );
        eprintln!("skipped: no RFS_TEST_WHEELS (pytest's wheels, fetched by scripts/test.sh)");
        return;
    };
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("calc.py", LIB);
    repo.write("serve_wheels.py", SERVE);
    repo.write("tests/test_calc.py", TESTS);
    repo.write(".gitignore", ".deps/\nreports/\n__pycache__/\n");
    for w in std::fs::read_dir(&wheels).unwrap().flatten() {
        let name = w.file_name().to_string_lossy().into_owned();
        if name.ends_with(".whl") {
            std::fs::create_dir_all(repo.path().join("wheels")).unwrap();
            std::fs::copy(w.path(), repo.path().join("wheels").join(&name)).unwrap();
        }
    }
    repo.write("proofs/unit.rhai", PROOF);
    repo.commit("calc, its tests, the wheels and a proof");
    let run = |n: u32| {
        let junit = rfs.state.path().join(format!("junit-{n}.xml"));
        let s = rfs_test(&rfs, repo.path(), &["--junit", junit.to_str().unwrap()]);
        assert_eq!(s.code, 0, "{}\n{}", s.stdout, s.stderr);
        (s, std::fs::read_to_string(junit).unwrap())
    };
    let (first, junit) = run(1);
    // pytest's own report, each of its cases in the suite's JUnit.
    assert!(
        junit.contains("<testsuite name=\"proofs/unit.rhai / pytest\" tests=\"3\""),
        "{junit}"
    );
    for case in [
        "test_adds",
        "test_adds_negatives",
        "test_fails_on_purpose_not",
    ] {
        assert!(
            junit.contains(&format!(
                "<testcase name=\"{case}\" classname=\"tests.test_calc\""
            )),
            "{case}: {junit}"
        );
    }
    let j = |s: &Suite| {
        std::fs::read_to_string(s.bundle("proofs/unit.rhai").join("journal.jsonl")).unwrap()
    };
    let end = |text: &str| -> Value {
        let line = text
            .lines()
            .find(|l| l.contains(r#""kind":"cache.end""#))
            .expect("cache.end");
        serde_json::from_str::<Value>(line).unwrap()["payload"].clone()
    };
    let filled = end(&j(&first));
    assert_eq!(filled["changed"], true, "pip cached nothing: {filled}");
    assert!(filled["files"].as_u64().unwrap() > 0, "{filled}");
    // The second run's pip finds the downloads in the cache.
    let (second, _) = run(2);
    let text = j(&second);
    let mount = text
        .lines()
        .find(|l| l.contains(r#""kind":"cache.mount""#))
        .unwrap();
    let mount: Value = serde_json::from_str(mount).unwrap();
    assert_eq!(
        mount["payload"]["sha256"], filled["sha256"],
        "mounted what the first run left"
    );
    let steps = second.bundle("proofs/unit.rhai").join("steps");
    let pip_log = std::fs::read_dir(&steps)
        .unwrap()
        .flatten()
        .find(|e| e.file_name().to_string_lossy().ends_with("-pip.stdout.log"))
        .map(|e| std::fs::read_to_string(e.path()).unwrap())
        .unwrap_or_else(|| panic!("no pip log in {}", steps.display()));
    assert!(pip_log.contains("Using cached"), "{pip_log}");
    rfs.assert_no_leftovers();
}
