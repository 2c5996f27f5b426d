//! Every Rhai example in the user guide (`book/src/*.md`) runs with the real
//! binary on the `local` provider, so the guide cannot drift from rfs.
//!
//! A fenced block whose info string's first word is `rhai` is an example.
//! Attributes follow, separated by commas or spaces:
//!
//! | info string            | what must happen                             |
//! |------------------------|----------------------------------------------|
//! | `rhai`                 | `rfs run` exits 0                            |
//! | `rhai,should_fail=N`   | `rfs run` exits with code N                  |
//! | `rhai,no_run`          | only `rfs check` must pass (exit 0)          |
//!
//! Each example runs in a fresh git repository with one commit containing
//! `reproducer-marker.txt`, started from the repository root, with its own
//! `RFS_STATE_DIR`, its script written outside the repository and `--out`
//! in a temporary directory. After every run the journal (if any) must
//! verify and no sandbox may be left behind. Unknown attributes fail the
//! test: a typo must not turn an example into one that is never checked.
//!
//! The Rust code of `embedding.md` is checked too: the functions between
//! `BEGIN book:` / `END book` markers below must appear verbatim in that
//! chapter, and the tests here call them.

use std::process::{Command, Output, Stdio};
use std::time::Instant;

#[path = "book_examples/real_projects.rs"]
mod real_projects;
#[path = "book_examples/test_names.rs"]
mod test_names;
// `Path`, `PathBuf`, `Duration`, `Arc` and `Mutex` are imported by the book
// snippets at the end of this file (they must stay self-contained).

/// How long one example may take before it counts as hung.
const EXAMPLE_TIMEOUT: Duration = Duration::from_secs(180);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Expect {
    Exit(i32),
    CheckOnly,
}

#[derive(Debug)]
struct Example {
    file: PathBuf,
    /// 1-based line of the opening fence.
    line: usize,
    expect: Expect,
    code: String,
}

impl Example {
    fn at(&self) -> String {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        format!(
            "{}:{}",
            self.file.strip_prefix(root).unwrap_or(&self.file).display(),
            self.line
        )
    }
}

fn book_src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("book/src")
}

/// Markdown chapters of the book, sorted for a stable order.
fn chapters() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(book_src())
        .expect("book/src exists")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files
}

/// Parse the attributes of a `rhai` info string; `Ok(None)` when the block
/// is not a Rhai example at all.
fn parse_info(info: &str) -> Result<Option<Expect>, String> {
    let mut words = info
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|w| !w.is_empty());
    if words.next() != Some("rhai") {
        return Ok(None);
    }
    // A file of a walkthrough (`rhai file=proofs/x.rhai`) is run by the
    // chapter's own test (`real_projects`), as part of its project.
    if info.split_whitespace().any(|w| w.starts_with("file=")) {
        return Ok(None);
    }
    let mut expect = Expect::Exit(0);
    let mut seen = 0;
    for w in words {
        seen += 1;
        expect = if w == "no_run" {
            Expect::CheckOnly
        } else if let Some(n) = w.strip_prefix("should_fail=") {
            Expect::Exit(
                n.parse()
                    .map_err(|_| format!("should_fail needs an exit code, got `{n}`"))?,
            )
        } else {
            return Err(format!("unknown attribute `{w}` in info string `{info}`"));
        };
    }
    if seen > 1 {
        return Err(format!("conflicting attributes in info string `{info}`"));
    }
    Ok(Some(expect))
}

/// Every Rhai example in one markdown file (CommonMark fences: ``` or ~~~,
/// up to three spaces of indentation, closed by a fence at least as long).
fn examples_in(file: &Path) -> Result<Vec<Example>, String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut out = vec![];
    let mut open: Option<(char, usize, usize, Option<Expect>, String)> = None;
    for (i, raw) in text.lines().enumerate() {
        let lineno = i + 1;
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let line = raw.trim_start_matches(' ');
        let fence = |c: char| line.chars().take_while(|&x| x == c).count();
        match &mut open {
            None => {
                if indent > 3 {
                    continue;
                }
                for c in ['`', '~'] {
                    let n = fence(c);
                    if n >= 3 {
                        let info = line[n..].trim();
                        let expect = parse_info(info)
                            .map_err(|e| format!("{}:{lineno}: {e}", file.display()))?;
                        open = Some((c, n, lineno, expect, String::new()));
                        break;
                    }
                }
            }
            Some((c, n, start, expect, body)) => {
                let closing = fence(*c);
                if indent <= 3 && closing >= *n && line[closing..].trim().is_empty() {
                    if let Some(expect) = expect.take() {
                        out.push(Example {
                            file: file.to_path_buf(),
                            line: *start,
                            expect,
                            code: std::mem::take(body),
                        });
                    }
                    open = None;
                } else {
                    body.push_str(raw);
                    body.push('\n');
                }
            }
        }
    }
    if let Some((_, _, start, _, _)) = open {
        return Err(format!("{}:{start}: unclosed code fence", file.display()));
    }
    Ok(out)
}

fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.name=rfs book",
            "-c",
            "user.email=book@rfs.invalid",
        ])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A fresh repository: one commit containing `reproducer-marker.txt`.
fn fresh_repo() -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("rfs-book-repo-")
        .tempdir()
        .unwrap();
    git(dir.path(), &["init", "-q"]);
    std::fs::write(dir.path().join("reproducer-marker.txt"), "marker\n").unwrap();
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-q", "-m", "init"]);
    dir
}

/// Run `cmd` with a deadline; a hung example is killed and reported.
fn run_bounded(mut cmd: Command) -> Result<Output, String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start rfs: {e}"))?;
    // Drain the pipes on threads so a chatty example cannot block on them.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t_out = std::thread::spawn(move || {
        let mut v = vec![];
        let _ = std::io::Read::read_to_end(&mut so, &mut v);
        v
    });
    let t_err = std::thread::spawn(move || {
        let mut v = vec![];
        let _ = std::io::Read::read_to_end(&mut se, &mut v);
        v
    });
    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().map_err(|e| e.to_string())? {
            break s;
        }
        if start.elapsed() > EXAMPLE_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "did not finish within {} s",
                EXAMPLE_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Ok(Output {
        status,
        stdout: t_out.join().unwrap_or_default(),
        stderr: t_err.join().unwrap_or_default(),
    })
}

fn rfs(state: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rfs"));
    c.env("RFS_STATE_DIR", state)
        .env_remove("RELAYFLOWS_SANDBOX_PROVIDER")
        .env_remove("RFS_DOCKER_IMAGE")
        .env_remove("RUST_BACKTRACE");
    c
}

/// Run one example; `Err` explains what went wrong.
fn check_example(ex: &Example) -> Result<(), String> {
    let state = tempfile::Builder::new()
        .prefix("rfs-book-state-")
        .tempdir()
        .unwrap();
    let scratch = tempfile::Builder::new()
        .prefix("rfs-book-out-")
        .tempdir()
        .unwrap();
    let script = scratch.path().join("example.rhai");
    std::fs::write(&script, &ex.code).unwrap();
    let repo = fresh_repo();
    let show = |o: &Output| {
        format!(
            "\n--- script\n{}--- stdout\n{}--- stderr\n{}",
            ex.code,
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    };

    let want = match ex.expect {
        Expect::CheckOnly => {
            let mut c = rfs(state.path());
            c.arg("check").arg(&script).current_dir(repo.path());
            let o = run_bounded(c)?;
            if o.status.code() != Some(0) {
                return Err(format!(
                    "`rfs check` exited with {:?}, expected 0{}",
                    o.status.code(),
                    show(&o)
                ));
            }
            return Ok(());
        }
        Expect::Exit(n) => n,
    };

    let out_dir = scratch.path().join("out");
    let mut c = rfs(state.path());
    c.arg("run")
        .arg(&script)
        .args(["--provider", "local", "--out"])
        .arg(&out_dir)
        .current_dir(repo.path());
    let o = run_bounded(c)?;
    if o.status.code() != Some(want) {
        return Err(format!(
            "`rfs run` exited with {:?}, expected {want}{}",
            o.status.code(),
            show(&o)
        ));
    }
    // The evidence of every run must verify...
    let journal = out_dir.join("journal.jsonl");
    if journal.exists() {
        let mut c = rfs(state.path());
        c.args(["journal", "verify"]).arg(&journal);
        let v = run_bounded(c)?;
        if v.status.code() != Some(0) {
            return Err(format!(
                "the run's journal does not verify: {}",
                String::from_utf8_lossy(&v.stderr)
            ));
        }
    }
    // ...and no example may leave a sandbox behind.
    let sandboxes = state.path().join("local/sandboxes");
    let left: Vec<_> = std::fs::read_dir(&sandboxes)
        .map(|d| d.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default();
    if !left.is_empty() {
        return Err(format!("sandboxes left behind: {left:?}{}", show(&o)));
    }
    Ok(())
}

#[test]
fn every_rhai_example_in_the_book_behaves_as_marked() {
    let mut examples = vec![];
    let mut failures = vec![];
    for file in chapters() {
        match examples_in(&file) {
            Ok(mut e) => examples.append(&mut e),
            Err(e) => failures.push(e),
        }
    }
    assert!(
        failures.is_empty(),
        "malformed examples:\n{}",
        failures.join("\n")
    );
    assert!(
        !examples.is_empty(),
        "no ```rhai examples found in {}",
        book_src().display()
    );
    // Each example runs in its own state, scratch and repository, and
    // mostly waits on its sandbox: four at a time.
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let Some(ex) = examples.get(i) else { break };
                if let Err(e) = check_example(ex) {
                    found.lock().unwrap().push((i, format!("{}: {e}", ex.at())));
                }
            });
        }
    });
    let mut found = found.into_inner().unwrap();
    found.sort();
    failures.extend(found.into_iter().map(|(_, f)| f));
    assert!(
        failures.is_empty(),
        "{} of {} book examples failed:\n\n{}",
        failures.len(),
        examples.len(),
        failures.join("\n\n")
    );
    eprintln!("{} book examples behaved as marked", examples.len());
}

