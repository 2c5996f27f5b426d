//! A later `sync_source()` that resolves to another commit: pin it in the
//! same sandbox, shipping only what differs (see [`crate::source::resync`]
//! for the rule on files earlier steps created), verified inside the
//! sandbox. Refusals found before the sandbox is touched leave the old pin
//! in force; any failure after that destroys the sandbox, like a failed
//! first sync.

use std::io::{BufWriter, Write as _};
use std::time::Instant;

use super::sync::{ms, SourcePin, SyncRequestKey};
use super::{BoundSource, Run};
use crate::error::{Error, Result};
use crate::events::Event;
use crate::provider::{Collect, ExecRequest};
use crate::source::archive::{self, HashingWriter};
use crate::source::manifest::Manifest;
use crate::source::repo::ResolvedSource;
use crate::source::resync::{self as plan_mod, Listing};
use crate::source::resync_remote as remote;
use crate::source::SourceError;

/// Arguments of one apply command at most this long (bytes); more
/// removals go first in commands of their own.
const ARGV_BUDGET: usize = 64 * 1024;

/// The sandbox file whose modification time marks the end of the last sync.
pub(crate) fn stamp_path(home: &str, run_id: &str) -> String {
    format!("{}/.rfs-synced-{run_id}", home.trim_end_matches('/'))
}

