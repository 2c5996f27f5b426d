//! Setup once, fork per proof (#36), in a run: `checkpoint(name)` keeps
//! the sandbox's state through the provider's [`Fork`] capability and
//! journals it (`checkpoint`) with the journal's head at that point and
//! the source pin in force; a run started from a setup run's checkpoint
//! ([`StartFrom`]) gets its sandbox as a fork (`placement.forked`, the
//! setup's journal carried in its bundle as `setup/journal.jsonl`) and
//! binds the checkpoint's source without shipping it again
//! (`source.from_checkpoint`) — a different commit is refused, never
//! silently served the checkpoint's tree.
//!
//! A suite's setup run hands its checkpoints to the suite
//! ([`CheckpointSink`]), which removes them at its end; any other run
//! removes the checkpoints it made at its own end, verified gone.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{BoundSource, Run, SourcePin};
use rfs_evidence::error::Result;
use rfs_evidence::events::checkpoint_facts::{
    CheckpointRemoved, Checkpointed, Forked as ForkedFact,
};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::fork::{self, Checkpoint, Fork};
use rfs_sandbox::provider::{labels, CreateSpec, Provider, ProviderResult, SandboxInfo};

/// A checkpoint a run made: the provider's handle, the journaled fact
/// and the source bound when it was made.
#[derive(Debug, Clone)]
pub(crate) struct MadeCheckpoint {
    pub(crate) checkpoint: Checkpoint,
    pub(crate) fact: Checkpointed,
    pub(crate) source: Option<BoundSource>,
}

/// Where a suite's setup run leaves its checkpoints (the suite removes
/// them; the run does not), and the sandboxes they hold (a Daytona
/// fork's parent: the suite destroys it right after the checkpoint).
#[derive(Debug, Default)]
pub(crate) struct CheckpointSink(Mutex<Vec<MadeCheckpoint>>, Mutex<Vec<String>>);

impl CheckpointSink {
    pub(crate) fn all(&self) -> Vec<MadeCheckpoint> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    /// The sandboxes the checkpoints hold, to destroy after them.
    pub(crate) fn held(&self) -> Vec<String> {
        self.1.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn hold(&self, sandbox_id: &str) {
        self.1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(sandbox_id.to_owned());
    }
}

/// What a run's sandbox starts from: a setup run's checkpoint.
#[derive(Debug, Clone)]
pub(crate) struct StartFrom {
    pub(crate) made: MadeCheckpoint,
    pub(crate) setup_run_id: String,
    /// The setup run's bundle (its journal is copied from there).
    pub(crate) setup_out: PathBuf,
    /// `rfs bisect --setup`: a `sync_source()` of another commit moves
    /// the checkpoint's source there by a verified re-sync (see
    /// [`Run::adopt_checkpoint_source`]) instead of being refused.
    pub(crate) resync_to_other_commits: bool,
}

/// A checkpoint's name: what a script may call it.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
}

impl Run {
    fn fork_capability(&self) -> Result<&dyn Fork> {
        self.cfg
            .provider
            .forking()
            .ok_or_else(|| self.refuse(fork::unsupported(self.cfg.provider.name())))
    }

    /// `checkpoint(name)`: keep the sandbox's state after the steps so
    /// far; returns the checkpoint's id.
    pub(crate) fn checkpoint(&self, name: &str, implicit: bool) -> Result<String> {
        self.check_cancelled()?;
        if !valid_name(name) {
            return Err(self.refuse(format!(
                "checkpoint name {name:?} refused: 1 to 64 letters, digits, `.`, `_` or `-`"
            )));
        }
        self.refuse_secret_in("a checkpoint name", name)?;
        let fork = self.fork_capability()?;
        let sb = self.ensure_sandbox()?;
        let mut l = rfs_sandbox::provider::owner::owner_labels();
        l.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
        l.insert(labels::RUN_ID.into(), self.cfg.run_id.clone());
        l.insert(fork::CHECKPOINT_LABEL.into(), name.to_owned());
        l.insert(
            labels::STARTED_AT.into(),
            rfs_evidence::journal::now_rfc3339(),
        );
        let started = Instant::now();
        let cp = self
            .block_on(fork.checkpoint(&sb.id, name, &l))
            .map_err(|e| self.refuse(format!("cannot checkpoint sandbox {}: {e}", sb.id)))?;
        if let Err(e) = self.within_disk_limit(name, &cp) {
            let p = self.cfg.provider.clone();
            let deadline = self.cfg.cleanup_deadline;
            self.block_on(remove_verified(p.as_ref(), &cp.id, deadline));
            return Err(e);
        }
        let source = self.state().source.clone();
        let ms = super::ms(started.elapsed().as_millis());
        let fact = self.record_at_head(|head, lines| Checkpointed {
            name: name.to_owned(),
            checkpoint_id: cp.id.clone(),
            provider: self.cfg.provider.name().to_owned(),
            sandbox_id: sb.id.clone(),
            how: cp.how.clone(),
            journal_head: head.to_owned(),
            journal_lines: lines,
            commit: source.as_ref().map(|s| s.pin.commit.clone()),
            tree_digest: source.as_ref().map(|s| s.pin.tree_digest.clone()),
            implicit,
            ms,
        });
        let fact = match fact {
            Ok(f) => f,
            Err(e) => {
                // Not journaled: not kept either (nothing would remove it).
                let p = self.cfg.provider.clone();
                let deadline = self.cfg.cleanup_deadline;
                self.block_on(remove_verified(p.as_ref(), &cp.id, deadline));
                return Err(e);
            }
        };
        let made = MadeCheckpoint {
            checkpoint: cp.clone(),
            fact,
            source,
        };
        match &self.cfg.checkpoint_sink {
            Some(sink) => sink.0.lock().unwrap_or_else(|p| p.into_inner()).push(made),
            None => self.state().checkpoints.push(made),
        }
        Ok(cp.id)
    }

