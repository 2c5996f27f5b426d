//! The one record of a run: every fact rfs establishes is an [`Event`],
//! written to the hash-chained journal (`journal.jsonl`) and then handed
//! to the [`Reporter`]. `EVIDENCE.md` is rendered from the same events
//! ([`crate::journal::evidence`]), and the console is one more consumer
//! ([`crate::reporter::Console`]) — no fact is written three ways.
//!
//! On disk an event is a journal line's `kind` (the serde tag, e.g.
//! `step.end`) and `payload` (the variant's fields, keys sorted). The
//! book's journal chapter lists every kind and field; a test keeps the two
//! in step.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Which output stream a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// A file rfs wrote into the output directory and closed, with its digest
/// (so `rfs verify` can check it was not changed after the run).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileDigest {
    /// Relative to the output directory, `/`-separated.
    pub path: String,
    /// sha256 (hex) of the file's bytes when rfs closed it.
    pub sha256: String,
    pub bytes: u64,
}

/// A symlink `collect()` found: recorded, never followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactLink {
    /// Where it would be in the bundle (`artifacts/...`); nothing is
    /// written there.
    pub path: String,
    /// What it points at, as the sandbox had it (redacted).
    pub target: String,
}

/// The last lines a step's attempt printed on each stream: redacted as
/// its logs are, at most [`OutputTail::LINES`] lines and
/// [`OutputTail::BYTES`] bytes each, so a reader of the evidence sees the
/// line that matters without the log files.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutputTail {
    pub stdout: String,
    pub stderr: String,
}

impl OutputTail {
    /// Lines kept of each stream.
    pub const LINES: usize = 15;
    /// Bytes kept of each stream.
    pub const BYTES: usize = 2048;

    /// The tails of `stdout` and `stderr` (`None` when both are empty).
    pub fn of(stdout: &str, stderr: &str) -> Option<OutputTail> {
        let t = OutputTail {
            stdout: tail(stdout),
            stderr: tail(stderr),
        };
        (!t.stdout.is_empty() || !t.stderr.is_empty()).then_some(t)
    }
}

/// The last [`OutputTail::LINES`] lines of `text`, at most
/// [`OutputTail::BYTES`] bytes (cut at a character boundary), without
/// the final line end.
fn tail(text: &str) -> String {
    let text = text.trim_end_matches('\n');
    let start = text
        .rmatch_indices('\n')
        .nth(OutputTail::LINES - 1)
        .map_or(0, |(i, _)| i + 1);
    let mut from = start.max(text.len().saturating_sub(OutputTail::BYTES));
    while !text.is_char_boundary(from) {
        from += 1;
    }
    text[from..].to_owned()
}

/// `--allow-dirty` shipped the working tree: the pinned commit is a
/// snapshot (in no branch) of these uncommitted paths on top of
/// `base_commit`. Evidence with it is not reproducible.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkingTreeShipped {
    pub base_commit: String,
    pub uncommitted_paths: Vec<String>,
}

impl WorkingTreeShipped {
    /// The one sentence every view says.
    pub fn describe(&self) -> String {
        format!(
            "NOT REPRODUCIBLE: --allow-dirty shipped the working tree, {} uncommitted path(s) on top of commit {}; commit them for evidence others can re-run",
            self.uncommitted_paths.len(),
            self.base_commit
        )
    }
}

/// How the proof went at one commit of `rfs bisect`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BisectResult {
    Passed,
    Failed,
    /// Not testable there: refused, a step exited 125 (as `git bisect
    /// run`'s convention), or `--skip`.
    Skipped,
}

impl BisectResult {
    pub fn as_str(self) -> &'static str {
        match self {
            BisectResult::Passed => "passed",
            BisectResult::Failed => "failed",
            BisectResult::Skipped => "skipped",
        }
    }
}

/// The commit `rfs bisect` found, as the repository describes it (its
/// text is the repository's, shown escaped).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BisectFoundCommit {
    pub subject: String,
    /// `Name <email>`.
    pub author: String,
    /// The author's date in the author's own time zone (RFC 2822).
    pub date: String,
    pub parents: Vec<String>,
    /// For a merge: where its first parent and the merged history met
    /// (the good end of the range to bisect inside it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub merge_base: Option<String>,
}

/// One commit's result, as the search held it at its end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BisectTested {
    pub commit: String,
    pub result: BisectResult,
}

/// A submodule shipped at its pinned commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmodulePin {
    pub path: String,
    pub commit: String,
}

/// A file copied into the bundle (`bundle/…`) with its digest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundledFile {
    /// Relative to the output directory, `/`-separated.
    pub path: String,
    pub sha256: String,
    /// The `import` path that named it (absent for the script).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
}

/// The script and the modules it imports, copied into the output directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleManifest {
    pub script: BundledFile,
    pub modules: Vec<BundledFile>,
}

/// The key that signs the journal (`journal.sig`): never the key itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signer {
    /// `ssh-ed25519`.
    pub algorithm: String,
    /// `SHA256:…`, as `ssh-keygen -l` shows it.
    pub fingerprint: String,
}

/// What a replay replays (`rfs replay`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayOf {
    pub run_id: String,
    /// The original output directory, as given to `rfs replay`.
    pub out_dir: String,
    /// Hash of the original journal's last line.
    pub journal_head: String,
    /// sha256 of the original journal's bytes.
    pub journal_sha256: String,
    /// The commit the original run pinned (bound by the replay).
    pub commit: String,
    /// The environment the original's sandbox was placed in (absent when
    /// its journal has none): the replay's must be the same image.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<Environment>,
    /// `--allow-other-image`: the person let the replay run on a
    /// different image than the original's (said when it does).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub allow_other_image: bool,
}