impl Run {
    pub(super) fn resync(
        &self,
        bound: BoundSource,
        resolved: ResolvedSource,
        key: SyncRequestKey,
    ) -> Result<SourcePin> {
        let started = Instant::now();
        let commit = resolved.commit.to_string();
        let tree = resolved.tree.to_string();
        if !resolved.submodules.is_empty() {
            let msg = format!(
                "cannot move the source to commit {commit}: it contains submodules, which a re-sync does not ship (the sandbox keeps commit {})",
                bound.pin.commit
            );
            let _ = self.record(Event::SourceRefused {
                reason: msg.clone(),
            });
            return Err(self.refuse(msg));
        }
        self.record(Event::SourceResolved {
            repo: resolved.repo_root.display().to_string(),
            rev: key.rev.clone(),
            commit: commit.clone(),
            tree_digest: tree.clone(),
            subdir: resolved.subdir.clone(),
            implicit: false,
            dirty_paths_not_shipped: resolved.dirty.clone(),
            submodules: vec![],
        })?;
        let old_tree = git2::Oid::from_str(&bound.pin.tree_digest).map_err(Error::internal)?;
        let next = plan_mod::next_tree(
            &resolved.repo_root,
            old_tree,
            resolved.tree,
            &bound.manifest,
        )
        .map_err(|e| {
            let msg = format!("cannot move the source to commit {commit}: {e}");
            let _ = self.record(Event::SourceRefused {
                reason: msg.clone(),
            });
            self.refuse(msg)
        })?;

        let sb = self.ensure_sandbox()?;
        let home = sb.home.trim_end_matches('/').to_owned();
        let run_id = self.cfg.run_id.clone();
        let stamp = stamp_path(&home, &run_id);
        let aux = format!("{home}/.rfs-resync-{run_id}");
        let upload = format!("{home}/.rfs-resync-{run_id}.tar");
        let dest = bound.pin.workdir.clone();
        let fail = |what: String| -> Error {
            let msg = format!(
                "re-sync of sandbox {} to commit {commit} failed: {what}",
                sb.id
            );
            self.sync_failed(&sb.id, &commit, msg, "failed re-sync")
        };
        let stream = self.cfg.provider.streaming();
        let streaming = stream.is_some();
        let exec = |argv: Vec<String>,
                    input: Option<crate::provider::InputStream>|
         -> std::result::Result<Collect, ApplyError> {
            let req = ExecRequest {
                argv,
                cwd: sb.home.clone(),
                env: vec![("LC_ALL".into(), "C".into())],
                timeout: Some(std::time::Duration::from_secs(1800)),
                cancel: self.cancel_token(),
            };
            let mut out = Collect::default();
            let p = &self.cfg.provider;
            // An input is only made where the provider streams.
            let waited = match (input, stream) {
                (Some(i), Some(st)) => {
                    self.block_on_watched(&sb.id, st.exec_with_input(&sb.id, &req, i, &mut out))
                }
                _ => self.block_on_watched(&sb.id, p.exec(&sb.id, &req, &mut out)),
            };
            let o = waited.map_err(|how| {
                self.record_sandbox_lost(&sb.id, "sync_source", &how);
                ApplyError::Stalled(how)
            })??;
            if o.cancelled {
                return Err(ApplyError::Interrupted);
            }
            if o.exit != Some(0) {
                let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
                return Err(match o.exit {
                    Some(remote::EXIT_MISSING_TOOL) | Some(remote::EXIT_ROOT_GONE) => {
                        ApplyError::Refused(stderr)
                    }
                    Some(remote::EXIT_REMOVE) => ApplyError::Remove(stderr),
                    Some(remote::EXIT_EXTRACT) => ApplyError::Extract(stderr),
                    Some(remote::EXIT_DIGEST) => ApplyError::Digest(stderr),
                    exit => ApplyError::Exited { exit, stderr },
                });
            }
            Ok(out)
        };

        // 1. What the sandbox holds now.
        let t_inspect = Instant::now();
        let seen = exec(
            vec![
                "/bin/sh".into(),
                "-c".into(),
                remote::inspect_script(),
                "rfs-inspect".into(),
                dest.clone(),
                stamp.clone(),
            ],
            None,
        )
        .and_then(|o| Ok(remote::parse_listing(&o.stdout, false)?))
        .map_err(|e| fail(format!("inspecting the synced root: {e}")))?;
        if seen.physical_root != bound.physical_root {
            return Err(fail(format!(
                "the synced root now resolves to {} instead of {}",
                seen.physical_root, bound.physical_root
            )));
        }
        let inspect_ms = t_inspect.elapsed().as_millis();

        // 2. What to remove and ship; the delta archive.
        let plan = plan_mod::plan(&bound.manifest, &next, &seen);
        let t_build = Instant::now();
        let delta = self
            .build_delta(&resolved, &plan.ship)
            .map_err(|e| fail(format!("cannot build the delta archive: {e}")))?;
        let build_ms = t_build.elapsed().as_millis();
        let t_up = Instant::now();
        // Providers that stream get the delta on the apply's stdin instead.
        if let (Some((tmp, _, _, _)), false) = (&delta, streaming) {
            self.block_on_watched(
                &sb.id,
                self.cfg.provider.upload(&sb.id, tmp.path(), &upload),
            )
            .map_err(|how| {
                self.record_sandbox_lost(&sb.id, "sync_source", &how);
                fail(format!("upload: {}", ApplyError::Stalled(how)))
            })?
            .map_err(|e| fail(format!("upload: {e}")))?;
        }
        let upload_ms = t_up.elapsed().as_millis();

        // 3. Remove, extract, report.
        let t_apply = Instant::now();
        let removals = remote::removal_args(&plan.remove, &plan.rmdir)
            .into_iter()
            .map(|a| {
                String::from_utf8(a).map_err(|a| {
                    fail(format!(
                        "{} must be removed, and a re-sync passes only UTF-8 paths",
                        crate::source::display_path(&a.into_bytes()[1..])
                    ))
                })
            })
            .collect::<Result<Vec<String>>>()?;
        let mut chunks: Vec<Vec<String>> = vec![vec![]];
        let mut size = 0;
        for a in removals {
            if size + a.len() > ARGV_BUDGET && !chunks.last().is_some_and(Vec::is_empty) {
                chunks.push(vec![]);
                size = 0;
            }
            size += a.len() + 1;
            chunks.last_mut().expect("one chunk").push(a);
        }
        let last = chunks.len() - 1;
        let mut after = Listing::default();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let input: Option<crate::provider::InputStream> = match &delta {
                Some((tmp, _, _, _)) if i == last && streaming => Some(
                    crate::provider::InputStream::new(tokio::fs::File::from_std(
                        tmp.reopen()
                            .map_err(|e| fail(format!("cannot read the delta archive: {e}")))?,
                    )),
                ),
                _ => None,
            };
            let arc = match (&delta, input.is_some()) {
                (_, true) => remote::STDIN.to_owned(),
                (Some(_), false) if i == last => upload.clone(),
                _ => "none".into(),
            };
            let mut argv = vec![
                "/bin/sh".into(),
                "-c".into(),
                remote::apply_script(),
                "rfs-apply".into(),
                arc,
                dest.clone(),
                aux.clone(),
                stamp.clone(),
            ];
            argv.extend(chunk);
            let out = exec(argv, input).map_err(|e| fail(format!("applying the change: {e}")))?;
            if i == last {
                after =
                    remote::parse_listing(&out.stdout, true).map_err(|e| fail(e.to_string()))?;
            }
        }
        let apply_ms = t_apply.elapsed().as_millis();

