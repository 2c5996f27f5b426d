//! Samples of the cleanup and of what comes late in a run (artifacts,
//! bisect, spawns, caches, network, the run's end).

use super::*;

/// The sandbox's cleanup.
pub(super) fn cleanup_samples() -> Vec<Event> {
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
pub(super) fn late_samples() -> Vec<Event> {
    vec![
        Event::BisectStart {
            good: s("c0ffee"),
            bad: s("beef"),
            commits: 2,
            ends_trusted: true,
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
            cleaned: Some(s(
                "removed 1 device, fifo or socket; narrowed the mode of 2 entries",
            )),
            entries: Some(6),
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
        Event::ArtifactAbsent(crate::events::artifact_facts::ArtifactAbsent {
            path: s("reports/junit.xml"),
            optional: false,
            step: Some(s("tests")),
        }),
        Event::ArtifactPut {
            local: s("fixtures/data.bin"),
            path: s("data.bin"),
            sha256: "1".repeat(64),
            bytes: 3,
            bundled: Some(s("bundle/put/data.bin")),
        },
        Event::SourceResync(crate::events::SourceResynced {
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
        }),
        Event::RunEnd {
            outcome: s("failed"),
            reason: Some(s("step `x` failed")),
            teardown_warning: None,
        },
    ]
}
