//! The `checkpoint link` check of `rfs verify` (#36): a run whose
//! sandbox started from a setup run's checkpoint (`placement.forked`)
//! carries that setup run's journal as `setup/journal.jsonl`; the check
//! holds the link — the copy is the one journaled (sha256), its chain is
//! intact and complete, it is the named setup run's, it has the named
//! checkpoint whose recorded head is the head of the line before it and
//! the head the fork names, and, when the setup run was signed, its
//! signature (`setup/journal.sig`) is valid against the same trust.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::events::checkpoint_facts::{Checkpointed, Forked};
use crate::events::{Event, FileDigest};
use crate::journal::{self, GENESIS};
use crate::seal::Trust;

/// The folder of a bundle that holds the setup run's journal.
pub const SETUP_DIR: &str = "setup";
/// The files [`SETUP_DIR`] may hold.
pub const SETUP_FILES: [&str; 2] = ["setup/journal.jsonl", "setup/journal.sig"];

/// Check the link of a run's journal `events` (bundle `out`) to its
/// setup run; `Err` says what does not hold.
pub fn check(out: &Path, events: &[Event], trust: &Trust) -> Result<String, String> {
    let forks: Vec<&Forked> = events
        .iter()
        .filter_map(|e| match e {
            Event::PlacementForked(f) => Some(f),
            _ => None,
        })
        .collect();
    let f = match forks.as_slice() {
        [] if out.join(SETUP_DIR).exists() => {
            return Err(format!(
                "{SETUP_DIR}/ is in the output directory but no placement.forked fact names a setup run (added after the run)"
            ))
        }
        [] if events.iter().any(|e| matches!(e, Event::SourceFromCheckpoint(_))) => {
            return Err(
                "a source.from_checkpoint fact but no placement.forked: the run's sandbox did not start from a checkpoint".into(),
            )
        }
        [] => return Ok("none (the run's sandbox did not start from a checkpoint)".into()),
        [f] => *f,
        _ => return Err("more than one placement.forked fact: a run has one sandbox".into()),
    };
    let text = journaled_setup(out, &f.setup_journal)?;
    let (chain, heads) =
        journal::chain::verify_text(&text).map_err(|e| format!("{}: {e}", SETUP_FILES[0]))?;
    if !chain.complete {
        return Err(format!(
            "{} does not end with run.end: the setup run had not ended",
            SETUP_FILES[0]
        ));
    }
    let setup_events = parse(&text)?;
    let Some(Event::RunStart {
        run_id,
        signing_key,
        ..
    }) = setup_events.first()
    else {
        return Err(format!("{} does not start with run.start", SETUP_FILES[0]));
    };
    if *run_id != f.setup_run_id {
        return Err(format!(
            "the fork names setup run {} but {} is run {run_id}'s",
            f.setup_run_id, SETUP_FILES[0]
        ));
    }
    let c = forked_checkpoint(f, &setup_events, &heads)?;
    check_source_binding(events, c)?;
    let caches = crate::events::checkpoint_facts::caches_before(&setup_events, &c.checkpoint_id);
    if f.setup_caches != caches {
        let names = |v: &[crate::events::checkpoint_facts::SetupCache]| {
            v.iter()
                .map(|c| c.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        return Err(format!(
            "the fork names the caches [{}] as mounted by the setup before checkpoint {}, but the setup journal records [{}]",
            names(&f.setup_caches),
            c.checkpoint_id,
            names(&caches)
        ));
    }
    let signed = crate::seal::check_signature(
        &out.join(SETUP_DIR),
        text.as_bytes(),
        signing_key.as_deref(),
        trust,
    )
    .map_err(|e| format!("the setup run's signature ({}): {e}", SETUP_FILES[1]))?;
    Ok(format!(
        "started from checkpoint {} of setup run {run_id} at its journal head {}; {} chains intact and ended; setup signature: {signed}",
        f.checkpoint_id, c.journal_head, SETUP_FILES[0]
    ))
}

/// `setup/journal.jsonl`, read once: the text the fork journaled
/// (`journaled`: its sha256 and size), or why it is not.
fn journaled_setup(out: &Path, journaled: &FileDigest) -> Result<String, String> {
    if journaled.path != SETUP_FILES[0] {
        return Err(format!(
            "placement.forked names {:?} as the setup's journal; it is always {}",
            journaled.path, SETUP_FILES[0]
        ));
    }
    let max = journaled.bytes.min(crate::out_dir::MAX_RECORD_BYTES);
    let bytes = crate::out_dir::read_regular(out, SETUP_FILES[0], max)
        .map_err(|e| format!("cannot read {}: {e}", SETUP_FILES[0]))?;
    let sha256 = hex::encode(Sha256::digest(&bytes));
    if sha256 != journaled.sha256 || bytes.len() as u64 != journaled.bytes {
        return Err(format!(
            "{} is not the setup journal the fork journaled (sha256 {}, {} bytes; now {sha256}, {} bytes)",
            SETUP_FILES[0],
            journaled.sha256,
            journaled.bytes,
            bytes.len()
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("{}: {e}", SETUP_FILES[0]))
}

/// The setup journal's `checkpoint` fact the fork names, once it holds:
/// recorded at the head of the line before it, and named by the fork
/// with that head, name and provider.
fn forked_checkpoint<'a>(
    f: &Forked,
    setup_events: &'a [Event],
    heads: &[String],
) -> Result<&'a Checkpointed, String> {
    let found = setup_events.iter().enumerate().find_map(|(at, e)| match e {
        Event::Checkpoint(c) if c.checkpoint_id == f.checkpoint_id => Some((at, c)),
        _ => None,
    });
    let Some((at, c)) = found else {
        return Err(format!(
            "setup run {} made no checkpoint {}",
            f.setup_run_id, f.checkpoint_id
        ));
    };
    let before = if at == 0 { GENESIS } else { &heads[at - 1] };
    if c.journal_head != before || c.journal_lines != at as u64 {
        return Err(format!(
            "checkpoint {} records journal head {} ({} lines) but the setup journal's head before it is {before} ({at} lines)",
            c.checkpoint_id, c.journal_head, c.journal_lines
        ));
    }
    if f.setup_journal_head != c.journal_head
        || f.checkpoint_name != c.name
        || f.provider != c.provider
    {
        return Err(format!(
            "the fork names checkpoint {} ({}) on {} at setup journal head {}, but the setup journal records it as ({}) on {} at head {}",
            f.checkpoint_id, f.checkpoint_name, f.provider, f.setup_journal_head, c.name, c.provider, c.journal_head
        ));
    }
    Ok(c)
}

/// Every `source.from_checkpoint` of the run binds the checkpoint `c`
/// the sandbox started from, at the commit and tree the setup journal
/// records for it (never another commit passed off over its tree).
fn check_source_binding(events: &[Event], c: &Checkpointed) -> Result<(), String> {
    for e in events {
        let Event::SourceFromCheckpoint(s) = e else {
            continue;
        };
        let holds = s.checkpoint_id == c.checkpoint_id
            && c.commit.as_deref() == Some(s.commit.as_str())
            && c.tree_digest.as_deref() == Some(s.tree_digest.as_str());
        if !holds {
            return Err(format!(
                "source.from_checkpoint binds commit {} (tree {}) from checkpoint {}, but the setup journal records checkpoint {} at commit {} (tree {})",
                s.commit,
                s.tree_digest,
                s.checkpoint_id,
                c.checkpoint_id,
                c.commit.as_deref().unwrap_or("none (no source bound)"),
                c.tree_digest.as_deref().unwrap_or("none")
            ));
        }
    }
    Ok(())
}

/// The events of a journal's text.
fn parse(text: &str) -> Result<Vec<Event>, String> {
    text.split_terminator('\n')
        .enumerate()
        .map(|(i, raw)| {
            let line: journal::Line = serde_json::from_str(raw)
                .map_err(|e| format!("{} line {}: {e}", SETUP_FILES[0], i + 1))?;
            Event::from_kind_payload(&line.kind, &line.payload)
                .map_err(|e| format!("{} line {}: {e}", SETUP_FILES[0], i + 1))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run_start() -> Event {
        match crate::events::catalog::samples().remove(0) {
            Event::RunStart {
                run_id,
                script,
                invocation_dir,
                out_dir,
                provider,
                provider_reason,
                rfs_version,
                vars,
                keep,
                ..
            } => Event::RunStart {
                run_id,
                script,
                invocation_dir,
                out_dir,
                provider,
                provider_reason,
                rfs_version,
                vars,
                keep,
                bundle: None,
                signing_key: None,
                replay_of: None,
            },
            e => panic!("the first sample is run.start, not {e:?}"),
        }
    }

    /// A bundle whose `setup/journal.jsonl` records checkpoint `cp-1`
    /// with head `recorded` (None: the true head), and the fork's fact.
    fn bundle(recorded: Option<&str>) -> (tempfile::TempDir, Forked) {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join(SETUP_DIR)).unwrap();
        let mut j = journal::Journal::create(&d.path().join(SETUP_FILES[0])).unwrap();
        j.append(&run_start()).unwrap();
        j.append(&Event::ProviderReady {
            provider: "local".into(),
        })
        .unwrap();
        let head = j.head().to_owned();
        j.append(&Event::Checkpoint(Checkpointed {
            name: "deps".into(),
            checkpoint_id: "cp-1".into(),
            provider: "local".into(),
            sandbox_id: "local-1".into(),
            how: "copy".into(),
            journal_head: recorded.unwrap_or(&head).to_owned(),
            journal_lines: 2,
            commit: Some("c0ffee".into()),
            tree_digest: Some("7ree".into()),
            implicit: false,
            ms: 1,
        }))
        .unwrap();
        j.append(&Event::RunEnd {
            outcome: "completed".into(),
            reason: None,
            teardown_warning: None,
        })
        .unwrap();
        let fork = Forked {
            sandbox_id: "local-2".into(),
            checkpoint_id: "cp-1".into(),
            checkpoint_name: "deps".into(),
            provider: "local".into(),
            setup_run_id: "r1".into(),
            setup_journal_head: recorded.unwrap_or(&head).to_owned(),
            setup_journal: journal::file_digest(d.path(), SETUP_FILES[0]).unwrap(),
            how: "overlayfs".into(),
            fork_ms: 1,
            setup_caches: vec![],
        };
        (d, fork)
    }

    #[test]
    fn a_fork_whose_setup_journal_holds_its_checkpoint_at_its_head_is_linked() {
        let (d, f) = bundle(None);
        let ok = check(d.path(), &[Event::PlacementForked(f)], &Trust::default()).unwrap();
        assert!(ok.contains("checkpoint cp-1 of setup run r1"), "{ok}");
    }

    /// A fork that drops (or invents) the caches its setup mounted before
    /// the checkpoint would pass a not reproducible proof off as one.
    #[test]
    fn a_fork_naming_other_caches_than_its_setups_is_a_forged_link() {
        let (d, mut f) = bundle(None);
        f.setup_caches = vec![crate::events::checkpoint_facts::SetupCache {
            name: "pip".into(),
            path: "~/.cache/pip".into(),
            sha256: "1".repeat(64),
        }];
        let e = check(d.path(), &[Event::PlacementForked(f)], &Trust::default()).unwrap_err();
        assert!(e.contains("the setup journal records []"), "{e}");
    }

    #[test]
    fn a_checkpoint_recording_a_head_its_journal_never_had_is_a_forged_link() {
        let forged = "f".repeat(64);
        let (d, f) = bundle(Some(&forged));
        let e = check(d.path(), &[Event::PlacementForked(f)], &Trust::default()).unwrap_err();
        assert!(e.contains("records journal head"), "{e}");
    }

    #[test]
    fn a_fork_naming_another_head_run_or_checkpoint_is_a_forged_link() {
        for forge in [
            |f: &mut Forked| f.setup_journal_head = "0".repeat(64),
            |f: &mut Forked| f.setup_run_id = "r2".into(),
            |f: &mut Forked| f.checkpoint_id = "cp-2".into(),
        ] {
            let (d, mut f) = bundle(None);
            forge(&mut f);
            assert!(check(d.path(), &[Event::PlacementForked(f)], &Trust::default()).is_err());
        }
        let (d, _) = bundle(None);
        let e = check(d.path(), &[], &Trust::default()).unwrap_err();
        assert!(e.contains("no placement.forked"), "{e}");
    }

    /// A `source.from_checkpoint` fact binding `commit` (tree `tree`)
    /// from checkpoint `cp-1`.
    fn from_checkpoint(commit: &str, tree: &str) -> Event {
        Event::SourceFromCheckpoint(crate::events::checkpoint_facts::SourceFromCheckpoint {
            sandbox_id: "local-2".into(),
            checkpoint_id: "cp-1".into(),
            commit: commit.into(),
            tree_digest: tree.into(),
            files: 1,
            workdir: "/home/src".into(),
        })
    }

    #[test]
    fn a_source_bound_from_the_checkpoint_at_another_commit_is_a_forged_link() {
        let (d, f) = bundle(None);
        let linked = |e: Event| {
            check(
                d.path(),
                &[Event::PlacementForked(f.clone()), e],
                &Trust::default(),
            )
        };
        assert!(linked(from_checkpoint("c0ffee", "7ree")).is_ok());
        for (commit, tree) in [("bad", "7ree"), ("c0ffee", "bad")] {
            let e = linked(from_checkpoint(commit, tree)).unwrap_err();
            assert!(
                e.contains("setup journal records checkpoint cp-1 at commit c0ffee"),
                "{e}"
            );
        }
        let bare = tempfile::tempdir().unwrap();
        let e = check(
            bare.path(),
            &[from_checkpoint("c0ffee", "7ree")],
            &Trust::default(),
        )
        .unwrap_err();
        assert!(e.contains("no placement.forked"), "{e}");
    }
}
