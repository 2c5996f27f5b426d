//! Shared harness for integration tests: real temporary git repositories,
//! the real `rfs` binary, an isolated state directory per test, and the
//! provider's own inventory to prove nothing was left behind.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;
use tempfile::TempDir;

/// A temporary git repository.
pub struct Repo {
    pub dir: TempDir,
}

impl Repo {
    /// `git init` with an identity and one committed marker file.
    pub fn new() -> Repo {
        let r = Repo::empty();
        r.write("reproducer-marker.txt", "marker\n");
        r.commit("init");
        r
    }

    /// `git init` without commits.
    pub fn empty() -> Repo {
        let dir = tempfile::Builder::new()
            .prefix("rfs-repo-")
            .tempdir()
            .unwrap();
        let r = Repo { dir };
        r.git(&["init", "-q", "-b", "main"]);
        r.git(&["config", "user.name", "rfs test"]);
        r.git(&["config", "user.email", "test@rfs.invalid"]);
        r.git(&["config", "core.quotePath", "false"]);
        r
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn git(&self, args: &[&str]) -> String {
        let out = Command::new("git")
            .args(args)
            .current_dir(self.path())
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .output()
            .expect("git runs");
        assert!(
            out.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn write_bytes(&self, rel: impl AsRef<Path>, content: &[u8]) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn chmod_x(&self, rel: &str) {
        use std::os::unix::fs::PermissionsExt;
        let p = self.path().join(rel);
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    pub fn symlink(&self, rel: &str, target: &str) {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    /// `git add -A && git commit`; returns the commit id.
    pub fn commit(&self, msg: &str) -> String {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "--allow-empty", "-m", msg]);
        self.head()
    }

    pub fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    pub fn tree(&self) -> String {
        self.git(&["rev-parse", "HEAD^{tree}"])
    }
}

/// The provider a test body runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prov {
    Local,
    Docker,
    /// Against a fresh `rfs-daytona-sim` server per test.
    Daytona,
}

impl Prov {
    pub fn name(self) -> &'static str {
        match self {
            Prov::Local => "local",
            Prov::Docker => "docker",
            Prov::Daytona => "daytona",
        }
    }
}

/// The image the Docker tests use (built by scripts/docker-test-image.sh).
pub const DOCKER_TEST_IMAGE: &str = "rfs-test-busybox:latest";

/// Whether the Docker suites must be skipped: no engine answers. Says so
/// once per test binary, in one line that test output capture does not
/// swallow. With `RFS_REQUIRE_DOCKER=1` (set by scripts/test.sh, hence
/// CI) a missing engine fails instead.
pub fn docker_missing() -> bool {
    static STATE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let missing = STATE.get_or_init(|| {
        // On a thread of its own: callers may be inside a tokio runtime
        // (#[tokio::test]), where blocking on another one panics.
        let why = std::thread::spawn(|| {
            match rfs::provider::docker::DockerProvider::connect(Default::default()) {
                Err(e) => Some(e.to_string()),
                Ok(p) => {
                    use rfs::provider::Provider;
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .unwrap();
                    rt.block_on(p.preflight()).err().map(|e| e.to_string())
                }
            }
        })
        .join()
        .expect("docker probe thread");
        if let Some(why) = &why {
            if std::env::var("RFS_REQUIRE_DOCKER").is_ok_and(|v| v == "1") {
                return Some(format!("RFS_REQUIRE_DOCKER=1 but no Docker engine answers: {why}"));
            }
            use std::io::Write;
            let _ = writeln!(
                std::io::stderr(),
                "note: no Docker engine answers ({why}); skipping the docker test suites (set RFS_REQUIRE_DOCKER=1 to fail instead)"
            );
        }
        why.map(|_| String::new())
    });
    match missing {
        Some(m) if !m.is_empty() => panic!("{m}"),
        Some(_) => true,
        None => false,
    }
}

/// Whether the gVisor tests must be skipped: no usable `runsc` here
/// (`rfs::provider::local::gvisor`'s check). Says so once per test binary,
/// in one line. With `RFS_REQUIRE_GVISOR=1` (set by scripts/test.sh, which
/// installs runsc) a missing runsc fails instead.
pub fn gvisor_missing() -> bool {
    static STATE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    let missing = STATE.get_or_init(|| {
        let why = rfs::provider::local::gvisor::unusable()?;
        if std::env::var("RFS_REQUIRE_GVISOR").is_ok_and(|v| v == "1") {
            return Some(format!("RFS_REQUIRE_GVISOR=1 but gVisor is not usable: {why}"));
        }
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "note: gVisor is not usable here ({why}); skipping the gvisor tests (set RFS_REQUIRE_GVISOR=1 to fail instead)"
        );
        Some(String::new())
    });
    match missing {
        Some(m) if !m.is_empty() => panic!("{m}"),
        Some(_) => true,
        None => false,
    }
}