/// What a sandbox's environment is, by content (`placement`): what
/// `rfs replay` compares and the attestation lists.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Environment {
    /// The docker image the sandbox was created from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImagePin>,
    /// The host a `local` step sees.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<HostFingerprint>,
}

impl Environment {
    /// One line for EVIDENCE.md (`None` when there is nothing to say).
    pub fn describe(&self) -> Option<String> {
        let mut parts = vec![];
        if let Some(i) = &self.image {
            let mut p = format!("image {}", i.id);
            if !i.repo_digests.is_empty() {
                p.push_str(&format!(" ({})", i.repo_digests.join(", ")));
            }
            parts.push(p);
        }
        if let Some(h) = &self.host {
            let mut p = format!("host kernel {}", h.kernel);
            if let Some(os) = &h.os {
                p.push_str(&format!(", {os}"));
            }
            if let Some(d) = &h.packages_sha256 {
                p.push_str(&format!(", packages sha256 {}", &d[..d.len().min(12)]));
            }
            parts.push(p);
        }
        (!parts.is_empty()).then(|| parts.join("; "))
    }
}

/// A docker image by content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ImagePin {
    /// The image id (`sha256:…`, the digest of its configuration).
    pub id: String,
    /// Its repository digests (`name@sha256:…`), where the daemon knows
    /// any (an image pulled from or pushed to a registry).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repo_digests: Vec<String>,
}

/// The host environment a `local` step sees.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostFingerprint {
    /// The kernel release (`uname -r`).
    pub kernel: String,
    /// `ID VERSION_ID` of `/etc/os-release`, where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os: Option<String>,
    /// sha256 of `dpkg-query -W`'s output (every installed package and
    /// version), where the host has dpkg.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages_sha256: Option<String>,
}

/// How a sync's archive reached the sandbox (`source.verify`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Transfer {
    /// Streamed into the verifier while it was built.
    Stream,
    /// Uploaded as a file, then verified.
    File,
}

/// Whether a sync's archive was compressed on the way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Compression {
    Gzip,
    None,
}

/// What verified a sync inside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verifier {
    /// rfs's own executable.
    Native,
    /// The shell script with POSIX tools.
    Posix,
}

/// Which digest of the archive the two sides compare.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DigestKind {
    /// SHA-256 of the whole stream (the POSIX script's `sha256sum`).
    #[serde(rename = "sha256")]
    Sha256,
    /// The stream with each entry's content replaced by its SHA-256
    /// (rfs's native verifier).
    #[serde(rename = "tar-entries-sha256")]
    Entries,
}

impl DigestKind {
    /// The name journaled in `source.verify`'s `archive_digest`.
    pub fn name(self) -> &'static str {
        match self {
            DigestKind::Sha256 => "sha256",
            DigestKind::Entries => "tar-entries-sha256",
        }
    }
}

