//! One sample of every kind, for the tests that keep the book and the
//! renderer in step with the enum.
use std::collections::BTreeMap;

use super::*;

mod late;
mod start;
mod steps;

use late::{cleanup_samples, late_samples};
use start::{placement_samples, run_start_samples, source_resolve_samples, source_sync_samples};
use steps::{attach_samples, step_samples};

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
        Event::SourceVerify(..) => 10,
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
        Event::SourceResync(..) => 34,
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
        Event::Checkpoint(..) => 53,
        Event::CheckpointRemoved(..) => 54,
        Event::PlacementForked(..) => 55,
        Event::SourceFromCheckpoint(..) => 56,
        Event::ArtifactAbsent(..) => 57,
        Event::HostMount(..) => 58,
    }
}
const COUNT: usize = 59;

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
        super::host_mount_facts::samples(),
        placement_samples(),
        super::checkpoint_facts::samples(),
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
    let book = include_str!("../../../../../book/src/journal.md");
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