/// Whether `RFS_REQUIRE_DAYTONA=1` (set by scripts/test.sh, hence CI):
/// a machine that cannot run the Daytona-API test server fails the
/// daytona suites instead of skipping them.
pub fn daytona_required() -> bool {
    std::env::var("RFS_REQUIRE_DAYTONA").is_ok_and(|v| v == "1")
}

/// Start the Daytona-API test server; `None` (one line on stderr) when this
/// machine cannot run it (it needs root and /bin/busybox). Under
/// `RFS_REQUIRE_DAYTONA=1` that is a panic naming what is missing.
/// `RFS_TEST_DAYTONA_LATENCY_MS` adds that latency to every response and
/// WebSocket frame of every server the tests start (scripts/test.sh runs
/// the Daytona provider tests again at 50 ms).
pub fn start_sim(mut opts: rfs_daytona_sim::SimOptions) -> Option<rfs_daytona_sim::Sim> {
    if let Some(ms) = std::env::var("RFS_TEST_DAYTONA_LATENCY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        opts.latency = std::time::Duration::from_millis(ms);
        opts.frame_latency = std::time::Duration::from_millis(ms);
    }
    match rfs_daytona_sim::Sim::start(opts) {
        Ok(sim) => Some(sim),
        Err(e) if daytona_required() => {
            panic!("RFS_REQUIRE_DAYTONA=1 but the Daytona-API test server cannot run here: {e}")
        }
        Err(e) => {
            eprintln!(
                "skipping daytona test: the Daytona-API test server cannot run here: {e} (set RFS_REQUIRE_DAYTONA=1 to fail instead)"
            );
            None
        }
    }
}

/// Console output of runs waited for by [`wait_bounded`] (spawned runs),
/// checked for the API key by [`Rfs::assert_key_not_leaked`].
static SPAWNED_CONSOLES: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// `docker ARGS`; its stdout, trimmed (panics when it fails).
pub fn docker(args: &[&str]) -> String {
    let out = Command::new("docker").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "docker {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Build the Docker test image once per test binary.
pub fn ensure_docker_image() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/docker-test-image.sh");
        let st = Command::new("bash")
            .arg(script)
            .status()
            .expect("bash runs");
        assert!(st.success(), "scripts/docker-test-image.sh failed");
    });
}

/// An isolated rfs environment (state dir) for one provider.
pub struct Rfs {
    pub state: TempDir,
    pub prov: Prov,
    /// The Daytona-API server of a daytona test.
    pub sim: Option<rfs_daytona_sim::Sim>,
    /// The person's `local` isolation (`RFS_LOCAL_ISOLATION`), where a
    /// test asks for one ([`Rfs::local_gvisor`]).
    pub isolation: Option<&'static str>,
    /// Console output of every run (checked for the API key).
    consoles: std::sync::Mutex<Vec<String>>,
}

/// The outcome of one `rfs run`.
#[derive(Debug)]
pub struct RunOut {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub out_dir: PathBuf,
}

