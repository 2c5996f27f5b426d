//! The schema of the journal: [`Event`], one variant per kind of fact.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::*;

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
        /// Untracked outputs the person named for rfs (not dirt).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        own_outputs_ignored: Vec<String>,
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
        isolation: Option<sandbox_facts::IsolationFact>,
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
        isolation: Option<sandbox_facts::IsolationFact>,
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
    SourceVerify(SourceVerified),
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
    SourceResync(SourceResynced),
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
        /// Output past the run's log bound, not kept (absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_cut: Option<OutputCut>,
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
        /// Output past the run's log bound, not kept (absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_cut: Option<OutputCut>,
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
        /// What the step used of its sandbox, where the provider says
        /// (`local`: memory and process peaks, disk used).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<sandbox_facts::Usage>,
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
        /// `--trust-ends`: the ends were not re-tested; their results
        /// (good passes, bad fails) are taken from the person's word.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ends_trusted: bool,
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
        /// `collect(path, #{ junit: true })`: the file is a JUnit report
        /// the tests wrote (read when collected; its cases go into rfs's
        /// JUnit views), with its counts.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        junit: Option<JunitCounts>,
    },
    /// `collect(path)` found nothing at `path`.
    #[serde(rename = "artifact.absent")]
    ArtifactAbsent(super::artifact_facts::ArtifactAbsent),
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
    /// `spawn(name, command)` started a background process (its command
    /// through the same cwd check as a step's; `seq` numbers its logs
    /// with the steps').
    #[serde(rename = "spawn.start")]
    SpawnStart {
        name: String,
        seq: u32,
        command: String,
        sandbox_id: String,
        cwd: String,
        cwd_remote: String,
        env: Vec<(String, String)>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        commit: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tree_digest: Option<String>,
    },
    /// `wait_for` saw what it waited for: `on` is `line` (a line of the
    /// process's output contained `target`) or `port` (a probe run in
    /// the sandbox found a listening TCP socket on port `target` of a
    /// loopback or any address, in the sandbox's own network namespace).
    #[serde(rename = "spawn.ready")]
    SpawnReady {
        name: String,
        on: String,
        target: String,
        after_ms: u64,
    },
    /// `wait_for` did not see it: `why` (timed out, or the process
    /// ended first), with the tail of the process's output so far.
    #[serde(rename = "spawn.wait_failed")]
    SpawnWaitFailed {
        name: String,
        on: String,
        target: String,
        timeout_s: f64,
        why: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tail: Option<OutputTail>,
    },
    /// A background process is over: `by` says who ended it (`stop()`,
    /// `teardown`, `interrupt`, `refused`, or `itself` when it had ended before), `group` is its
    /// process group in the sandbox and `group_gone` whether a probe in
    /// the sandbox found none of its processes left (`null`: the group
    /// was never known).
    #[serde(rename = "spawn.end")]
    SpawnEnd {
        name: String,
        by: String,
        exit: Option<i32>,
        signal: Option<i32>,
        group: Option<i32>,
        group_gone: Option<bool>,
        duration_ms: u64,
        stdout_log: Option<FileDigest>,
        stderr_log: Option<FileDigest>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tail: Option<OutputTail>,
        /// Output past the run's log bound, not kept (absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_cut: Option<OutputCut>,
        /// What the provider said when it could not run or wait on it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// `service(name, #{ image, env, ready, cmd })` started a container
    /// of `image` (pinned by content: `image_pin`, as the sandbox's image
    /// is) as `container_id`, in sandbox `sandbox_id`'s network namespace
    /// (`network`, the engine's words); `seq` numbers its logs
    /// (`steps/NNN-service-NAME.*.log`) with the steps'.
    #[serde(rename = "service.start")]
    ServiceStart {
        name: String,
        seq: u32,
        image: String,
        image_pin: ImagePin,
        container_id: String,
        sandbox_id: String,
        network: String,
        env: Vec<(String, String)>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cmd: Option<Vec<String>>,
    },
    /// The service's `ready` condition held: `on` is `line` (a line of
    /// its output contained `target`) or `port` (a probe in the sandbox,
    /// whose network it shares, found port `target` listening).
    #[serde(rename = "service.ready")]
    ServiceReady {
        name: String,
        on: String,
        target: String,
        after_ms: u64,
    },
    /// The service never became ready: `why`, with its output's tail.
    #[serde(rename = "service.wait_failed")]
    ServiceWaitFailed {
        name: String,
        on: String,
        target: String,
        timeout_s: f64,
        why: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tail: Option<OutputTail>,
    },
    /// The service is over: `by` says who ended it (`stop()`,
    /// `teardown`, `interrupt`, `not ready`, `refused`), `exit` its container's exit
    /// code, `gone` whether the engine no longer knows its container
    /// (removed and verified).
    #[serde(rename = "service.end")]
    ServiceEnd {
        name: String,
        by: String,
        exit: Option<i32>,
        gone: bool,
        duration_ms: u64,
        stdout_log: Option<FileDigest>,
        stderr_log: Option<FileDigest>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_tail: Option<OutputTail>,
        /// Output past the run's log bound, not kept (absent: none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output_cut: Option<OutputCut>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A cache kept by rfs between runs was mounted read-write into the
    /// sandbox at `path` (under its home): its folder on this machine,
    /// what it held (`sha256` over its entries, `files`, `bytes`), and
    /// how runs sharing it take turns (`lock`: an exclusive flock held
    /// until after the sandbox is destroyed; `waited_ms` for another run).
    #[serde(rename = "cache.mount")]
    CacheMount {
        name: String,
        path: String,
        dir: String,
        sha256: String,
        files: u64,
        bytes: u64,
        lock: String,
        waited_ms: u64,
    },
    /// What the cache held after the sandbox was destroyed; `emptied`
    /// when it was over `max_bytes` (the next run starts empty) or could
    /// not be made fit to keep. `cleaned`: what rfs removed or narrowed
    /// so that nothing the sandbox left there keeps a device, fifo or
    /// socket, a setuid/setgid bit, a world-writable mode or a foreign
    /// owner (absent: nothing; journals before it have none).
    #[serde(rename = "cache.end")]
    CacheEnd {
        name: String,
        sha256: String,
        files: u64,
        bytes: u64,
        changed: bool,
        max_bytes: u64,
        emptied: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cleaned: Option<String>,
        /// Every entry it holds (files, folders, links): each is charged
        /// a 4 KiB block against `max_bytes`, so a million empty files
        /// are not "0 bytes".
        #[serde(default, skip_serializing_if = "Option::is_none")]
        entries: Option<u64>,
    },
    /// One connection attempt through rfs's egress proxy (#34): the
    /// destination, allowed or refused and by which rule, bytes each way.
    #[serde(rename = "net.connect")]
    NetConnect(network_facts::Connection),
    /// `checkpoint(name)`: the sandbox's state after the steps so far (#36).
    #[serde(rename = "checkpoint")]
    Checkpoint(checkpoint_facts::Checkpointed),
    /// A checkpoint removed (verified gone, or why not).
    #[serde(rename = "checkpoint.removed")]
    CheckpointRemoved(checkpoint_facts::CheckpointRemoved),
    /// The run's sandbox started from a setup run's checkpoint.
    #[serde(rename = "placement.forked")]
    PlacementForked(checkpoint_facts::Forked),
    /// The source bound from the checkpoint the sandbox started from.
    #[serde(rename = "source.from_checkpoint")]
    SourceFromCheckpoint(checkpoint_facts::SourceFromCheckpoint),
    /// A host folder the person mounted read-only (`--mount-ro`).
    #[serde(rename = "host.mount")]
    HostMount(super::host_mount_facts::HostMounted),
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
