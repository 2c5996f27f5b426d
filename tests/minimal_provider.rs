//! A fourth provider, written against the core `Provider` trait alone (no
//! capability: syncs upload a file and verify it with the POSIX script):
//! a sandbox is a directory on this machine and a command a plain child
//! process. The book's embedding chapter walks through it; the tests run
//! real proofs on it, so the seam stays small enough to write one in a
//! file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use rfs::provider::{
    labels, CreateSpec, ExecOutcome, ExecRequest, Labels, OutputSink, Provider, ProviderError,
    ProviderResult, PtyChannel, PtyRequest, SandboxInfo,
};
use tokio::io::AsyncReadExt;

// BEGIN book: minimal provider
/// Sandboxes are directories under `root`: `ID/labels.json` and
/// `ID/home/`.
struct Shelf {
    root: PathBuf,
}

impl Shelf {
    fn dir(&self, id: &str) -> ProviderResult<PathBuf> {
        let ok = id.starts_with("shelf-") && id[6..].chars().all(|c| c.is_ascii_hexdigit());
        if !ok {
            return Err(ProviderError::Invalid(format!(
                "not a shelf sandbox id: {id}"
            )));
        }
        Ok(self.root.join(id))
    }

    fn read(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        let dir = self.dir(id)?;
        let Ok(text) = std::fs::read(dir.join("labels.json")) else {
            return Ok(None);
        };
        let labels: BTreeMap<String, String> =
            serde_json::from_slice(&text).map_err(|e| ProviderError::Protocol(e.to_string()))?;
        Ok(Some(SandboxInfo {
            id: id.to_owned(),
            labels: labels.into_iter().collect(),
            home: dir.join("home").display().to_string(),
            state: "running".into(),
        }))
    }
}

fn io(what: &str) -> impl Fn(std::io::Error) -> ProviderError + '_ {
    move |e| ProviderError::Io(format!("{what}: {e}"))
}

#[async_trait]
impl Provider for Shelf {
    fn name(&self) -> &str {
        "shelf"
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        let id = format!("shelf-{}", uuid::Uuid::new_v4().simple());
        let dir = self.dir(&id)?;
        std::fs::create_dir_all(dir.join("home")).map_err(io("creating the sandbox"))?;
        let labels: BTreeMap<_, _> = spec.labels.iter().collect();
        let text = serde_json::to_vec(&labels).map_err(|e| ProviderError::Io(e.to_string()))?;
        // Written last: a sandbox exists once its labels do.
        std::fs::write(dir.join("labels.json"), text).map_err(io("labelling the sandbox"))?;
        Ok(self.read(&id)?.expect("just created"))
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        self.read(id)
    }

    async fn list(&self, want: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        let mut out = vec![];
        for e in std::fs::read_dir(&self.root)
            .map_err(io("listing"))?
            .flatten()
        {
            if let Ok(Some(info)) = self.read(&e.file_name().to_string_lossy()) {
                if labels::matches(&info.labels, want) {
                    out.push(info);
                }
            }
        }
        Ok(out)
    }

    async fn upload(&self, id: &str, local: &Path, remote: &str) -> ProviderResult<()> {
        if !Path::new(remote).starts_with(self.dir(id)?) {
            return Err(ProviderError::Invalid(format!("{remote} is outside {id}")));
        }
        tokio::fs::copy(local, remote)
            .await
            .map_err(io("uploading"))?;
        Ok(())
    }

    /// A child in its own process group; on timeout or interrupt the whole
    /// group is killed (the trait's contract).
    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        self.dir(id)?;
        let mut child = tokio::process::Command::new(&req.argv[0])
            .args(&req.argv[1..])
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .envs(req.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&req.cwd)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .map_err(io("starting the command"))?;
        let group = child.id().expect("running") as i32;
        let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
        let (mut ob, mut eb) = ([0u8; 8192], [0u8; 8192]);
        let (mut odone, mut edone) = (false, false);
        let deadline = tokio::time::sleep(req.timeout.unwrap_or(Duration::MAX / 4));
        tokio::pin!(deadline);
        let mut outcome = ExecOutcome::default();
        while !(odone && edone) {
            tokio::select! {
                n = out.read(&mut ob), if !odone => match n {
                    Ok(0) | Err(_) => odone = true,
                    Ok(n) => sink.stdout(&ob[..n]),
                },
                n = err.read(&mut eb), if !edone => match n {
                    Ok(0) | Err(_) => edone = true,
                    Ok(n) => sink.stderr(&eb[..n]),
                },
                _ = &mut deadline => { outcome.timed_out = true; break; }
                _ = req.cancel.cancelled() => { outcome.cancelled = true; break; }
            }
        }
        if outcome.timed_out || outcome.cancelled {
            // SAFETY: a signal to the command's own process group.
            unsafe { libc::kill(-group, libc::SIGKILL) };
        }
        let status = child.wait().await.map_err(io("waiting"))?;
        use std::os::unix::process::ExitStatusExt;
        outcome.exit = status.code();
        outcome.signal = status.signal();
        Ok(outcome)
    }

    /// A terminal on this machine, in the sandbox's home.
    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        self.dir(id)?;
        rfs::provider::local::pty::spawn_local_pty(req).await
    }

    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        match std::fs::remove_dir_all(self.dir(id)?) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io("destroying")(e)),
            _ => Ok(()),
        }
    }
}
// END book