impl RunOut {
    /// Every journal entry.
    pub fn journal(&self) -> Vec<Value> {
        let text =
            std::fs::read_to_string(self.out_dir.join("journal.jsonl")).unwrap_or_else(|e| {
                panic!(
                    "no journal in {}: {e}\n{}",
                    self.out_dir.display(),
                    self.stderr
                )
            });
        text.lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Payloads of journal entries of `kind`.
    pub fn entries(&self, kind: &str) -> Vec<Value> {
        self.journal()
            .into_iter()
            .filter(|e| e["kind"] == kind)
            .map(|e| e["payload"].clone())
            .collect()
    }

    pub fn kinds(&self) -> Vec<String> {
        self.journal()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect()
    }

    /// The limit of `kind` in force in the run's placement: (value, by).
    pub fn limit_in_force(&self, kind: &str) -> Option<(u64, String)> {
        let placed = &self.entries("placement")[0]["isolation"]["limits"]["enforced"];
        placed
            .as_array()?
            .iter()
            .find(|l| l["kind"] == kind)
            .map(|l| {
                (
                    l["value"].as_u64().unwrap(),
                    l["by"].as_str().unwrap().to_owned(),
                )
            })
    }

    /// The sandbox id the journal's placement names.
    pub fn sandbox_id(&self) -> String {
        self.entries("placement")[0]["sandbox_id"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    pub fn evidence(&self) -> String {
        std::fs::read_to_string(self.out_dir.join("EVIDENCE.md")).unwrap()
    }

    #[track_caller]
    pub fn assert_code(&self, code: i32) {
        assert_eq!(
            self.code, code,
            "unexpected exit code\n--- stdout\n{}\n--- stderr\n{}",
            self.stdout, self.stderr
        );
    }
}

pub fn rfs_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_rfs"))
}

impl Rfs {
    pub fn new(prov: Prov) -> Rfs {
        if prov == Prov::Docker {
            ensure_docker_image();
        }
        let sim = (prov == Prov::Daytona).then(|| {
            start_sim(rfs_daytona_sim::SimOptions::default())
                .expect("the Daytona-API test server starts")
        });
        Rfs::with_sim(prov, sim)
    }

    fn with_sim(prov: Prov, sim: Option<rfs_daytona_sim::Sim>) -> Rfs {
        Rfs {
            state: tempfile::Builder::new()
                .prefix("rfs-state-")
                .tempdir()
                .unwrap(),
            prov,
            sim,
            isolation: None,
            consoles: Default::default(),
        }
    }

    /// Every `local` sandbox the journals under the state directory place
    /// was isolated in `mode`, but where the test passed its own
    /// `--isolation`: a test of the gVisor pass did not silently run
    /// under namespaces.
    pub fn assert_every_local_placement_is(&self, mode: &str) {
        fn journals(dir: &Path, found: &mut Vec<PathBuf>) {
            for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
                let p = e.path();
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    journals(&p, found);
                } else if p.file_name().is_some_and(|n| n == "journal.jsonl") {
                    found.push(p);
                }
            }
        }
        let mut found = vec![];
        journals(self.state.path(), &mut found);
        let mut placed = 0;
        for j in found {
            let text = std::fs::read_to_string(&j).unwrap_or_default();
            for line in text.lines() {
                let Ok(e) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                let p = &e["payload"];
                // Another mode only where the test itself passed one
                // (`--isolation none` for what needs no isolation).
                let iso = &p["isolation"];
                if e["kind"] == "placement"
                    && p["provider"] == "local"
                    && iso["requested_by"] != "--isolation flag"
                {
                    assert_eq!(
                        iso["mode"],
                        mode,
                        "{}: a sandbox placed in another mode",
                        j.display()
                    );
                }
                placed += usize::from(
                    e["kind"] == "placement" && p["provider"] == "local" && iso["mode"] == mode,
                );
            }
        }
        assert!(
            placed > 0,
            "no sandbox of this test was placed in mode {mode}: it tests nothing of it"
        );
    }

    /// A local environment whose runs are under gVisor, as the person
    /// running rfs sets it (`RFS_LOCAL_ISOLATION=gvisor`).
    pub fn local_gvisor() -> Rfs {
        Rfs {
            isolation: Some("gvisor"),
            ..Rfs::new(Prov::Local)
        }
    }

    /// A daytona environment on a server started with `opts`; `None` (and
    /// one line on stderr) when this machine cannot run the server — a
    /// failure naming what is missing under `RFS_REQUIRE_DAYTONA=1`.
    pub fn daytona_with(opts: rfs_daytona_sim::SimOptions) -> Option<Rfs> {
        start_sim(opts).map(|sim| Rfs::with_sim(Prov::Daytona, Some(sim)))
    }

    /// A daytona environment whose default snapshot is of class
    /// `linux-vm` (Daytona forks those; the default `container` class it
    /// does not).
    #[allow(dead_code)]
    pub fn daytona_vm() -> Option<Rfs> {
        Rfs::daytona_with(rfs_daytona_sim::SimOptions {
            default_snapshot_class: "linux-vm".into(),
            ..Default::default()
        })
    }

    /// A daytona environment with the server's defaults (see [`Rfs::daytona_with`]).
    pub fn daytona() -> Option<Rfs> {
        Rfs::daytona_with(rfs_daytona_sim::SimOptions::default())
    }

