//! `sync_source()`: resolve once, build from the object database, provision
//! (labels carry the pins), upload, verify inside the sandbox, pin. Any
//! failure after provisioning destroys the sandbox and is a refusal.

use std::path::Path;
use std::time::Instant;

use super::ms;
use super::sync_target::SyncTarget;
use super::{BoundSource, Run};
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::{Event, SubmodulePin};
use rfs_sandbox::source::manifest::Entry;
use rfs_sandbox::source::repo::ResolvedSource;
use rfs_sandbox::source::{archive, repo, SourceError, SourceOptions, SubmodulePolicy};

/// The journal's account of a shipped working tree, if one was.
pub(crate) fn working_tree_of(
    r: &ResolvedSource,
) -> Option<rfs_evidence::events::WorkingTreeShipped> {
    r.working_tree_of
        .map(|base| rfs_evidence::events::WorkingTreeShipped {
            base_commit: base.to_string(),
            uncommitted_paths: r.uncommitted.clone(),
        })
}

/// What a bound source is pinned to; returned to the script.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SourcePin {
    pub commit: String,
    pub tree_digest: String,
    pub archive_sha256: String,
    pub files: usize,
    /// Absolute remote path of the synced root.
    pub workdir: String,
}

/// The options that identify a bind request; a second bind must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyncRequestKey {
    pub repo_root: std::path::PathBuf,
    pub rev: String,
    pub subdir: Option<String>,
    pub allow_dirty: bool,
    pub submodules: SubmodulePolicy,
    pub dest: String,
}

impl SyncRequestKey {
    /// The options that move a bound source, in the same place, to `rev`
    /// (`working_tree`: with `--allow-dirty`'s snapshot of the working
    /// tree when `rev` is `HEAD`; the working tree's dirt never refuses).
    pub(crate) fn rebind(&self, rev: &str, working_tree: bool) -> SourceOptions {
        SourceOptions {
            repo: self.repo_root.clone(),
            rev: rev.to_owned(),
            subdir: self.subdir.clone(),
            allow_dirty: true,
            working_tree,
            submodules: self.submodules,
            dest: self.dest.clone(),
            own_outputs: vec![],
        }
    }

    /// Whether `other` binds the same place (repository, subdirectory,
    /// destination, submodule policy): a re-sync may change only the
    /// revision (and `allow_dirty`).
    pub(crate) fn same_place(&self, other: &SyncRequestKey) -> bool {
        self.repo_root == other.repo_root
            && self.subdir == other.subdir
            && self.dest == other.dest
            && self.submodules == other.submodules
    }
}

impl Run {
    /// From now on, bind (and re-bind) the source at `commit` whatever
    /// revision the script names (`rfs bisect`); when a source is bound,
    /// move it there now, with the options it was bound with.
    pub(crate) fn pin_commit(&self, commit: &str) -> Result<()> {
        self.state().forced_commit = Some(commit.to_owned());
        let Some(bound) = self.state().source.clone() else {
            return Ok(());
        };
        let opts = bound.request.rebind(commit, false);
        self.sync_source(opts, false).map(|_| ())
    }

    /// `rfs run --watch`, before a pass: move the bound source to what
    /// the repository holds now: HEAD's commit (uncommitted changes are
    /// journaled as not shipped), or with `--allow-dirty` the working tree.
    pub(crate) fn follow_head(&self) -> Result<()> {
        let bound = self.state().source.clone();
        if self.cfg.allow_dirty {
            let Some(b) = bound else { return Ok(()) };
            return self
                .sync_source(b.request.rebind("HEAD", true), false)
                .map(|_| ());
        }
        let dir = bound.map_or_else(|| self.cfg.invocation_dir.clone(), |b| b.request.repo_root);
        let head = git2::Repository::discover(&dir)
            .and_then(|r| r.head()?.peel_to_commit().map(|c| c.id().to_string()));
        match head {
            Ok(c) => self.pin_commit(&c),
            // No repository or no commit: the script's own bind says why.
            Err(_) => Ok(()),
        }
    }