mod common;
use common::*;

/// Run `script` in `repo` on a fresh shelf (the state keeps the run's
/// output folder).
fn run_on_shelf(repo: &Repo, script: &str) -> (RunOut, Rfs) {
    let rfs = Rfs::new(Prov::Local);
    let shelf = tempfile::tempdir().unwrap();
    let provider = Arc::new(Shelf {
        root: shelf.path().to_path_buf(),
    });
    let out = rfs.run_embedded(repo.path(), rfs.prepare(script), provider, None);
    let left: Vec<_> = std::fs::read_dir(shelf.path()).unwrap().collect();
    assert!(left.is_empty(), "sandboxes left on the shelf: {left:?}");
    (out, rfs)
}

#[test]
fn a_provider_written_against_the_core_trait_runs_a_synced_proof() {
    let repo = Repo::new();
    repo.write("src/answer.txt", "42\n");
    repo.commit("answer");
    let (out, _state) = run_on_shelf(
        &repo,
        r#"sync_source();
let r = step("read", "cat src/answer.txt; echo \"$RELAYFLOWS_SOURCE_COMMIT\"");
assert(r.stdout.contains("42"));"#,
    );
    out.assert_code(0);
    let pin = &out.entries("source.pin")[0];
    assert_eq!(pin["commit"], repo.head());
    // No stream capability: the archive travelled as a file and the POSIX
    // script verified it.
    let verify = &out.entries("source.verify")[0];
    assert_eq!(verify["transfer"], "file", "{verify}");
    assert_eq!(verify["verifier"], "posix", "{verify}");
    let ends = out.entries("step.end");
    assert_eq!(ends[0]["ok"], true);
    let cleanup = &out.entries("cleanup.verified")[0];
    assert_eq!(cleanup["get_by_id"], "not found");
}

/// A provider without the fork capability refuses `checkpoint()` clearly,
/// naming itself, at the script's line (exit 3), and leaves nothing.
#[test]
fn checkpoint_on_a_provider_without_forks_is_refused_naming_it() {
    let repo = Repo::new();
    let (out, _state) = run_on_shelf(&repo, "step(\"a\", \"true\");\ncheckpoint(\"deps\");");
    out.assert_code(3);
    assert!(
        out.stderr
            .contains("cannot checkpoint a sandbox or start one from a checkpoint"),
        "{}",
        out.stderr
    );
    assert!(out.entries("checkpoint").is_empty());
}

#[test]
fn a_minimal_provider_keeps_the_timeout_contract() {
    let repo = Repo::new();
    let (out, _state) = run_on_shelf(
        &repo,
        r#"let r = step("slow", "sleep 30", #{ timeout: 1, allow_failure: true });
assert(r.timed_out);"#,
    );
    out.assert_code(0);
    let attempt = &out.entries("step.attempt")[0];
    assert_eq!(attempt["timed_out"], true);
    assert!(
        attempt["duration_ms"].as_u64().unwrap() < 10_000,
        "{attempt}"
    );
}

#[test]
fn embedding_chapter_shows_the_minimal_provider_verbatim() {
    let me = include_str!("minimal_provider.rs");
    let begin = concat!("// BEGIN ", "book: minimal provider\n");
    let end = concat!("// END ", "book\n");
    let from = me.find(begin).unwrap() + begin.len();
    let code = &me[from..from + me[from..].find(end).unwrap()];
    let chapter = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src/embedding.md"),
    )
    .unwrap();
    assert!(
        chapter.contains(&format!("```rust,ignore\n{code}```\n")),
        "embedding.md does not show tests/minimal_provider.rs's provider verbatim"
    );
    assert!(code.lines().count() < 300);
}