        // 4. Verify against the new tree.
        let (archive_sha256, archive_bytes, shipped) = match delta {
            Some((_, sha, n, m)) => (sha, n, m),
            None => (String::new(), 0, Manifest::default()),
        };
        if after.archive_sha256 != archive_sha256 {
            return Err(fail(format!(
                "the delta archive arrived corrupted: local sha256 {archive_sha256}, sandbox sha256 {}",
                after.archive_sha256
            )));
        }
        let mut manifest = next.manifest.clone();
        plan_mod::fill_digests(&mut manifest, &shipped).map_err(|e| fail(e.to_string()))?;
        let checked =
            plan_mod::check(&bound.manifest, &manifest, &plan, &after, 20).map_err(|d| {
                fail(format!(
                    "the synced root does not equal commit {commit}: {}",
                    d.join("; ")
                ))
            })?;

        let pin = SourcePin {
            commit: commit.clone(),
            tree_digest: tree.clone(),
            archive_sha256: archive_sha256.clone(),
            files: manifest.file_count(),
            workdir: dest.clone(),
        };
        self.record(Event::SourceResync {
            sandbox_id: sb.id.clone(),
            from_commit: bound.pin.commit.clone(),
            from_tree_digest: bound.pin.tree_digest.clone(),
            commit: commit.clone(),
            tree_digest: tree.clone(),
            added: next.added,
            modified: next.modified,
            deleted: next.deleted,
            shipped: plan.ship.len(),
            rewritten: plan.rewritten,
            removed: plan.remove.len(),
            kept_untracked: checked.kept_untracked,
            archive_sha256_local: archive_sha256.clone(),
            archive_sha256_sandbox: after.archive_sha256.clone(),
            archive_bytes,
            entries_compared: checked.entries_compared,
            contents_compared: checked.contents_compared,
            inspect_ms: ms(inspect_ms),
            build_ms: ms(build_ms),
            upload_ms: ms(upload_ms),
            apply_ms: ms(apply_ms),
            sync_ms: ms(started.elapsed().as_millis()),
        })?;
        self.pin_and_bind(
            &sb.id,
            pin,
            BoundSource {
                pin: SourcePin::default(),
                manifest,
                physical_root: bound.physical_root,
                request: key,
            },
            false,
        )
    }

    /// The delta tar in a scratch file, with its sha256, size and the
    /// manifest of what it holds; `None` when nothing is shipped.
    #[allow(clippy::type_complexity)]
    fn build_delta(
        &self,
        resolved: &ResolvedSource,
        ship: &[Vec<u8>],
    ) -> std::result::Result<Option<(tempfile::NamedTempFile, String, u64, Manifest)>, SourceError>
    {
        if ship.is_empty() {
            return Ok(None);
        }
        let entries = plan_mod::shipped_entries(&resolved.repo_root, resolved.tree, ship)?;
        let tmp = tempfile::Builder::new()
            .prefix("rfs-resync-")
            .suffix(".tar")
            .tempfile_in(&self.cfg.scratch_dir)
            .map_err(|e| SourceError::Io(format!("cannot create the archive file: {e}")))?;
        let file = BufWriter::with_capacity(1 << 20, tmp.reopen()?);
        let (hw, shipped) = archive::build_entries_into(
            &resolved.repo_root,
            resolved.commit,
            &entries,
            HashingWriter::new(file),
        )?;
        let (mut file, sha, size) = hw.finish();
        file.flush()?;
        Ok(Some((tmp, sha, size, shipped)))
    }
}

/// Why a command of the re-sync failed in the sandbox.
#[derive(Debug, thiserror::Error)]
enum ApplyError {
    #[error(transparent)]
    Provider(#[from] crate::provider::ProviderError),
    #[error(transparent)]
    Report(#[from] crate::source::remote_check::ReportError),
    #[error("interrupted")]
    Interrupted,
    /// The sandbox was paused, died or vanished while rfs waited on it.
    #[error("sandbox {0}; rfs stopped waiting for it")]
    Stalled(String),
    /// A missing tool or a vanished root: the script's own message.
    #[error("{0}")]
    Refused(String),
    #[error("removing old paths failed: {0}")]
    Remove(String),
    #[error("extraction failed: {0}")]
    Extract(String),
    #[error("cannot hash the upload: {0}")]
    Digest(String),
    #[error("the sandbox command ended with {}: {stderr}", crate::exit_code::ExitText(*.exit))]
    Exited { exit: Option<i32>, stderr: String },
}