    /// The options a bind really uses: a replay ships the commit it
    /// replays and `rfs bisect` the commit it tests (whatever revision
    /// the script names); `--allow-dirty` ships the working tree.
    fn effective(&self, mut opts: SourceOptions) -> SourceOptions {
        // What the person named for rfs to write is never dirt (while
        // untracked), whichever bind this is.
        opts.own_outputs = self.cfg.allowed_repos.own_outputs().to_vec();
        // A replay ships the commit it replays, whatever HEAD and the
        // working tree are now (dirty paths are still journaled).
        // A full commit id names one commit whatever the repository's
        // state, so a replay honours it (a replayed re-sync walks the same
        // commits).
        // `rfs bisect` fixes the commit of each pass the same way.
        let forced = self.state().forced_commit.clone();
        match (&self.cfg.replay_of, forced) {
            (_, Some(c)) if !is_full_id(&opts.rev) => SourceOptions {
                rev: c,
                allow_dirty: true,
                ..opts
            },
            (_, Some(_)) => SourceOptions {
                allow_dirty: true,
                ..opts
            },
            (Some(_), None) if is_full_id(&opts.rev) => SourceOptions {
                allow_dirty: true,
                ..opts
            },
            (Some(r), None) => SourceOptions {
                rev: r.commit.clone(),
                allow_dirty: true,
                ..opts
            },
            // `--allow-dirty`: the working tree ships as it is.
            (None, None) if self.cfg.allow_dirty => SourceOptions {
                working_tree: true,
                allow_dirty: true,
                ..opts
            },
            (None, None) => opts,
        }
    }

    /// Bind the run's source. `implicit` marks a bind done by the first
    /// `step()` because the script did not call `sync_source()`.
    pub(crate) fn sync_source(&self, opts: SourceOptions, implicit: bool) -> Result<SourcePin> {
        self.check_cancelled()?;
        let opts = self.effective(opts);
        validate_rev(&opts.rev).map_err(|e| self.refuse(e.to_string()))?;
        validate_dest(&opts.dest).map_err(|e| self.refuse(e.to_string()))?;
        self.refuse_secret_in("sync_source()'s dest", &opts.dest)?;
        let resolved = self.resolve_source(&opts)?;
        let key = SyncRequestKey {
            repo_root: resolved.repo_root.clone(),
            rev: opts.rev.clone(),
            subdir: resolved.subdir.clone(),
            allow_dirty: opts.allow_dirty,
            submodules: opts.submodules,
            dest: opts.dest.clone(),
        };
        // Adopted: even the same commit re-syncs (setup's writes put back).
        let adopted = self.adopt_checkpoint_source(&key)?;
        let bound = self.state().source.clone();
        if let Some(b) = bound {
            let same = b.pin.commit == resolved.commit.to_string()
                && b.pin.tree_digest == resolved.tree.to_string();
            if !adopted && (implicit || (same && b.request.same_place(&key))) {
                return Ok(b.pin);
            }
            if b.request.same_place(&key) {
                return self.resync(b, resolved, key);
            }
            return Err(Error::Refused(format!(
                "the run's source is already bound to commit {} with other repo, path, dest or submodules options; a run binds one source (a later sync_source() may only move it to another commit)",
                b.pin.commit
            )));
        }
        let commit = resolved.commit.to_string();
        let tree = resolved.tree.to_string();
        // The rev may be a secret (`rev: arg("TOKEN")`) that resolves.
        let rev = self.state().redactor.redact_str(&opts.rev);
        self.record(Event::SourceResolved {
            repo: resolved.repo_root.display().to_string(),
            rev,
            commit: commit.clone(),
            tree_digest: tree.clone(),
            subdir: resolved.subdir.clone(),
            implicit,
            dirty_paths_not_shipped: resolved.dirty.clone(),
            own_outputs_ignored: resolved.own_outputs_ignored.clone(),
            submodules: resolved
                .submodules
                .iter()
                .map(|s| SubmodulePin {
                    path: s.path.clone(),
                    commit: s.commit.to_string(),
                })
                .collect(),
            working_tree: working_tree_of(&resolved),
        })?;
        if let Some(pin) = self.bind_from_checkpoint(&commit, &tree, &key, implicit)? {
            return Ok(pin);
        }

        let p = self.cfg.provider.clone();
        let started = Instant::now();
        // The provider's capabilities decide the transfer: a stream into
        // the verifier where it can take one, else a file.
        let stream = p.streaming();
        let remote = p.profile().remote;
        // On the file path the archive is built before provisioning (a
        // repository problem must not cost a sandbox), except for remote
        // providers, whose compression is decided by probing the sandbox.
        // A streamed archive is built while the sandbox extracts it.
        let prebuilt = match (stream, remote) {
            (None, false) => Some(
                self.build_archive_file(&resolved, false)
                    .map_err(|e| self.refuse(format!("cannot build the source archive: {e}")))?,
            ),
            _ => None,
        };

        let sb = self.sandbox_with_pins(Some((&commit, &tree)))?;
        let target = SyncTarget::new(&sb, &commit, &opts.dest, &self.cfg.run_id, started);
        let plan = self.plan_transfer(&target, p.as_ref(), stream, remote, prebuilt)?;
        let sent = self.send(&target, &plan, &resolved)?;
        let report = self.check_report(&target, &plan, &sent)?;
        let pin = SourcePin {
            commit: commit.clone(),
            tree_digest: tree.clone(),
            archive_sha256: sent.built.sha256.clone(),
            files: sent.built.manifest.file_count(),
            workdir: target.dest.clone(),
        };
        self.record(verify_event(&sb.id, &plan, &sent, &report, started))?;
        self.pin_and_bind(
            &sb.id,
            pin,
            BoundSource {
                pin: SourcePin::default(),
                manifest: sent.built.manifest,
                physical_root: report.physical_root,
                request: key,
            },
            implicit,
        )
    }