#[test]
fn info_strings_are_parsed_strictly() {
    assert_eq!(parse_info("rhai"), Ok(Some(Expect::Exit(0))));
    assert_eq!(parse_info("rhai,should_fail=3"), Ok(Some(Expect::Exit(3))));
    assert_eq!(parse_info("rhai no_run"), Ok(Some(Expect::CheckOnly)));
    assert_eq!(parse_info("rust,ignore"), Ok(None));
    assert_eq!(parse_info("rhaiscript"), Ok(None));
    assert_eq!(parse_info("rhai file=proofs/unit.rhai"), Ok(None));
    assert_eq!(parse_info(""), Ok(None));
    assert!(parse_info("rhai,should_fial=3").is_err());
    assert!(parse_info("rhai,should_fail=x").is_err());
    assert!(parse_info("rhai,no_run,should_fail=1").is_err());
}

#[test]
fn fences_are_found_with_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let md = dir.path().join("t.md");
    std::fs::write(
        &md,
        "# t\n\n```rhai\nprint(1);\n```\n\n````text\n```rhai\nnot an example\n```\n````\n\n~~~rhai,should_fail=1\nfail(\"x\");\n~~~\n",
    )
    .unwrap();
    let ex = examples_in(&md).unwrap();
    assert_eq!(ex.len(), 2, "{ex:?}");
    assert_eq!((ex[0].line, &ex[0].code[..]), (3, "print(1);\n"));
    assert_eq!((ex[1].line, ex[1].expect.clone()), (13, Expect::Exit(1)));
}

// ---------------------------------------------------------------------------
// embedding.md: the code shown there, compiled and run here.
// ---------------------------------------------------------------------------

// BEGIN book: reporter
use std::sync::Mutex;

use rfs::events::{Event, Reporter};

/// Keeps the step names and final outcome of a run, prints nothing.
#[derive(Default)]
struct Summary {
    lines: Mutex<Vec<String>>,
}

impl Reporter for Summary {
    fn event(&self, event: &Event) {
        let line = match event {
            Event::Placement {
                sandbox_id,
                provider,
                ..
            } => format!("sandbox {sandbox_id} on {provider}"),
            Event::StepEnd {
                name, ok, summary, ..
            } => format!("{name}: {ok} ({summary})"),
            Event::RunEnd { outcome, .. } => format!("run {outcome}"),
            _ => return,
        };
        self.lines.lock().unwrap().push(line);
    }
}
// END book

// BEGIN book: provider
use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use rfs::provider::{
    CreateSpec, ExecOutcome, ExecRequest, Labels, OutputSink, Provider, ProviderResult, PtyChannel,
    PtyRequest, SandboxInfo,
};

/// Delegates to another provider and remembers every sandbox it created
/// and destroyed.
struct Audited {
    inner: Arc<dyn Provider>,
    log: Mutex<Vec<String>>,
}

#[async_trait]
impl Provider for Audited {
    fn name(&self) -> &str {
        self.inner.name()
    }
    async fn preflight(&self) -> ProviderResult<()> {
        self.inner.preflight().await
    }
    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        let info = self.inner.create(spec).await?;
        self.log.lock().unwrap().push(format!("create {}", info.id));
        Ok(info)
    }
    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        self.inner.get(id).await
    }
    async fn list(&self, labels: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        self.inner.list(labels).await
    }
    async fn upload(&self, id: &str, local: &Path, remote: &str) -> ProviderResult<()> {
        self.inner.upload(id, local, remote).await
    }
    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        self.inner.exec(id, req, sink).await
    }
    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        self.inner.open_pty(id, req).await
    }
    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        self.log.lock().unwrap().push(format!("destroy {id}"));
        self.inner.destroy(id).await
    }
}
// END book