    /// A run's checkpoints are disk on this machine beyond its sandbox:
    /// together they may keep no more than the run's disk limit (the
    /// person's `--max-disk`, or rfs's default cap, or less as the script
    /// asks), or a script could fill the host by checkpointing again and
    /// again.
    fn within_disk_limit(&self, name: &str, new: &Checkpoint) -> Result<()> {
        use rfs_sandbox::provider::limits::{ceiling_flag, LimitKind};
        let Some(bytes) = new.host_bytes else {
            return Ok(());
        };
        let opts = self.state().sandbox_opts.clone().unwrap_or_default();
        let limits = self.isolation_request(&opts)?.limits;
        let Some(limit) = limits.get(LimitKind::Disk) else {
            return Ok(());
        };
        let kept: u64 = self
            .made_checkpoints()
            .iter()
            .filter_map(|m| m.checkpoint.host_bytes)
            .fold(bytes, u64::saturating_add);
        if kept <= limit.value {
            return Ok(());
        }
        Err(self.refuse(format!(
            "checkpoint {name:?} refused: this run's checkpoints would keep {} on this machine, \
             more than its {} ({}); a larger disk limit allows more, up to {} (pass it to raise the ceiling)",
            rfs_evidence::events::sandbox_facts::show_used(kept),
            limit.describe(),
            limit.by,
            ceiling_flag(LimitKind::Disk)
        )))
    }

    /// The checkpoints this run made so far (a setup's are in the suite's
    /// sink).
    fn made_checkpoints(&self) -> Vec<MadeCheckpoint> {
        match &self.cfg.checkpoint_sink {
            Some(sink) => sink.all(),
            None => self.state().checkpoints.clone(),
        }
    }

    /// The end of a suite's setup: a checkpoint named `setup` unless the
    /// script made one.
    pub(crate) fn implicit_checkpoint(&self) -> Result<()> {
        let made = self
            .cfg
            .checkpoint_sink
            .as_ref()
            .is_some_and(|s| !s.all().is_empty());
        if !made {
            self.checkpoint("setup", true)?;
        }
        Ok(())
    }

    /// Journal the fact `make` builds from the journal's head and length
    /// just before it, under the journal's lock (nothing slips between).
    fn record_at_head(&self, make: impl FnOnce(&str, u64) -> Checkpointed) -> Result<Checkpointed> {
        let (event, fact) = {
            let mut r = self.record.lock().unwrap_or_else(|p| p.into_inner());
            let fact = make(r.journal.head(), r.journal.len());
            let e = Event::Checkpoint(fact.clone());
            r.journal.append(&e).map_err(|err| {
                rfs_evidence::error::Error::Internal(format!("cannot write the journal: {err}"))
            })?;
            r.evidence.apply(&e);
            (e, fact)
        };
        self.reporter.event(&event);
        self.write_evidence();
        Ok(fact)
    }