    /// The server of a daytona environment.
    pub fn sim(&self) -> &rfs_daytona_sim::Sim {
        self.sim.as_ref().expect("a daytona environment")
    }

    /// Whether checkpoint `id` (of `checkpoint()` or a setup) still
    /// exists, asked of the provider's own inventory (not of rfs): a local
    /// checkpoint folder, a docker image, a Daytona sandbox.
    #[allow(dead_code)]
    pub fn checkpoint_exists(&self, id: &str) -> bool {
        match self.prov {
            Prov::Local => self
                .state
                .path()
                .join("local/checkpoints")
                .join(id)
                .exists(),
            Prov::Docker => std::process::Command::new("docker")
                .args(["image", "inspect", id])
                .output()
                .unwrap()
                .status
                .success(),
            Prov::Daytona => {
                self.sim().inventory().iter().any(|s| s.id == id)
                    || self.sim().snapshots().iter().any(|s| s.name == id)
            }
        }
    }

    /// This environment's provider, built in-process.
    pub fn provider(&self) -> std::sync::Arc<dyn rfs::provider::Provider> {
        use rfs::provider::daytona::config::{Config, Credential, Secret};
        use rfs::provider::select;
        match &self.sim {
            Some(sim) => std::sync::Arc::new(
                rfs::provider::daytona::DaytonaProvider::new(Config::new(
                    Credential::ApiKey(Secret::new(sim.api_key())),
                    sim.api_url(),
                ))
                .unwrap(),
            ),
            None => {
                let choice = select::ProviderChoice {
                    name: self.prov.name().into(),
                    reason: select::ChoiceReason::Flag,
                };
                select::build(&choice, self.state.path(), Some(DOCKER_TEST_IMAGE.into())).unwrap()
            }
        }
    }

    /// A `rfs` command with this environment (provider via the env var).
    pub fn cmd(&self, cwd: &Path) -> Command {
        let mut c = Command::new(rfs_bin());
        c.current_dir(cwd);
        self.test_env(&mut c);
        c
    }

    /// This environment on `c`: its state directory and provider, and
    /// none of the person's settings the test machine may have.
    pub fn test_env(&self, c: &mut Command) {
        c.env("RFS_STATE_DIR", self.state.path())
            .env("RELAYFLOWS_SANDBOX_PROVIDER", self.prov.name())
            .env("RFS_DOCKER_IMAGE", DOCKER_TEST_IMAGE)
            .env_remove("RUST_BACKTRACE");
        for k in [
            "DAYTONA_API_KEY",
            "DAYTONA_API_URL",
            "DAYTONA_JWT_TOKEN",
            "DAYTONA_ORGANIZATION_ID",
            "DAYTONA_TARGET",
            "RELAYFLOWS_SANDBOX_SNAPSHOT",
            "RFS_MAX_MEMORY",
            "RFS_MAX_PIDS",
            "RFS_MAX_DISK",
            "RFS_MAX_CPUS",
            "RFS_NETWORK",
            "RFS_ALLOW_HOST_NETWORK",
            "RFS_LOCAL_ISOLATION",
        ] {
            c.env_remove(k);
        }
        if let Some(mode) = self.isolation {
            c.env("RFS_LOCAL_ISOLATION", mode);
        }
        if let Some(sim) = &self.sim {
            c.env_remove("RFS_DOCKER_IMAGE")
                .env("DAYTONA_API_URL", sim.api_url())
                .env("DAYTONA_API_KEY", sim.api_key());
        }
    }

    /// Write `script` to a file outside any repository and run it from `cwd`.
    pub fn run(&self, cwd: &Path, script: &str) -> RunOut {
        self.run_with(cwd, script, &[])
    }

    pub fn run_with(&self, cwd: &Path, script: &str, args: &[&str]) -> RunOut {
        self.run_with_env(cwd, script, args, &[])
    }