    /// The commit and tree `opts` name, once its repository is one the
    /// person allowed; a refusal is journaled (`source.refused`).
    fn resolve_source(&self, opts: &SourceOptions) -> Result<repo::ResolvedSource> {
        if opts.repo != self.cfg.invocation_dir {
            let written = opts
                .repo
                .strip_prefix(&self.cfg.invocation_dir)
                .unwrap_or(&opts.repo)
                .display()
                .to_string();
            self.cfg
                .allowed_repos
                .check(&self.cfg.invocation_dir, &opts.repo, &written)
                .map_err(|why| {
                    let _ = self.record(Event::SourceRefused {
                        reason: why.clone(),
                    });
                    self.refuse(why)
                })?;
        }
        repo::resolve(opts).map_err(|e| {
            // The rev may be a secret (`rev: arg("TOKEN")`).
            let msg = (self.state().redactor).redact_str(&format!("cannot bind the source: {e}"));
            let _ = self.record(Event::SourceRefused {
                reason: msg.clone(),
            });
            self.refuse(msg)
        })
    }

    /// The tail every bind shares (a first sync and a re-sync): journal the
    /// pin, and bind the run's source to it.
    pub(super) fn pin_and_bind(
        &self,
        sandbox_id: &str,
        pin: SourcePin,
        bound: BoundSource,
        implicit: bool,
    ) -> Result<SourcePin> {
        self.record(Event::SourcePin {
            sandbox_id: sandbox_id.to_owned(),
            commit: pin.commit.clone(),
            tree_digest: pin.tree_digest.clone(),
            archive_sha256: pin.archive_sha256.clone(),
            files: pin.files,
            workdir: pin.workdir.clone(),
            implicit,
        })?;
        self.state().source = Some(BoundSource {
            pin: pin.clone(),
            ..bound
        });
        Ok(pin)
    }
}