    /// Create the run's sandbox, as a fork of the checkpoint it starts
    /// from when it has one (journaled, with the setup's journal bundled).
    pub(super) fn create_or_fork(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        let p = self.cfg.provider.clone();
        let Some(from) = self.cfg.start_from.clone() else {
            return self.block_on(p.create(spec));
        };
        let Some(fork) = p.forking() else {
            return Err(rfs_sandbox::provider::ProviderError::Unsupported(
                fork::unsupported(p.name()),
            ));
        };
        let started = Instant::now();
        let forked = self.block_on(fork.fork(&from.made.checkpoint, spec))?;
        let fork_ms = super::ms(started.elapsed().as_millis());
        self.state().sandbox = Some(forked.info.clone());
        let (setup_journal, setup_caches) = self.bundle_setup_journal(&from).map_err(|e| {
            rfs_sandbox::provider::ProviderError::Io(format!(
                "cannot carry the setup run's journal into the bundle: {e}"
            ))
        })?;
        let fact = ForkedFact {
            sandbox_id: forked.info.id.clone(),
            checkpoint_id: from.made.checkpoint.id.clone(),
            checkpoint_name: from.made.fact.name.clone(),
            provider: p.name().to_owned(),
            setup_run_id: from.setup_run_id.clone(),
            setup_journal_head: from.made.fact.journal_head.clone(),
            setup_journal,
            how: forked.how.clone(),
            fork_ms,
            setup_caches,
        };
        self.record(Event::PlacementForked(fact))
            .map_err(|e| rfs_sandbox::provider::ProviderError::Io(e.to_string()))?;
        Ok(forked.info)
    }

    /// Copy the setup run's journal (and signature) into `setup/`; its
    /// digest, and the caches the setup mounted before the checkpoint.
    fn bundle_setup_journal(
        &self,
        from: &StartFrom,
    ) -> std::io::Result<(
        rfs_evidence::events::FileDigest,
        Vec<rfs_evidence::events::checkpoint_facts::SetupCache>,
    )> {
        let dir = self
            .cfg
            .out_dir
            .join(rfs_evidence::checkpoint_link::SETUP_DIR);
        rfs_evidence::out_dir::create_dir(&dir)?;
        for f in ["journal.jsonl", rfs_evidence::signing::SIG_FILE] {
            let src = from.setup_out.join(f);
            match rfs_evidence::out_dir::read_regular(
                &from.setup_out,
                f,
                rfs_evidence::out_dir::MAX_RECORD_BYTES,
            ) {
                Ok(bytes) => rfs_evidence::out_dir::write_new(&dir.join(f), &bytes)?,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound && f != "journal.jsonl" => {}
                Err(e) => {
                    return Err(std::io::Error::new(
                        e.kind(),
                        format!("{}: {e}", src.display()),
                    ))
                }
            }
        }
        let digest = rfs_evidence::journal::file_digest(
            &self.cfg.out_dir,
            rfs_evidence::checkpoint_link::SETUP_FILES[0],
        )?;
        let text = std::fs::read_to_string(
            self.cfg
                .out_dir
                .join(rfs_evidence::checkpoint_link::SETUP_FILES[0]),
        )?;
        let events = rfs_evidence::journal::evidence::read_journal(&text)
            .map_err(|e| std::io::Error::other(format!("the setup run's journal: {e}")))?
            .events;
        let caches = rfs_evidence::events::checkpoint_facts::caches_before(
            &events,
            &from.made.fact.checkpoint_id,
        );
        Ok((digest, caches))
    }

    /// `sync_source()` in a run started from a checkpoint that holds a
    /// bound source: the same commit, tree and place are bound from the
    /// checkpoint (nothing shipped); anything else is refused. `None`:
    /// the run did not start from a checkpoint holding a source.
    pub(super) fn bind_from_checkpoint(
        &self,
        commit: &str,
        tree: &str,
        key: &super::sync::SyncRequestKey,
        implicit: bool,
    ) -> Result<Option<SourcePin>> {
        let Some(from) = self.cfg.start_from.clone() else {
            return Ok(None);
        };
        let Some(src) = from.made.source.clone() else {
            return Ok(None);
        };
        let same = src.pin.commit == commit && src.pin.tree_digest == tree;
        if !same || !src.request.same_place(key) {
            let why = format!(
                "this run's sandbox starts from checkpoint {} of setup run {}, which holds commit {} (tree {}) synced to `{}`; sync_source() asks for commit {commit} (tree {tree}) to `{}`: a run started from a checkpoint binds the checkpoint's source, never another commit over its tree (run the setup at that commit)",
                from.made.checkpoint.id,
                from.setup_run_id,
                src.pin.commit,
                src.pin.tree_digest,
                src.request.dest,
                key.dest
            );
            let _ = self.record(Event::SourceRefused {
                reason: why.clone(),
            });
            return Err(self.refuse(why));
        }
        let sb = self.sandbox_with_pins(Some((commit, tree)))?;
        let rebase = |path: &str| match path.strip_prefix(&from.made.checkpoint.home) {
            Some(rest) => format!("{}{rest}", sb.home),
            None => path.to_owned(),
        };
        let pin = SourcePin {
            workdir: rebase(&src.pin.workdir),
            ..src.pin.clone()
        };
        self.record(Event::SourceFromCheckpoint(
            rfs_evidence::events::checkpoint_facts::SourceFromCheckpoint {
                sandbox_id: sb.id.clone(),
                checkpoint_id: from.made.checkpoint.id.clone(),
                commit: pin.commit.clone(),
                tree_digest: pin.tree_digest.clone(),
                files: pin.files,
                workdir: pin.workdir.clone(),
            },
        ))?;
        let bound = BoundSource {
            pin: SourcePin::default(),
            manifest: src.manifest.clone(),
            physical_root: rebase(&src.physical_root),
            request: key.clone(),
        };
        self.pin_and_bind(&sb.id, pin, bound, implicit).map(Some)
    }