// BEGIN book: run
use std::path::PathBuf;
use std::time::Duration;

use rfs::provider::local::LocalProvider;
use rfs::provider::select::{ChoiceReason, ProviderChoice};
use rfs::runner::{run, Hooks, RunReport};
use rfs::settings::{new_run_id, RunSettings};

/// Run `script` against the repository at `repo`, on an audited local
/// provider, reporting into `summary`.
fn run_proof(
    script: PathBuf,
    repo: PathBuf,
    state: PathBuf,
    out: PathBuf,
    audit: Arc<Audited>,
    summary: Arc<Summary>,
) -> RunReport {
    let settings = RunSettings {
        script,
        provider: ProviderChoice {
            name: "local".into(),
            reason: ChoiceReason::Flag,
        },
        state_dir: state,
        run_id: new_run_id(),
        out_dir: out,
        invocation_dir: repo, // the repository to sync, and the default cwd
        vars: Default::default(),
        keep: false,
        image: None,
        image_by_repository: false, // the image (if any) is yours
        snapshot: None,
        max_lifetime: Duration::from_secs(600),
        cleanup_deadline: Duration::from_secs(30),
        isolation: Default::default(),
        secret_names: Default::default(),
        allow_dirty: false,
        allowed_repos: Default::default(), // no repository but `repo`'s
        max_log: Default::default(),       // 256 MiB of logs
    };
    let hooks = Hooks {
        provider: Some(audit),
        reporter: summary,
        ..Default::default()
    };
    run(settings, hooks)
}
// END book

/// The snippets above, exactly as `embedding.md` shows them.
fn marked_snippets() -> Vec<(String, String)> {
    let me = include_str!("book_examples.rs");
    let mut out = vec![];
    let mut rest = me;
    let begin = concat!("// BEGIN ", "book: ");
    let end = concat!("// END ", "book\n");
    while let Some(i) = rest.find(begin) {
        let after = &rest[i + begin.len()..];
        let nl = after.find('\n').unwrap();
        let name = after[..nl].to_owned();
        let body_start = &after[nl + 1..];
        let j = body_start.find(end).expect("END marker");
        out.push((name, body_start[..j].to_owned()));
        rest = &body_start[j..];
    }
    out
}

#[test]
fn embedding_chapter_shows_the_tested_code() {
    let chapter = std::fs::read_to_string(book_src().join("embedding.md")).unwrap();
    let snippets = marked_snippets();
    assert_eq!(snippets.len(), 3, "snippet markers changed");
    for (name, code) in snippets {
        let block = format!("```rust,ignore\n{code}```\n");
        assert!(
            chapter.contains(&block),
            "embedding.md does not show the `{name}` snippet of tests/book_examples.rs verbatim:\n{block}"
        );
    }
}

#[test]
fn embedding_example_runs_and_reports() {
    let state = tempfile::tempdir().unwrap();
    let repo = fresh_repo();
    let script = state.path().join("proof.rhai");
    std::fs::write(
        &script,
        "let r = step(\"marker\", \"cat reproducer-marker.txt\");\nassert(r.stdout == \"marker\\n\");\n",
    )
    .unwrap();
    let audit = Arc::new(Audited {
        inner: Arc::new(LocalProvider::new(state.path())),
        log: Mutex::new(vec![]),
    });
    let summary = Arc::new(Summary::default());
    let report = run_proof(
        script,
        repo.path().to_path_buf(),
        state.path().to_path_buf(),
        state.path().join("out"),
        audit.clone(),
        summary.clone(),
    );
    assert_eq!(report.exit_code, 0, "{:?}", report.error);
    assert!(report.teardown_warning.is_none());
    let lines = summary.lines.lock().unwrap().clone();
    assert!(lines[0].starts_with("sandbox local-"), "{lines:?}");
    assert!(lines[1].starts_with("marker: true (exit 0"), "{lines:?}");
    assert_eq!(lines.last().unwrap(), "run completed");
    let log = audit.log.lock().unwrap().clone();
    assert_eq!(log.len(), 2, "{log:?}");
    assert_eq!(log[0].replace("create", "destroy"), log[1]);
    assert!(report.out_dir.join("EVIDENCE.md").exists());
}