impl Run {
    /// A sync (first or re-sync) failed after it touched the sandbox:
    /// journal why, refuse, and destroy the sandbox (verified) — what it
    /// holds is no longer the pinned commit.
    pub(super) fn sync_failed(
        &self,
        sandbox_id: &str,
        commit: &str,
        msg: String,
        why: &str,
    ) -> Error {
        let _ = self.record(Event::SourceSyncFailed {
            sandbox_id: sandbox_id.to_owned(),
            commit: commit.to_owned(),
            reason: msg.clone(),
        });
        let err = self.refuse(msg);
        if let Some(w) = self.block_on(super::teardown::destroy_and_record(self, sandbox_id, why)) {
            self.warn(&w);
        }
        err
    }

    /// Build the archive into a temporary file in the scratch directory.
    pub(super) fn build_archive_file(
        &self,
        resolved: &ResolvedSource,
        gzip: bool,
    ) -> std::result::Result<(tempfile::NamedTempFile, archive::BuiltArchive), SourceError> {
        let tmp = tempfile::Builder::new()
            .prefix("rfs-source-")
            .suffix(if gzip { ".tar.gz" } else { ".tar" })
            .tempfile_in(&self.cfg.scratch_dir)
            .map_err(|e| SourceError::Io(format!("cannot create the archive file: {e}")))?;
        // The script thread does the (blocking) git work itself.
        let built = archive::build(&resolved.repo_root, resolved, tmp.path(), gzip)?;
        Ok((tmp, built))
    }
}

/// The destination must be a plain relative path below the sandbox home.
fn validate_dest(dest: &str) -> std::result::Result<(), rfs_evidence::validate::InputError> {
    let p = Path::new(dest);
    let ok = !dest.is_empty()
        && p.is_relative()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(rfs_evidence::validate::InputError::NotBelowHome {
            what: "sync_source dest",
            value: dest.to_owned(),
        })
    }
}

/// A full 40-hex (SHA-1) or 64-hex (SHA-256) commit id.
fn is_full_id(rev: &str) -> bool {
    (rev.len() == 40 || rev.len() == 64) && rev.bytes().all(|b| b.is_ascii_hexdigit())
}

/// `rev` must be a plausible revision: not empty, no whitespace or
/// control characters, not an option.
fn validate_rev(rev: &str) -> std::result::Result<(), SourceError> {
    if rev.is_empty()
        || rev.starts_with('-')
        || rev.chars().any(|c| c.is_whitespace() || c.is_control())
        || rev.len() > 256
    {
        return Err(SourceError::NotARevision { rev: rev.into() });
    }
    Ok(())
}

/// The `source.verify` fact of a first sync: what was sent, how, and what
/// the sandbox reported.
fn verify_event(
    sandbox_id: &str,
    plan: &super::transfer::TransferPlan<'_>,
    sent: &super::transfer::Sent,
    report: &super::transfer::Checked,
    started: Instant,
) -> Event {
    Event::SourceVerify(rfs_evidence::events::SourceVerified {
        sandbox_id: sandbox_id.to_owned(),
        archive_sha256_local: sent.built.sha256.clone(),
        archive_sha256_sandbox: report.archive_sha256.clone(),
        archive_bytes: sent.built.size,
        entries_compared: report.entries_compared,
        file_set_equal: true,
        content_equal: true,
        build_ms: ms(sent.build_ms),
        upload_ms: ms(sent.upload_ms),
        verify_ms: ms(sent.verify_ms),
        transfer: plan.transfer(),
        compression: plan.compression(),
        wire_bytes: sent.built.wire_bytes,
        tree_bytes: sent
            .built
            .manifest
            .entries
            .values()
            .map(|e| match e {
                Entry::File { size, .. } => *size,
                _ => 0,
            })
            .sum(),
        sync_ms: ms(started.elapsed().as_millis()),
        verifier: plan.verifier(),
        verifier_fallback: plan.verifier_fallback.clone(),
        stream_route: plan.route().map(|r| r.via.clone()),
        stream_fallback: plan.route().and_then(|r| r.fallback.clone()),
        archive_digest: plan.digest_kind(),
    })
}
