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
        Event::SpawnStart { .. } => 42,
        Event::SpawnReady { .. } => 43,
        Event::SpawnWaitFailed { .. } => 44,
        Event::SpawnEnd { .. } => 45,
        Event::CacheMount { .. } => 46,
        Event::CacheEnd { .. } => 47,
        Event::NetConnect(..) => 48,
        Event::ServiceStart { .. } => 49,
        Event::ServiceReady { .. } => 50,
        Event::ServiceWaitFailed { .. } => 51,
        Event::ServiceEnd { .. } => 52,
    }
}
const COUNT: usize = 53;

/// An owned string (the samples' shorthand).
fn s(x: &str) -> String {
    x.to_owned()
}

/// One sample per kind, in a fixed order that ends with the run's end
/// as a journal does (the summary and evidence tests fold them in
/// sequence).
pub fn samples() -> Vec<Event> {
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
                services: [(
                    s("db"),
                    ImagePin {
                        id: s("sha256:5e1c"),
                        repo_digests: vec![],
                    },
                )]
                .into(),
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
        Event::NetConnect(crate::events::network_facts::Connection {
            name: Some(s("metadata.internal")),
            address: Some(s("169.254.169.254")),
            port: 80,
            allowed: false,
            rule: s("default: link-local (169.254.0.0/16, the cloud metadata endpoint)"),
            via: s("http"),
            bytes_up: 0,
            bytes_down: 0,
            duration_ms: 1,
            step: Some(s("build")),
            error: None,
        }),
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
            usage: None,
        },
        Event::CacheMount {
            name: s("pip"),
            path: s("~/.cache/pip"),
            dir: s("/state/caches/local/repo-0123456789ab/pip"),
            sha256: "2".repeat(64),
            files: 3,
            bytes: 1200,
            lock: s("exclusive flock until after teardown"),
            waited_ms: 0,
        },
        Event::SpawnStart {
            name: s("srv"),
            seq: 2,
            command: s("httpd -f -p 8000"),
            sandbox_id: s("local-1"),
            cwd: s(""),
            cwd_remote: s("/home/sb/src"),
            env: vec![],
            commit: Some(s("c0ffee")),
            tree_digest: Some(s("7ree")),
        },
        Event::SpawnReady {
            name: s("srv"),
            on: s("port"),
            target: s("8000"),
            after_ms: 40,
        },
        Event::SpawnWaitFailed {
            name: s("srv"),
            on: s("line"),
            target: s("Listening"),
            timeout_s: 2.0,
            why: s("timed out"),
            output_tail: OutputTail::of("starting\n", ""),
        },
        Event::SpawnEnd {
            name: s("srv"),
            by: s("stop()"),
            exit: None,
            signal: Some(9),
            group: Some(42),
            group_gone: Some(true),
            duration_ms: 900,
            stdout_log: fd("steps/002-spawn-srv.stdout.log"),
            stderr_log: None,
            output_tail: OutputTail::of("Listening\n", ""),
            error: Some(s("the toolbox stopped answering")),
        },
        Event::ServiceStart {
            name: s("db"),
            seq: 3,
            image: s("postgres:16"),
            image_pin: ImagePin {
                id: s("sha256:5e1c"),
                repo_digests: vec![],
            },
            container_id: s("c0ffee01"),
            sandbox_id: s("local-1"),
            network: s("container:local-1"),
            env: vec![(s("POSTGRES_PASSWORD"), s("[REDACTED]"))],
            cmd: Some(vec![s("postgres"), s("-c"), s("fsync=off")]),
        },
        Event::ServiceReady {
            name: s("db"),
            on: s("port"),
            target: s("5432"),
            after_ms: 800,
        },
        Event::ServiceWaitFailed {
            name: s("db"),
            on: s("line"),
            target: s("ready to accept"),
            timeout_s: 5.0,
            why: s("timed out after 5 s"),
            output_tail: OutputTail::of("initdb\n", ""),
        },
        Event::ServiceEnd {
            name: s("db"),
            by: s("teardown"),
            exit: Some(0),
            gone: true,
            duration_ms: 2000,
            stdout_log: fd("steps/003-service-db.stdout.log"),
            stderr_log: None,
            output_tail: OutputTail::of("ready to accept connections\n", ""),
            error: Some(s("the engine said: container is restarting")),
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
        Event::CacheEnd {
            name: s("pip"),
            sha256: "3".repeat(64),
            files: 4,
            bytes: 1500,
            changed: true,
            max_bytes: 2048,
            emptied: false,
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
            junit: Some(JunitCounts {
                tests: 3,
                failures: 1,
                errors: 0,
                skipped: 0,
            }),
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
    let book = include_str!("../../../../book/src/journal.md");
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