/// One fact of a run, as journaled. Field names are the journal payload's
/// keys. New kinds are added as rfs grows: match with a catch-all arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "payload")]
#[non_exhaustive]
pub enum Event {
    /// The run starts (first line).
    #[serde(rename = "run.start")]
    RunStart {
        run_id: String,
        script: String,
        invocation_dir: String,
        out_dir: String,
        provider: String,
        provider_reason: String,
        rfs_version: String,
        /// `--var`s, secret values redacted.
        vars: BTreeMap<String, String>,
        keep: bool,
        /// The bundled script and modules (absent in the REPL).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        bundle: Option<Box<BundleManifest>>,
        /// The key that signs the journal, when the run is signed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signing_key: Option<Box<Signer>>,
        /// Set when the run is a replay.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        replay_of: Option<Box<ReplayOf>>,
    },
    /// The provider's preflight passed.
    #[serde(rename = "provider.ready")]
    ProviderReady { provider: String },
    /// The preflight failed; the run is refused.
    #[serde(rename = "provider.unavailable")]
    ProviderUnavailable { provider: String, reason: String },
    /// The revision was resolved and the repository accepted.
    #[serde(rename = "source.resolved")]
    SourceResolved {
        repo: String,
        rev: String,
        commit: String,
        tree_digest: String,
        subdir: Option<String>,
        implicit: bool,
        dirty_paths_not_shipped: Vec<String>,
        submodules: Vec<SubmodulePin>,
        /// Set when `--allow-dirty` shipped the working tree.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        working_tree: Option<WorkingTreeShipped>,
    },
    /// The repository (or a `sync_source` option) was refused.
    #[serde(rename = "source.refused")]
    SourceRefused { reason: String },
    /// A problem placing the sandbox that does not stop the run.
    #[serde(rename = "placement.warning")]
    PlacementWarning { message: String },
    /// Just before the sandbox is created (a crash during creation still
    /// leaves the labels that find it).
    #[serde(rename = "placement.intent")]
    PlacementIntent {
        provider: String,
        reason: String,
        labels: BTreeMap<String, String>,
        image: Option<String>,
        /// The isolation in force and why (absent in older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        isolation: Option<crate::provider::isolation::IsolationFact>,
    },
    /// The sandbox could not be created; the run is refused.
    #[serde(rename = "placement.failed")]
    PlacementFailed { provider: String, reason: String },
    /// The sandbox exists.
    #[serde(rename = "placement")]
    Placement {
        provider: String,
        sandbox_id: String,
        reason: String,
        labels: BTreeMap<String, String>,
        home: String,
        image: Option<String>,
        /// The isolation in force and why (absent in older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        isolation: Option<crate::provider::isolation::IsolationFact>,
        /// The environment by content: the image id, or the local host's
        /// fingerprint (absent in older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        environment: Option<Box<Environment>>,
    },
    /// The source was bound to a sandbox provisioned earlier, whose source
    /// labels say `unbound`.
    #[serde(rename = "placement.labels_unbound")]
    PlacementLabelsUnbound { sandbox_id: String, reason: String },
    /// The sandbox's report on the uploaded source matched.
    #[serde(rename = "source.verify")]
    SourceVerify {
        sandbox_id: String,
        archive_sha256_local: String,
        archive_sha256_sandbox: String,
        archive_bytes: u64,
        entries_compared: usize,
        file_set_equal: bool,
        content_equal: bool,
        build_ms: u64,
        upload_ms: u64,
        verify_ms: u64,
        /// `stream` (built while the sandbox extracts) or `file`.
        transfer: Transfer,
        /// `gzip` or `none`.
        compression: Compression,
        /// Bytes sent to the sandbox (compressed size when compressed).
        #[serde(default)]
        wire_bytes: u64,
        /// Sum of the synced files' sizes.
        #[serde(default)]
        tree_bytes: u64,
        /// The whole sync: build, provisioning, transfer, verification.
        #[serde(default)]
        sync_ms: u64,
        /// What verified inside the sandbox: `native` (rfs's own
        /// executable) or `posix` (the shell script with POSIX tools).
        verifier: Verifier,
        /// Why the native verifier the provider offers was not used (it
        /// did not start in the sandbox, say): absent when it was, or when
        /// the provider offers none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        verifier_fallback: Option<String>,
        /// How a streamed archive reached the verifier's standard input:
        /// `stdin` (the provider's command channel) or `fifo` (a pipe this
        /// machine shares with the sandbox); absent for a file transfer.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream_route: Option<String>,
        /// Why a faster route for the stream was tried and not taken.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream_fallback: Option<String>,
        /// What `archive_sha256_local`/`_sandbox` are: `sha256` (of the
        /// whole tar stream) or `tar-entries-sha256` (the stream with each
        /// entry's content replaced by its SHA-256; the native verifier's).
        archive_digest: DigestKind,
    },
    /// The source is bound.
    #[serde(rename = "source.pin")]
    SourcePin {
        sandbox_id: String,
        commit: String,
        tree_digest: String,
        archive_sha256: String,
        files: usize,
        workdir: String,
        implicit: bool,
    },
    /// A later `sync_source()` moved the bound source to another commit
    /// in the same sandbox, shipping only what differs; verified inside the
    /// sandbox (a `source.pin` with the new commit follows).
    #[serde(rename = "source.resync")]
    SourceResync {
        sandbox_id: String,
        /// The commit and tree the sandbox held before.
        from_commit: String,
        from_tree_digest: String,
        commit: String,
        tree_digest: String,
        /// Files and symlinks the diff between the two trees added,
        /// modified and deleted.
        added: usize,
        modified: usize,
        deleted: usize,
        /// Files and symlinks shipped: what the diff added or modified,
        /// plus tracked ones the sandbox held otherwise (`rewritten`: the
        /// same in both commits, but steps changed their content, mode,
        /// type or target, or removed them). Without such steps, exactly
        /// `git diff --name-status`'s A, M and T paths.
        shipped: usize,
        rewritten: usize,
        /// Files and symlinks removed because the new commit does not track
        /// them (the sandbox held them): `git diff`'s D paths.
        removed: usize,
        /// The paths of `shipped`, `rewritten` and `removed`, in byte order.
        #[serde(default)]
        shipped_paths: Vec<String>,
        #[serde(default)]
        rewritten_paths: Vec<String>,
        #[serde(default)]
        removed_paths: Vec<String>,
        /// Untracked files and symlinks (steps' outputs) left in place.
        kept_untracked: usize,
        archive_sha256_local: String,
        archive_sha256_sandbox: String,
        archive_bytes: u64,
        /// Entries of the new tree checked in the sandbox (type, mode,
        /// symlink target), and files whose content it hashed.
        entries_compared: usize,
        contents_compared: usize,
        inspect_ms: u64,
        build_ms: u64,
        upload_ms: u64,
        apply_ms: u64,
        sync_ms: u64,
    },
    /// Upload or verification failed; the sandbox is destroyed next.
    #[serde(rename = "source.sync_failed")]
    SourceSyncFailed {
        sandbox_id: String,
        commit: String,
        reason: String,
    },
    /// A cwd was refused before anything ran.
    #[serde(rename = "cwd.refused")]
    CwdRefused { what: String, reason: String },
    /// A step begins.
    #[serde(rename = "step.start")]
    StepStart {
        name: String,
        seq: u32,
        command: String,
        sandbox_id: String,
        /// Relative to the synced root, `""` for the root.
        cwd: String,
        cwd_remote: String,
        /// `[name, value]` pairs, secret values redacted.
        env: Vec<(String, String)>,
        timeout_s: Option<f64>,
        retries: u32,
        allow_failure: bool,
        /// The source pin the step ran under (absent in older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree_digest: Option<String>,
    },
    /// An attempt of a step ended.
    #[serde(rename = "step.attempt")]
    StepAttempt {
        name: String,
        attempt: u32,
        sandbox_id: String,
        exit: Option<i32>,
        signal: Option<i32>,
        timed_out: bool,
        cancelled: bool,
        duration_ms: u64,
        /// `null` when the stream printed nothing.
        stdout_log: Option<FileDigest>,
        stderr_log: Option<FileDigest>,
        /// The last lines of each stream, redacted and bounded (absent in
        /// older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tail: Option<OutputTail>,
    },
    /// The provider could not run an attempt at all.
    #[serde(rename = "step.provider_error")]
    StepProviderError {
        name: String,
        attempt: u32,
        error: String,
        duration_ms: u64,
        stdout_log: Option<FileDigest>,
        stderr_log: Option<FileDigest>,
        /// What the command printed before the provider failed (absent in
        /// older journals).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tail: Option<OutputTail>,
    },
    /// A step was refused (before it started, or by the in-sandbox cwd
    /// check); nothing of the command ran.
    #[serde(rename = "step.refused")]
    StepRefused {
        name: String,
        cwd: String,
        reason: String,
    },
    /// The step is over (not written after a refusal or an interrupt).
    #[serde(rename = "step.end")]
    StepEnd {
        name: String,
        ok: bool,
        exit: Option<i32>,
        timed_out: bool,
        attempts: u32,
        duration_ms: u64,
        sandbox_id: String,
        /// e.g. `exit 0, 12 ms` or `timed out after 2s`.
        summary: String,
        /// A resource limit the step reached (`killed: memory limit 64
        /// MiB reached`), also said first in `summary`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit: Option<String>,
    },
    /// The script printed (redacted).
    #[serde(rename = "print")]
    Print { text: String },
    /// The script called `debug` (redacted).
    #[serde(rename = "debug")]
    Debug { text: String, line: Option<usize> },
    /// `attach()` was refused (bad cwd).
    #[serde(rename = "attach.refused")]
    AttachRefused { command: String, reason: String },
    /// A terminal session started.
    #[serde(rename = "attach.start")]
    AttachStart {
        session: u32,
        command: String,
        sandbox_id: String,
        cwd: String,
        cwd_remote: String,
        cols: u16,
        rows: u16,
        term: String,
        env: Vec<(String, String)>,
        /// The asciicast file, relative to the output directory.
        recording: String,
    },
    /// Input sent to a session: typed `text` (redacted) or a named `key`.
    #[serde(rename = "attach.input")]
    AttachInput {
        session: u32,
        text: Option<String>,
        key: Option<String>,
    },
    #[serde(rename = "attach.resize")]
    AttachResize { session: u32, cols: u16, rows: u16 },
    /// An `assert_screen` ended (`outcome`: `pass`, `Timeout`, `Appeared`,
    /// `Ended`, `Cancelled`).
    #[serde(rename = "attach.assert")]
    AttachAssert {
        session: u32,
        assert: u32,
        pattern: String,
        outcome: String,
        elapsed_ms: u64,
        screen_digest: String,
        /// The screen snapshot file (`null` if it could not be written).
        snapshot: Option<FileDigest>,
    },
    /// A session ended and its recording was closed.
    #[serde(rename = "attach.end")]
    AttachEnd {
        session: u32,
        how: String,
        exit: Option<i32>,
        signal: Option<i32>,
        duration_ms: u64,
        recording_error: Option<String>,
        recording: Option<FileDigest>,
    },
    /// The sandbox was destroyed and proven gone.
    #[serde(rename = "cleanup.verified")]
    CleanupVerified {
        sandbox_id: String,
        why: String,
        get_by_id: String,
        in_inventory: bool,
        inventory_count: usize,
        polls: u32,
        elapsed_ms: u64,
        saw_present_before: bool,
    },
    /// `--keep`: the sandbox was left running.
    #[serde(rename = "cleanup.kept")]
    CleanupKept { sandbox_id: String, reason: String },
    /// Destruction could not be proven within the deadline.
    #[serde(rename = "cleanup.failed")]
    CleanupFailed {
        sandbox_id: String,
        why: String,
        error: String,
    },
    /// No sandbox was ever provisioned.
    #[serde(rename = "cleanup.none")]
    CleanupNone { reason: String },
    /// `rfs bisect` starts: the range, and the commits in it (the
    /// first-parent path from `good`, excluded, to `bad`).
    #[serde(rename = "bisect.start")]
    BisectStart {
        good: String,
        bad: String,
        commits: usize,
    },
    /// `rfs bisect` ran the proof with the source at `commit`.
    #[serde(rename = "bisect.commit")]
    BisectCommit {
        commit: String,
        result: BisectResult,
        /// Why it was skipped, or how it failed.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// What `rfs bisect` found: the first commit whose result differs
    /// from `good`'s, or (skipped commits in the way) every candidate.
    #[serde(rename = "bisect.end")]
    BisectEnd {
        good_result: BisectResult,
        bad_result: BisectResult,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        first_changed: Option<String>,
        candidates: Vec<String>,
        tested: usize,
        /// The commit found, described (subject, author, date, parents).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        found: Option<BisectFoundCommit>,
        /// Every commit with a result (every lane's), oldest first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        results: Vec<BisectTested>,
    },
    /// The fail-closed runtime refused something the script asked for
    /// (every refusal, whichever check raised it; redacted).
    #[serde(rename = "refused")]
    Refused { reason: String },
    /// A bundled file held a secret the run learnt; the copy was redacted
    /// (it no longer replays as it ran).
    #[serde(rename = "bundle.redacted")]
    BundleRedacted { path: String, sha256: String },
    /// The run's sandbox ended outside rfs (killed, stopped or removed)
    /// while rfs used it: `how` is what the provider said, `during` the
    /// step or phase it ended in.
    #[serde(rename = "sandbox.lost")]
    SandboxLost {
        sandbox_id: String,
        during: String,
        how: String,
        ended_by: String,
    },
    /// A module imported by a name the script computed at run time (the
    /// static scan before the run cannot see it): copied into `bundle/`
    /// as it was loaded, so the bundle replays as it ran.
    #[serde(rename = "bundle.module")]
    BundleModule {
        path: String,
        sha256: String,
        import: String,
    },
    /// `collect(path)` copied a file or folder of the synced root into the
    /// bundle's `artifacts/`: every file with its sha256, every folder,
    /// every symlink (recorded, not followed) and what was skipped (not a
    /// file, folder or symlink); `bytes` in all.
    #[serde(rename = "artifact.collected")]
    ArtifactCollected {
        path: String,
        files: Vec<FileDigest>,
        dirs: Vec<String>,
        links: Vec<ArtifactLink>,
        skipped: Vec<String>,
        /// Files whose kept copy had a secret redacted.
        redacted: Vec<String>,
        bytes: u64,
    },
    /// `put(local, path)` shipped the file `local` (not in the commit) to
    /// `path` under the synced root; kept in the bundle at `bundled`
    /// (`bundle/put/...`), or not (a run without a bundle: not
    /// reproducible).
    #[serde(rename = "artifact.put")]
    ArtifactPut {
        local: String,
        path: String,
        sha256: String,
        bytes: u64,
        bundled: Option<String>,
    },
    /// The run is over (last line).
    #[serde(rename = "run.end")]
    RunEnd {
        /// `completed`, `failed`, `refused`, `interrupted` or `error`.
        outcome: String,
        /// Why the run ended that way (the error, redacted), if it failed.
        reason: Option<String>,
        teardown_warning: Option<String>,
    },
}

impl Event {
    /// The journal `kind` and `payload` (keys sorted).
    pub fn to_kind_payload(&self) -> (String, serde_json::Value) {
        let mut v = serde_json::to_value(self).unwrap_or_default();
        let kind = v["kind"].as_str().unwrap_or_default().to_owned();
        let payload = v
            .get_mut("payload")
            .map(serde_json::Value::take)
            .unwrap_or(serde_json::Value::Object(Default::default()));
        (kind, payload)
    }