    /// [`Rfs::run_with`] with extra environment variables.
    pub fn run_with_env(
        &self,
        cwd: &Path,
        script: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> RunOut {
        let (script_path, out_dir) = self.prepare(script);
        let out = self
            .cmd(cwd)
            .envs(env.iter().copied())
            .arg("run")
            .arg(&script_path)
            .arg("--out")
            .arg(&out_dir)
            .args(args)
            .output()
            .expect("rfs runs");
        let out = finish(out, out_dir);
        self.console(&out.stdout);
        self.console(&out.stderr);
        out
    }

    /// `rfs repl` from `cwd` with `args`, `input` piped in, to the end of
    /// the input.
    pub fn repl(&self, cwd: &Path, input: &[u8], args: &[&str]) -> RunOut {
        use std::io::Write as _;
        let out_dir = self.state.path().join("out").join(uuid_like());
        let mut child = self
            .cmd(cwd)
            .arg("repl")
            .args(args)
            .arg("--out")
            .arg(&out_dir)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("rfs repl starts");
        child.stdin.take().unwrap().write_all(input).unwrap();
        let out = finish(child.wait_with_output().unwrap(), out_dir);
        self.console(&out.stdout);
        self.console(&out.stderr);
        out
    }

    /// Remember console output (checked for the API key at the end).
    pub fn console(&self, text: &str) {
        self.consoles.lock().unwrap().push(text.to_owned());
    }

    /// Start `rfs run` of `script` from `cwd` in the background (no stdin,
    /// stdout and stderr piped); returns the child and the run's output
    /// dir. [`wait_bounded`] ends it.
    pub fn spawn(&self, cwd: &Path, script: &str) -> (std::process::Child, PathBuf) {
        let (script_path, out_dir) = self.prepare(script);
        let child = self
            .cmd(cwd)
            .arg("run")
            .arg(&script_path)
            .arg("--out")
            .arg(&out_dir)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("rfs starts");
        (child, out_dir)
    }

    /// Run the prepared `script` (see [`Rfs::prepare`]) in-process through
    /// the embedding API, from `cwd`, with `provider` in place of this
    /// environment's and the given `--isolation`.
    #[allow(dead_code)]
    pub fn run_embedded(
        &self,
        cwd: &Path,
        (script, out_dir): (PathBuf, PathBuf),
        provider: std::sync::Arc<dyn rfs::provider::Provider>,
        isolation: Option<&str>,
    ) -> RunOut {
        let settings = rfs::settings::RunSettings {
            script,
            provider: rfs::provider::select::ProviderChoice {
                name: self.prov.name().into(),
                reason: rfs::provider::select::ChoiceReason::Flag,
            },
            state_dir: self.state.path().to_path_buf(),
            run_id: rfs::settings::new_run_id(),
            out_dir: out_dir.clone(),
            invocation_dir: cwd.to_path_buf(),
            vars: Default::default(),
            keep: false,
            image: Some(DOCKER_TEST_IMAGE.into()),
            image_by_repository: false,
            snapshot: None,
            max_lifetime: std::time::Duration::from_secs(600),
            cleanup_deadline: std::time::Duration::from_secs(30),
            isolation: rfs::provider::isolation::IsolationRequest::from_settings(
                isolation.or(self.isolation),
                None,
            )
            .unwrap(),
            secret_names: Default::default(),
            allow_dirty: false,
            allowed_repos: rfs::settings::AllowedRepos::new(cwd, &[]).unwrap(),
            max_log: Default::default(),
        };
        let report = rfs::runner::run(
            settings,
            rfs::runner::Hooks {
                provider: Some(provider),
                ..Default::default()
            },
        );
        RunOut {
            code: report.exit_code,
            stdout: String::new(),
            stderr: report.error.map(|e| e.to_string()).unwrap_or_default(),
            out_dir,
        }
    }

    /// Script file and a fresh output dir.
    pub fn prepare(&self, script: &str) -> (PathBuf, PathBuf) {
        let id = uuid_like();
        let scripts = self.state.path().join("scripts");
        std::fs::create_dir_all(&scripts).unwrap();
        let script_path = scripts.join(format!("{id}.rhai"));
        std::fs::write(&script_path, script).unwrap();
        (script_path, self.state.path().join("out").join(id))
    }

    /// Sandboxes rfs created that still exist, per the provider's inventory.
    pub fn leftovers(&self) -> Vec<String> {
        use rfs::provider::{labels, select};
        if let Some(sim) = &self.sim {
            // The server's truth, not the (lagging) list: sandboxes, and
            // the snapshots rfs made of them (checkpoints, `rfs-cp.`).
            return sim
                .inventory()
                .into_iter()
                .filter(|s| s.labels.get(labels::CREATED_BY).map(String::as_str) == Some("rfs"))
                .map(|s| format!("{} ({})", s.id, s.state))
                .chain(
                    sim.snapshots()
                        .into_iter()
                        .filter(|s| s.name.starts_with("rfs-cp."))
                        .map(|s| format!("snapshot {} ({})", s.name, s.state)),
                )
                .collect();
        }
        let choice = select::ProviderChoice {
            name: self.prov.name().into(),
            reason: select::ChoiceReason::Flag,
        };
        let p = select::build(&choice, self.state.path(), Some(DOCKER_TEST_IMAGE.into())).unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let all = rt.block_on(p.list(&labels::rfs_selector())).unwrap();
        // Docker's inventory is shared by every test: only our runs count.
        let ours = self.run_ids();
        all.into_iter()
            .filter(|s| {
                self.prov == Prov::Local
                    || s.labels
                        .get(labels::RUN_ID)
                        .map(|r| ours.contains(r))
                        .unwrap_or(false)
            })
            .map(|s| s.id)
            .collect()
    }

    /// Run ids of every run in this environment (from their journals).
    fn run_ids(&self) -> Vec<String> {
        let mut ids = vec![];
        // `rfs run --out` bundles, and `rfs test`'s (one folder a suite).
        let mut dirs: Vec<_> = std::fs::read_dir(self.state.path().join("out"))
            .into_iter()
            .flatten()
            .flatten()
            .collect();
        for suite in std::fs::read_dir(self.state.path().join("suites"))
            .into_iter()
            .flatten()
            .flatten()
        {
            dirs.extend(
                std::fs::read_dir(suite.path())
                    .into_iter()
                    .flatten()
                    .flatten(),
            );
        }
        for d in dirs {
            if let Ok(t) = std::fs::read_to_string(d.path().join("journal.jsonl")) {
                if let Some(l) = t.lines().next() {
                    let v: Value = serde_json::from_str(l).unwrap();
                    ids.push(
                        v["payload"]["run_id"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                    );
                }
            }
        }
        ids
    }

    #[track_caller]
    pub fn assert_no_leftovers(&self) {
        let left = self.leftovers();
        assert!(left.is_empty(), "sandboxes left behind: {left:?}");
        self.assert_key_not_leaked();
    }

    /// What every daytona test asserts after its body: the server's
    /// inventory holds no rfs sandbox (not even a `destroying` one: rfs
    /// verifies teardown before it exits) and the API key appears in no
    /// file and no console output.
    #[track_caller]
    pub fn finish(&self) {
        self.assert_no_leftovers();
    }

    /// The Daytona API key is in no file rfs wrote (state dir: run output,
    /// journals, logs) and in no console output of a run.
    #[track_caller]
    pub fn assert_key_not_leaked(&self) {
        let Some(sim) = &self.sim else { return };
        let key = sim.api_key();
        let spawned = SPAWNED_CONSOLES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        for text in self.consoles.lock().unwrap().iter().chain(spawned.iter()) {
            assert!(
                !text.contains(&key),
                "the API key appeared on the console:\n{text}"
            );
        }
        let mut stack = vec![self.state.path().to_path_buf()];
        while let Some(d) = stack.pop() {
            let Ok(entries) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in entries.flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if let Ok(bytes) = std::fs::read(&p) {
                    assert!(
                        !bytes.windows(key.len()).any(|w| w == key.as_bytes()),
                        "the API key appeared in {}",
                        p.display()
                    );
                }
            }
        }
    }
}

pub fn finish(out: Output, out_dir: PathBuf) -> RunOut {
    RunOut {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        out_dir,
    }
}

/// Wait for a run started by [`Rfs::spawn`], at most 60 s: a hung rfs
/// fails the test (killed, its stderr shown) instead of hanging it.
pub fn wait_bounded(mut child: std::process::Child, out_dir: PathBuf) -> RunOut {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            remember_spawned(&out);
            panic!(
                "rfs did not end within 60 s\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    remember_spawned(&out);
    finish(out, out_dir)
}

fn remember_spawned(out: &Output) {
    let mut c = SPAWNED_CONSOLES.lock().unwrap_or_else(|p| p.into_inner());
    c.push(String::from_utf8_lossy(&out.stdout).into_owned());
    c.push(String::from_utf8_lossy(&out.stderr).into_owned());
}

/// A unique-enough name for files in a test's own temp dirs.
pub fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!(
        "{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    )
}

/// Generate one test per provider from one body:
/// `provider_tests! { fn name(rfs: &Rfs) { ... } }` → `local::name`, `docker::name`,
/// `daytona::name` (each daytona test on a server of its own, then [`Rfs::finish`]).
#[macro_export]
macro_rules! provider_tests {
    ($($(#[not_under_gvisor = $why:literal])? fn $name:ident($rfs:ident: &Rfs) $body:block)*) => {
        $(fn $name($rfs: &Rfs) $body)*
        mod local {
            $(#[test] fn $name() { super::$name(&super::Rfs::new(super::Prov::Local)); })*
        }
        // Every local test again with the sandbox under gVisor (#35),
        // but those marked `#[not_under_gvisor = "why"]` (ignored, the
        // reason shown).
        mod gvisor {
            $($(#[ignore = $why])? #[test] fn $name() { super::under_gvisor(super::$name); })*
        }
        mod docker {
            $(#[test] fn $name() {
                if super::docker_missing() { return; }
                super::$name(&super::Rfs::new(super::Prov::Docker));
            })*
        }
        mod daytona {
            $(#[test] fn $name() {
                let Some(rfs) = super::Rfs::daytona() else { return; };
                super::$name(&rfs);
                rfs.finish();
            })*
        }
    };
}

/// Run test body `f` with a local environment under gVisor
/// ([`Rfs::local_gvisor`]), then check one of its sandboxes was placed
/// there and none silently elsewhere; nothing where gVisor is missing.
pub fn under_gvisor(f: fn(&Rfs)) {
    if gvisor_missing() {
        return;
    }
    let rfs = Rfs::local_gvisor();
    f(&rfs);
    rfs.assert_every_local_placement_is("gvisor");
}

/// Wait (bounded, 60 s) until the run's journal contains `needle`.
pub fn wait_for_journal_text(out_dir: &Path, needle: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        if std::fs::read_to_string(out_dir.join("journal.jsonl")).is_ok_and(|t| t.contains(needle))
        {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the journal did not contain {needle} within 60 s");
}

/// Wait (bounded) until the run's journal has an entry of `kind`.
pub fn wait_for_journal(out_dir: &Path, kind: &str) {
    wait_for_journal_entries(out_dir, kind, 1);
}

/// Wait (bounded, 60 s) until the run's journal has `n` entries of `kind`.
pub fn wait_for_journal_entries(out_dir: &Path, kind: &str, n: usize) {
    let needle = format!("\"kind\":\"{kind}\"");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while std::time::Instant::now() < deadline {
        let t = std::fs::read_to_string(out_dir.join("journal.jsonl")).unwrap_or_default();
        if t.matches(&needle).count() >= n {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("the journal did not reach {n} × {kind} within 60 s");
}

/// Send SIGINT (Ctrl-C) to a child.
pub fn sigint(child: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .expect("signal sent");
}

/// Whether a host process whose NUL-separated cmdline contains `needle` runs.
pub fn process_running(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(needle))
            .unwrap_or(false)
    })
}

/// Change the byte at `seek` of the uploaded file `remote` in sandbox
/// `id`, through the provider itself (an upload corrupted in transit).
pub async fn corrupt_uploaded_byte(
    provider: &dyn rfs::provider::Provider,
    id: &str,
    remote: &str,
    seek: u64,
) -> rfs::provider::ProviderResult<()> {
    let info = provider.get(id).await?.expect("the sandbox exists");
    let req = rfs::provider::ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("printf Z | dd of=\"$1\" bs=1 seek={seek} conv=notrunc 2>/dev/null"),
            "corrupt".into(),
            remote.into(),
        ],
        cwd: info.home,
        env: vec![],
        timeout: None,
        cancel: Default::default(),
    };
    let mut sink = rfs::provider::Collect::default();
    let o = provider.exec(id, &req, &mut sink).await?;
    assert_eq!(o.exit, Some(0), "corruption failed: {sink:?}");
    Ok(())
}

/// Every file below `dir` (recursively; none if it cannot be read).
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// Chromium from Debian (`chromium`), or `None` with one line when it is
/// missing and not required (`RFS_REQUIRE_CHROMIUM=1`, set by
/// scripts/test.sh, which installs it).
#[allow(dead_code)]
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .map(|n| Path::new("/usr/bin").join(n))
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("RFS_REQUIRE_CHROMIUM").is_none(),
            "RFS_REQUIRE_CHROMIUM is set but no chromium is installed"
        );
        eprintln!("no chromium: skipping the browser test (scripts/test.sh installs it)");
    }
    found
}

