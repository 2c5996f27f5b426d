//! Samples of the run's start, its source and its placement.

use super::*;

/// The run's start and its provider.
pub(super) fn run_start_samples() -> Vec<Event> {
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
pub(super) fn source_resolve_samples() -> Vec<Event> {
    vec![
        Event::SourceResolved {
            repo: s("/repo"),
            rev: s("HEAD"),
            commit: s("c0ffee"),
            tree_digest: s("7ree"),
            subdir: None,
            implicit: false,
            dirty_paths_not_shipped: vec![],
            own_outputs_ignored: vec![s("junit.xml")],
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
pub(super) fn placement_samples() -> Vec<Event> {
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
pub(super) fn source_sync_samples() -> Vec<Event> {
    vec![
        Event::SourceVerify(crate::events::SourceVerified {
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
        }),
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