    /// The event a journal line records. Fails for kinds this rfs does not
    /// know and payloads that do not have the kind's fields.
    pub fn from_kind_payload(
        kind: &str,
        payload: &serde_json::Value,
    ) -> Result<Event, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "kind": kind, "payload": payload }))
    }

    /// The journal `kind`.
    pub fn kind(&self) -> String {
        self.to_kind_payload().0
    }
}

/// Receives a run's events. Implementations must be cheap and never fail
/// the run.
pub trait Reporter: Send + Sync {
    /// A fact, right after it reached the journal.
    fn event(&self, event: &Event);

    /// One line (or a final partial line) of a step's output, redacted.
    /// Output goes to the step's log file, not to the journal.
    fn output(&self, _step: &str, _stream: Stream, _line: &str) {}

    /// A problem with rfs's own record keeping that cannot itself be
    /// journaled (EVIDENCE.md or the journal could not be written).
    fn warning(&self, _text: &str) {}
}

/// A reporter that drops everything (for embedding and tests).
#[derive(Debug, Default)]
pub struct Silent;

impl Reporter for Silent {
    fn event(&self, _: &Event) {}
}

#[cfg(test)]
pub(crate) mod catalog {
    //! One sample of every kind, for the tests that keep the book and the
    //! renderer in step with the enum.
    use super::*;