/// `page` opened in headless Chromium with `args` (e.g. `--dump-dom`,
/// `--screenshot=FILE`); it must succeed.
#[allow(dead_code)]
pub fn headless(browser: &Path, args: &[&str], page: &Path) -> std::process::Output {
    let out = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--virtual-time-budget=2000",
        ])
        .args(args)
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The page's DOM after headless Chromium loaded it (and ran its scripts).
#[allow(dead_code)]
pub fn dom_of(browser: &Path, page: &Path) -> String {
    String::from_utf8_lossy(&headless(browser, &["--dump-dom"], page).stdout).into_owned()
}

/// A proof file outside any repository (the tree stays clean).
#[allow(dead_code)]
pub fn proof(rfs: &Rfs, text: &str) -> PathBuf {
    let p = rfs.state.path().join(format!("proof-{}.rhai", uuid_like()));
    std::fs::write(&p, text).unwrap();
    p
}

/// `rfs bisect ARGS --out DIR` in `repo`.
#[allow(dead_code)]
pub fn bisect(rfs: &Rfs, repo: &Path, args: &[&str]) -> RunOut {
    let out_dir = rfs.state.path().join("out").join(uuid_like());
    let out = rfs
        .cmd(repo)
        .arg("bisect")
        .args(args)
        .arg("--out")
        .arg(&out_dir)
        .output()
        .expect("rfs bisect runs");
    let out = finish(out, out_dir);
    rfs.console(&out.stdout);
    rfs.console(&out.stderr);
    out
}