    /// `rfs bisect --setup`, the first `sync_source()` of a lane started
    /// from a checkpoint holding a source (same place): bind the
    /// checkpoint's source as it is, at the checkpoint's own commit
    /// (`source.from_checkpoint` never names another), so that the bind
    /// that follows moves it to the asked commit — even the same one — by
    /// a re-sync: the differences shipped, the tracked files written since
    /// hashed (the setup's writes over them put back), the result
    /// verified, the sandbox destroyed on failure. Whether it adopted.
    pub(super) fn adopt_checkpoint_source(
        &self,
        key: &super::sync::SyncRequestKey,
    ) -> Result<bool> {
        let Some(from) = self.cfg.start_from.clone() else {
            return Ok(false);
        };
        let Some(src) = from.made.source.clone() else {
            return Ok(false);
        };
        if !from.resync_to_other_commits
            || !src.request.same_place(key)
            || self.state().source.is_some()
        {
            return Ok(false);
        }
        let (c, t) = (src.pin.commit.clone(), src.pin.tree_digest.clone());
        self.bind_from_checkpoint(&c, &t, &src.request, false)
            .map(|_| true)
    }

    /// At a suite's setup end: when a checkpoint it made holds sandbox
    /// `id` (its Daytona fork parent, which cannot be deleted before it),
    /// hand the sandbox to the suite, which destroys it right after the
    /// checkpoint; why, for the journal (`cleanup.kept`). `None`: destroy
    /// it now.
    pub(super) fn hand_held_source_to_suite(&self, id: &str) -> Option<String> {
        let sink = self.cfg.checkpoint_sink.as_ref()?;
        let fork = self.cfg.provider.forking()?;
        let why = sink
            .all()
            .iter()
            .filter(|m| m.fact.sandbox_id == id)
            .find_map(|m| fork.holds_its_source(&m.checkpoint))?;
        sink.hold(id);
        Some(format!(
            "{why}; the suite destroys it after the checkpoint, verified"
        ))
    }

    /// At run end: remove the checkpoints this run made (a suite's setup
    /// hands them to the suite instead), each verified gone.
    pub(super) fn remove_own_checkpoints(&self) {
        let made = std::mem::take(&mut self.state().checkpoints);
        let p = self.cfg.provider.clone();
        for m in made {
            let r = self.block_on(remove_verified(
                p.as_ref(),
                &m.checkpoint.id,
                self.cfg.cleanup_deadline,
            ));
            let _ = self.record(Event::CheckpointRemoved(r));
        }
    }
}

/// Remove checkpoint `id` and poll until the provider says it is gone,
/// within `deadline`.
pub(crate) async fn remove_verified(
    p: &dyn Provider,
    id: &str,
    deadline: Duration,
) -> CheckpointRemoved {
    let started = Instant::now();
    let removed = |verified, detail| CheckpointRemoved {
        checkpoint_id: id.to_owned(),
        verified,
        detail,
    };
    let Some(fork) = p.forking() else {
        return removed(false, fork::unsupported(p.name()));
    };
    if let Err(e) = fork.remove_checkpoint(id).await {
        return removed(false, format!("removal failed: {e}"));
    }
    let mut polls = 0;
    loop {
        polls += 1;
        match fork.checkpoint_exists(id).await {
            Ok(false) => {
                return removed(
                    true,
                    format!(
                        "the provider no longer has it: {polls} poll(s), {} ms",
                        started.elapsed().as_millis()
                    ),
                )
            }
            Ok(true) if started.elapsed() < deadline => {}
            Ok(true) => {
                return removed(
                    false,
                    format!("still there after {} ms", started.elapsed().as_millis()),
                )
            }
            Err(e) => return removed(false, format!("cannot say whether it is gone: {e}")),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A [`StartFrom`] for the proofs of a suite whose setup made `made`.
pub(crate) fn start_from(
    made: MadeCheckpoint,
    setup_run_id: &str,
    setup_out: &std::path::Path,
) -> Arc<StartFrom> {
    Arc::new(StartFrom {
        made,
        setup_run_id: setup_run_id.to_owned(),
        setup_out: setup_out.to_path_buf(),
        resync_to_other_commits: false,
    })
}