    fn fd(p: &str) -> Option<FileDigest> {
        Some(FileDigest {
            path: p.into(),
            sha256: "0".repeat(64),
            bytes: 1,
        })
    }

    /// Exhaustive (no wildcard): adding a variant fails to compile here
    /// until it gets a sample below.
    fn ordinal(e: &Event) -> usize {
        match e {
            Event::RunStart { .. } => 0,
            Event::ProviderReady { .. } => 1,
            Event::ProviderUnavailable { .. } => 2,
            Event::SourceResolved { .. } => 3,
            Event::SourceRefused { .. } => 4,
            Event::PlacementWarning { .. } => 5,
            Event::PlacementIntent { .. } => 6,
            Event::PlacementFailed { .. } => 7,
            Event::Placement { .. } => 8,
            Event::PlacementLabelsUnbound { .. } => 9,
            Event::SourceVerify { .. } => 10,
            Event::SourcePin { .. } => 11,
            Event::SourceSyncFailed { .. } => 12,
            Event::CwdRefused { .. } => 13,
            Event::StepStart { .. } => 14,
            Event::StepAttempt { .. } => 15,
            Event::StepProviderError { .. } => 16,
            Event::StepRefused { .. } => 17,
            Event::StepEnd { .. } => 18,
            Event::Print { .. } => 19,
            Event::Debug { .. } => 20,
            Event::AttachRefused { .. } => 21,
            Event::AttachStart { .. } => 22,
            Event::AttachInput { .. } => 23,
            Event::AttachResize { .. } => 24,
            Event::AttachAssert { .. } => 25,
            Event::AttachEnd { .. } => 26,
            Event::CleanupVerified { .. } => 27,
            Event::CleanupKept { .. } => 28,
            Event::CleanupFailed { .. } => 29,
            Event::CleanupNone { .. } => 30,
            Event::RunEnd { .. } => 31,
            Event::Refused { .. } => 32,
            Event::BundleRedacted { .. } => 33,
            Event::SourceResync { .. } => 34,
            Event::BundleModule { .. } => 35,
            Event::SandboxLost { .. } => 36,
            Event::BisectStart { .. } => 37,
            Event::BisectCommit { .. } => 38,
            Event::BisectEnd { .. } => 39,
            Event::ArtifactCollected { .. } => 40,
            Event::ArtifactPut { .. } => 41,
        }
    }
    const COUNT: usize = 42;