/// `rfs verify BUNDLE` run from `cwd`: whether it passed, and what it
/// printed (stdout then stderr).
#[allow(dead_code)]
pub fn rfs_verify(rfs: &Rfs, cwd: &Path, bundle: &Path) -> (bool, String) {
    let v = rfs.cmd(cwd).arg("verify").arg(bundle).output().unwrap();
    (
        v.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&v.stdout),
            String::from_utf8_lossy(&v.stderr)
        ),
    )
}

/// `rfs verify BUNDLE` from `cwd` passes.
#[allow(dead_code)]
#[track_caller]
pub fn assert_bundle_verifies(rfs: &Rfs, cwd: &Path, bundle: &Path) {
    let (ok, text) = rfs_verify(rfs, cwd, bundle);
    assert!(ok, "rfs verify {} failed:\n{text}", bundle.display());
}

/// A step that writes a JUnit report of 3 test cases, one failing (as
/// pytest's `--junitxml` writes them), to `reports/junit.xml`.
pub const JUNIT_3_CASES_STEP: &str = r#"step("pytest", `mkdir -p reports && cat > reports/junit.xml <<'EOF'
<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" errors="0" failures="1" skipped="0" tests="3">
<testcase classname="tests.test_calc" name="test_adds" time="0.001"/>
<testcase classname="tests.test_calc" name="test_divides" time="0.002"><failure message="ZeroDivisionError: division by zero">def test_divides():
&gt;       assert 1 / 0
E       ZeroDivisionError: division by zero</failure></testcase>
<testcase classname="tests.test_calc" name="test_subtracts" time="0.001"/>
</testsuite></testsuites>
EOF`);
"#;

/// Recompute every line's `prev`, EVIDENCE.md and the recorded head after
/// an edit, as a forger rewriting the whole record would.
#[allow(dead_code)]
pub fn rechain(journal: &Path) {
    use sha2::{Digest, Sha256};
    let text = std::fs::read_to_string(journal).unwrap();
    let mut prev = "0".repeat(64);
    let mut out = String::new();
    for l in text.lines() {
        let mut v: rfs::fuzzing::JournalLine = serde_json::from_str(l).unwrap();
        v.prev = prev.clone();
        let line = serde_json::to_string(&v).unwrap();
        prev = hex::encode(Sha256::digest(line.as_bytes()));
        out.push_str(&line);
        out.push('\n');
    }
    std::fs::write(journal, &out).unwrap();
    let evidence = rfs::fuzzing::render_evidence(&out).unwrap();
    std::fs::write(journal.with_file_name("EVIDENCE.md"), evidence).unwrap();
    let head = serde_json::json!({ "lines": out.lines().count(), "head": prev });
    std::fs::write(journal.with_file_name("journal.head"), format!("{head}\n")).unwrap();
    // report.html is a view like EVIDENCE.md; a forger drops it (a bundle
    // without one still verifies: `rfs report` makes one).
    let _ = std::fs::remove_file(journal.with_file_name("report.html"));
}
