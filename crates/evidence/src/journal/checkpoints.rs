//! Checkpoints and forks (`checkpoint`, `checkpoint.removed`,
//! `placement.forked`, `source.from_checkpoint`) as EVIDENCE.md and
//! report.html show them: the checkpoints a run made, and the
//! checkpoint of which setup run its sandbox started from.

use std::fmt::Write as _;

use super::inert_markdown::{code, esc};
use crate::events::checkpoint_facts::{Checkpointed, Forked};
use crate::events::Event;

/// What a run's journal says of checkpoints.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoints {
    /// Checkpoints the run made, with whether each was removed (and
    /// verified gone) by it.
    pub made: Vec<(Checkpointed, Option<bool>)>,
    /// The checkpoint the run's sandbox started from.
    pub started_from: Option<Forked>,
    /// The source was bound from that checkpoint (commit), not shipped.
    pub source_from: Option<String>,
}

impl Checkpoints {
    /// Fold one fact in.
    pub fn apply(&mut self, e: &Event) {
        match e {
            Event::Checkpoint(c) => self.made.push((c.clone(), None)),
            Event::CheckpointRemoved(r) => {
                if let Some(m) = self
                    .made
                    .iter_mut()
                    .find(|(c, _)| c.checkpoint_id == r.checkpoint_id)
                {
                    m.1 = Some(r.verified);
                }
            }
            Event::PlacementForked(f) => self.started_from = Some(f.clone()),
            Event::SourceFromCheckpoint(s) => self.source_from = Some(s.commit.clone()),
            _ => {}
        }
    }

    /// The one line a reader needs: where the sandbox came from.
    pub fn started_from_text(&self) -> Option<String> {
        self.started_from.as_ref().map(|f| {
            format!(
                "checkpoint {} ({}) of setup run {} (its journal head {} before the checkpoint; the setup's journal is setup/journal.jsonl in this bundle); forked in {} ms: {}",
                f.checkpoint_id,
                f.checkpoint_name,
                f.setup_run_id,
                f.setup_journal_head,
                f.fork_ms,
                f.how
            )
        })
    }
}

/// EVIDENCE.md's section on checkpoints.
pub fn evidence(s: &mut String, c: &Checkpoints) {
    if c.made.is_empty() && c.started_from.is_none() {
        return;
    }
    let _ = writeln!(s, "\n## Checkpoints\n");
    if let Some(f) = &c.started_from {
        let _ = writeln!(
            s,
            "- This run's sandbox {} started from checkpoint {} ({}) of setup run {}, whose journal head before the checkpoint was {}; the setup's journal is `setup/journal.jsonl` in this bundle (sha256 {}), checked by `rfs verify`. Forked in {} ms: {}.",
            code(&f.sandbox_id),
            code(&f.checkpoint_id),
            code(&f.checkpoint_name),
            code(&f.setup_run_id),
            code(&f.setup_journal_head),
            code(&f.setup_journal.sha256),
            f.fork_ms,
            esc(&f.how)
        );
        if !f.setup_caches.is_empty() {
            let _ = writeln!(
                s,
                "- Before the checkpoint the setup run had used {}: this run inherits what it did, so it is not reproducible from the commit alone.",
                esc(&super::caches::setup_caches_text(&f.setup_caches))
            );
        }
        if let Some(commit) = &c.source_from {
            let _ = writeln!(
                s,
                "- The source (commit {}) came from the checkpoint: its tree was synced and verified by the setup run and was not shipped again; what the setup's steps did to it is in the setup's journal.",
                code(commit)
            );
        }
    }
    for (m, removed) in &c.made {
        let pin = match &m.commit {
            Some(commit) => format!("source commit {}", code(commit)),
            None => "no source bound".to_owned(),
        };
        let _ = writeln!(
            s,
            "- checkpoint {} ({}{}) of sandbox {}: {}, journal head {} ({} lines), {pin}, {} ms; {}",
            code(&m.checkpoint_id),
            code(&m.name),
            if m.implicit { ", implicit" } else { "" },
            code(&m.sandbox_id),
            esc(&m.how),
            code(&m.journal_head),
            m.journal_lines,
            m.ms,
            match removed {
                Some(true) => "removed, verified gone",
                Some(false) => "removal NOT verified",
                None => "kept for the suite's proofs",
            }
        );
    }
}