    /// An owned string (the samples' shorthand).
    fn s(x: &str) -> String {
        x.to_owned()
    }

    /// One sample per kind, in a fixed order that ends with the run's end
    /// as a journal does (the summary and evidence tests fold them in
    /// sequence).
    pub(crate) fn samples() -> Vec<Event> {
        let all = [
            run_start_samples(),
            source_resolve_samples(),
            placement_samples(),
            source_sync_samples(),
            step_samples(),
            attach_samples(),
            cleanup_samples(),
            late_samples(),
        ]
        .concat();
        let mut seen: Vec<usize> = all.iter().map(ordinal).collect();
        seen.sort_unstable();
        assert_eq!(seen, (0..COUNT).collect::<Vec<_>>(), "one sample per kind");
        all
    }

    /// The run's start and its provider.
    fn run_start_samples() -> Vec<Event> {
        vec![
            Event::RunStart {
                run_id: s("r1"),
                script: s("proof.rhai"),
                invocation_dir: s("/repo"),
                out_dir: s("/out"),
                provider: s("local"),
                provider_reason: s("--provider flag"),
                rfs_version: s("0.1.0"),
                vars: [(s("MODE"), s("ci"))].into(),
                keep: false,
                bundle: Some(Box::new(BundleManifest {
                    script: BundledFile {
                        path: s("bundle/proof.rhai"),
                        sha256: s("5c41"),
                        import: None,
                    },
                    modules: vec![BundledFile {
                        path: s("bundle/lib/util.rhai"),
                        sha256: s("a7b1"),
                        import: Some(s("lib/util")),
                    }],
                })),
                signing_key: Some(Box::new(Signer {
                    algorithm: s("ssh-ed25519"),
                    fingerprint: s("SHA256:abc"),
                })),
                replay_of: Some(Box::new(ReplayOf {
                    run_id: s("r0"),
                    out_dir: s("/out0"),
                    journal_head: s("4ead"),
                    journal_sha256: s("9e11"),
                    commit: s("c0ffee"),
                    environment: Some(Environment {
                        image: Some(ImagePin {
                            id: s("sha256:3aed"),
                            repo_digests: vec![s("busybox@sha256:9ab1")],
                        }),
                        host: None,
                    }),
                    allow_other_image: true,
                })),
            },
            Event::ProviderReady {
                provider: s("local"),
            },
            Event::ProviderUnavailable {
                provider: s("docker"),
                reason: s("daemon down"),
            },
        ]
    }

    /// The source resolved, or refused, before a sandbox exists.
    fn source_resolve_samples() -> Vec<Event> {
        vec![
            Event::SourceResolved {
                repo: s("/repo"),
                rev: s("HEAD"),
                commit: s("c0ffee"),
                tree_digest: s("7ree"),
                subdir: None,
                implicit: false,
                dirty_paths_not_shipped: vec![],
                submodules: vec![SubmodulePin {
                    path: s("sub"),
                    commit: s("abc"),
                }],
                working_tree: Some(WorkingTreeShipped {
                    base_commit: s("c0ffee"),
                    uncommitted_paths: vec![s("proofs/new.rhai")],
                }),
            },
            Event::SourceRefused { reason: s("dirty") },
        ]
    }

    /// Where the sandbox is placed.
    fn placement_samples() -> Vec<Event> {
        let labels: BTreeMap<String, String> = [(s("team"), s("core"))].into();
        vec![
            Event::PlacementWarning {
                message: s("image ignored"),
            },
            Event::PlacementIntent {
                provider: s("local"),
                reason: s("default"),
                labels: labels.clone(),
                image: None,
                isolation: None,
            },
            Event::PlacementFailed {
                provider: s("docker"),
                reason: s("no image"),
            },
            Event::Placement {
                provider: s("local"),
                sandbox_id: s("local-1"),
                reason: s("default"),
                labels,
                home: s("/home/sb"),
                image: None,
                isolation: None,
                environment: Some(Box::new(Environment {
                    image: None,
                    host: Some(HostFingerprint {
                        kernel: s("6.1.0"),
                        os: Some(s("debian 12")),
                        packages_sha256: Some(s("5e1f")),
                    }),
                })),
            },
            Event::PlacementLabelsUnbound {
                sandbox_id: s("local-1"),
                reason: s("provisioned first"),
            },
        ]
    }

    /// The first sync of the source: verified, pinned, or failed.
    fn source_sync_samples() -> Vec<Event> {
        vec![
            Event::SourceVerify {
                sandbox_id: s("local-1"),
                archive_sha256_local: s("aa"),
                archive_sha256_sandbox: s("aa"),
                archive_bytes: 10,
                entries_compared: 2,
                file_set_equal: true,
                content_equal: true,
                build_ms: 1,
                upload_ms: 2,
                verify_ms: 3,
                transfer: Transfer::Stream,
                compression: Compression::None,
                wire_bytes: 10,
                tree_bytes: 4,
                sync_ms: 7,
                verifier: Verifier::Native,
                verifier_fallback: Some(s("the copy did not start")),
                stream_route: Some(s("stdin")),
                stream_fallback: Some(s("the sandbox read nothing from it")),
                archive_digest: DigestKind::Entries,
            },
            Event::SourcePin {
                sandbox_id: s("local-1"),
                commit: s("c0ffee"),
                tree_digest: s("7ree"),
                archive_sha256: s("aa"),
                files: 2,
                workdir: s("/home/sb/src"),
                implicit: false,
            },
            Event::SourceSyncFailed {
                sandbox_id: s("local-1"),
                commit: s("c0ffee"),
                reason: s("corrupt"),
            },
        ]
    }

    /// Steps and what the script prints.
    fn step_samples() -> Vec<Event> {
        vec![
            Event::CwdRefused {
                what: s("step `x`"),
                reason: s("escapes"),
            },
            Event::StepStart {
                name: s("build"),
                seq: 1,
                command: s("make"),
                sandbox_id: s("local-1"),
                cwd: s(""),
                cwd_remote: s("/home/sb/src"),
                env: vec![(s("A"), s("b"))],
                timeout_s: Some(1.5),
                retries: 1,
                allow_failure: false,
                commit: Some(s("c0ffee")),
                tree_digest: Some(s("7ree")),
            },
            Event::StepAttempt {
                name: s("build"),
                attempt: 1,
                sandbox_id: s("local-1"),
                exit: Some(0),
                signal: None,
                timed_out: false,
                cancelled: false,
                duration_ms: 5,
                stdout_log: fd("steps/001-build.stdout.log"),
                stderr_log: None,
                output_tail: OutputTail::of("compiling\nok\n", ""),
            },
            Event::StepProviderError {
                name: s("build"),
                attempt: 1,
                error: s("gone"),
                duration_ms: 5,
                stdout_log: None,
                stderr_log: None,
                output_tail: OutputTail::of("", "partial\n"),
            },
            Event::StepRefused {
                name: s("build"),
                cwd: s("../x"),
                reason: s("escapes"),
            },
            Event::StepEnd {
                name: s("build"),
                ok: true,
                exit: Some(0),
                timed_out: false,
                attempts: 1,
                duration_ms: 5,
                sandbox_id: s("local-1"),
                summary: s("exit 0, 5 ms"),
                limit: None,
            },
            Event::Print { text: s("hi") },
            Event::Debug {
                text: s("dbg"),
                line: Some(3),
            },
        ]
    }

    /// Terminal sessions (`attach`).
    fn attach_samples() -> Vec<Event> {
        vec![
            Event::AttachRefused {
                command: s("vi"),
                reason: s("escapes"),
            },
            Event::AttachStart {
                session: 1,
                command: s("vi"),
                sandbox_id: s("local-1"),
                cwd: s(""),
                cwd_remote: s("/home/sb/src"),
                cols: 80,
                rows: 24,
                term: s("xterm"),
                env: vec![],
                recording: s("terminal/session-1.cast"),
            },
            Event::AttachInput {
                session: 1,
                text: Some(s("ls\r")),
                key: None,
            },
            Event::AttachResize {
                session: 1,
                cols: 100,
                rows: 30,
            },
            Event::AttachAssert {
                session: 1,
                assert: 1,
                pattern: s("text"),
                outcome: s("pass"),
                elapsed_ms: 3,
                screen_digest: s("dd"),
                snapshot: fd("terminal/session-1-assert-1.txt"),
            },
            Event::AttachEnd {
                session: 1,
                how: s("closed"),
                exit: None,
                signal: Some(9),
                duration_ms: 40,
                recording_error: None,
                recording: fd("terminal/session-1.cast"),
            },
        ]
    }

    /// The sandbox's cleanup.
    fn cleanup_samples() -> Vec<Event> {
        vec![
            Event::CleanupVerified {
                sandbox_id: s("local-1"),
                why: s("run end"),
                get_by_id: s("not found"),
                in_inventory: false,
                inventory_count: 0,
                polls: 1,
                elapsed_ms: 4,
                saw_present_before: true,
            },
            Event::CleanupKept {
                sandbox_id: s("local-1"),
                reason: s("--keep"),
            },
            Event::CleanupFailed {
                sandbox_id: s("local-1"),
                why: s("run end"),
                error: s("still there"),
            },
            Event::CleanupNone {
                reason: s("no sandbox was provisioned"),
            },
        ]
    }

    /// A refusal, the bundle, a lost sandbox and a re-sync, then the run's end (last, as a journal ends).
    fn late_samples() -> Vec<Event> {
        vec![
            Event::BisectStart {
                good: s("c0ffee"),
                bad: s("beef"),
                commits: 2,
            },
            Event::BisectCommit {
                commit: s("d00d"),
                result: BisectResult::Skipped,
                reason: Some(s("a step exited 125 (cannot test this commit)")),
            },
            Event::BisectEnd {
                good_result: BisectResult::Passed,
                bad_result: BisectResult::Failed,
                first_changed: Some(s("beef")),
                candidates: vec![s("beef")],
                tested: 3,
                found: Some(BisectFoundCommit {
                    subject: s("set v to 9"),
                    author: s("rfs test <test@rfs.invalid>"),
                    date: s("Fri, 04 Dec 2026 23:00:00 +0100"),
                    parents: vec![s("c0ffee"), s("f00d")],
                    merge_base: Some(s("c0ffee")),
                }),
                results: vec![BisectTested {
                    commit: s("c0ffee"),
                    result: BisectResult::Passed,
                }],
            },
            Event::Refused {
                reason: s("cwd escapes the root"),
            },
            Event::BundleRedacted {
                path: s("bundle/proof.rhai"),
                sha256: s("9d1e"),
            },
            Event::SandboxLost {
                sandbox_id: s("local-1"),
                during: s("build"),
                how: s("vanished: the provider no longer knows it (removed outside rfs)"),
                ended_by: s("outside rfs"),
            },
            Event::BundleModule {
                path: s("bundle/helpers.rhai"),
                sha256: s("4e1p"),
                import: s("helpers"),
            },
            Event::ArtifactCollected {
                path: s("out"),
                files: vec![FileDigest {
                    path: s("artifacts/out/report.xml"),
                    sha256: "0".repeat(64),
                    bytes: 7,
                }],
                dirs: vec![s("artifacts/out")],
                links: vec![ArtifactLink {
                    path: s("artifacts/out/latest"),
                    target: s("report.xml"),
                }],
                skipped: vec![s("artifacts/out/fifo")],
                redacted: vec![],
                bytes: 7,
            },
            Event::ArtifactPut {
                local: s("fixtures/data.bin"),
                path: s("data.bin"),
                sha256: "1".repeat(64),
                bytes: 3,
                bundled: Some(s("bundle/put/data.bin")),
            },
            Event::SourceResync {
                sandbox_id: s("local-1"),
                from_commit: s("c0ffee"),
                from_tree_digest: s("7ree"),
                commit: s("beef"),
                tree_digest: s("7ree2"),
                added: 1,
                modified: 2,
                deleted: 0,
                shipped: 3,
                rewritten: 0,
                removed: 2,
                shipped_paths: vec![s("a"), s("b"), s("c")],
                rewritten_paths: vec![],
                removed_paths: vec![s("d"), s("e")],
                kept_untracked: 5,
                archive_sha256_local: s("ab12"),
                archive_sha256_sandbox: s("ab12"),
                archive_bytes: 10240,
                entries_compared: 40,
                contents_compared: 3,
                inspect_ms: 20,
                build_ms: 3,
                upload_ms: 4,
                apply_ms: 30,
                sync_ms: 60,
            },
            Event::RunEnd {
                outcome: s("failed"),
                reason: Some(s("step `x` failed")),
                teardown_warning: None,
            },
        ]
    }

    #[test]
    fn every_kind_round_trips_through_the_journal_shape() {
        for e in samples() {
            let (kind, payload) = e.to_kind_payload();
            assert!(!kind.is_empty());
            assert!(payload.is_object(), "{kind}");
            assert_eq!(Event::from_kind_payload(&kind, &payload).unwrap(), e);
        }
    }

    /// Journals written before environments were pinned still parse.
    #[test]
    fn a_placement_without_an_environment_still_parses() {
        let old = serde_json::json!({
            "provider": "docker", "sandbox_id": "c1", "reason": "flag",
            "labels": {}, "home": "/home/sb", "image": "busybox:1",
        });
        match Event::from_kind_payload("placement", &old).unwrap() {
            Event::Placement { environment, .. } => assert_eq!(environment, None),
            e => panic!("{e:?}"),
        }
    }

    #[test]
    fn an_unknown_kind_is_rejected() {
        assert!(Event::from_kind_payload("step.bogus", &serde_json::json!({})).is_err());
    }

    /// The journal chapter of the book lists every kind with exactly its
    /// payload fields (and no kind that does not exist).
    #[test]
    fn journal_chapter_lists_every_kind_and_field() {
        let book = include_str!("../book/src/journal.md");
        let mut documented: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for line in book.lines() {
            let cells: Vec<&str> = line.split(" | ").collect();
            if cells.len() != 3 || !cells[0].starts_with("| `") {
                continue;
            }
            let kind = cells[0].trim_start_matches("| ").trim_matches('`');
            let fields = cells[2]
                .trim_end_matches(" |")
                .split(", ")
                .map(|f| f.trim_matches('`').to_owned())
                .collect();
            documented.insert(kind.to_owned(), fields);
        }
        let mut actual: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for e in samples() {
            let (kind, payload) = e.to_kind_payload();
            let mut keys: Vec<String> = payload.as_object().unwrap().keys().cloned().collect();
            keys.sort();
            actual.insert(kind, keys);
        }
        for fields in documented.values_mut() {
            fields.sort();
        }
        assert_eq!(documented, actual);
    }
}

#[cfg(test)]
mod output_tail_tests {
    use super::OutputTail;

    #[test]
    fn a_tail_keeps_the_last_lines_within_its_bounds() {
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        let t = OutputTail::of(&text, "").unwrap();
        assert_eq!(t.stdout.lines().count(), OutputTail::LINES);
        assert!(t.stdout.starts_with("line 26\n") && t.stdout.ends_with("line 40"));
        let long = "é".repeat(OutputTail::BYTES);
        let t = OutputTail::of("", &long).unwrap();
        assert!(t.stderr.len() <= OutputTail::BYTES && t.stderr.chars().all(|c| c == 'é'));
        assert_eq!(OutputTail::of("", ""), None);
    }
}
