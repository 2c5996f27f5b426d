//! A later `sync_source()` that resolves to another commit: pin it in the
//! same sandbox, shipping only what differs (see [`rfs_sandbox::source::delta`]
//! for the rule on files earlier steps created), verified inside the
//! sandbox. Refusals found before the sandbox is touched leave the old pin
//! in force; any failure after that destroys the sandbox, like a failed
//! first sync.

use std::io::{BufWriter, Write as _};
use std::time::Instant;

use super::ms;
use super::resync_error::ApplyError;
use super::sync::{SourcePin, SyncRequestKey};
use super::sync_target::stamp_path;
use super::{BoundSource, Run};
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::{
    BoundedCollect, Collect, ExecRequest, InputStream, SandboxInfo, StreamInput,
    TREE_REPORT_OUTPUT, TREE_REPORT_STDERR,
};
use rfs_sandbox::source::archive::{self, HashingWriter};
use rfs_sandbox::source::delta::{self as plan_mod, Checked, Listing, NextTree, Plan};
use rfs_sandbox::source::manifest::{Entry, Manifest};
use rfs_sandbox::source::repo::ResolvedSource;
use rfs_sandbox::source::resync_remote as remote;
use rfs_sandbox::source::SourceError;

/// Arguments of one apply command at most this long (bytes); more
/// removals go first in commands of their own.
const ARGV_BUDGET: usize = 64 * 1024;

/// How long one command of a re-sync may take in the sandbox: a minute,
/// plus 5 ms for each entry it walks or names and a second for each MiB
/// it reads or writes, at most half an hour. Past it the command is
/// stopped and the re-sync fails (the sandbox is destroyed) saying so.
pub(crate) fn deadline(entries: usize, bytes: u64) -> std::time::Duration {
    let secs = 60 + entries as u64 / 200 + bytes / (1 << 20);
    std::time::Duration::from_secs(secs.min(1800))
}

impl Run {
    /// Move the bound source to `resolved`'s commit in the same sandbox:
    /// inspect, ship the delta, apply it, verify, journal and pin.
    pub(super) fn resync(
        &self,
        bound: BoundSource,
        resolved: ResolvedSource,
        key: SyncRequestKey,
    ) -> Result<SourcePin> {
        let started = Instant::now();
        let commit = resolved.commit.to_string();
        let tree = resolved.tree.to_string();
        let next = self.resync_target(&bound, &resolved, &key)?;

        let sb = self.ensure_sandbox()?;
        let rs = Resync::new(self, &sb, &commit, bound.pin.workdir.clone());

        // 1. What the sandbox holds now: the listing, and the content of
        // the tracked files written since the last sync.
        let t_inspect = Instant::now();
        let (seen, before) = rs.inspect_and_hash(&bound, &next)?;
        let inspect_ms = t_inspect.elapsed().as_millis();

        // 2. What to remove and ship; the delta archive.
        let plan = plan_mod::plan(&bound.manifest, &next, &seen, &before);
        let t_build = Instant::now();
        let delta = self
            .build_delta(&resolved, &plan.ship)
            .map_err(|e| rs.fail(format!("cannot build the delta archive: {e}")))?;
        let build_ms = t_build.elapsed().as_millis();
        let t_up = Instant::now();
        rs.upload_delta(&delta)?;
        let upload_ms = t_up.elapsed().as_millis();

        // 3. Remove, extract, report.
        let t_apply = Instant::now();
        let mut after = rs.apply(&plan, &next, &delta, seen.entries.entries.len())?;
        // Tracked files something else wrote meanwhile are compared too.
        rs.hash_written_meanwhile(&mut after, &next.manifest)?;
        let apply_ms = t_apply.elapsed().as_millis();

        // 4. Verify against the new tree.
        let (archive_sha256, archive_bytes, shipped) = match delta {
            Some((_, sha, n, m)) => (sha, n, m),
            None => (String::new(), 0, Manifest::default()),
        };
        let (manifest, checked) = rs.verify(
            &bound.manifest,
            &next,
            &plan,
            &after,
            &archive_sha256,
            &shipped,
        )?;

        let names = |v: &[Vec<u8>]| {
            v.iter()
                .map(|p| rfs_sandbox::source::display_path(p))
                .collect()
        };
        let shipped_paths: Vec<String> = names(&plan.shipped_files(&next));
        let pin = SourcePin {
            commit: commit.clone(),
            tree_digest: tree.clone(),
            archive_sha256: archive_sha256.clone(),
            files: manifest.file_count(),
            workdir: rs.dest.clone(),
        };
        self.record(Event::SourceResync(rfs_evidence::events::SourceResynced {
            sandbox_id: sb.id.clone(),
            from_commit: bound.pin.commit.clone(),
            from_tree_digest: bound.pin.tree_digest.clone(),
            commit: commit.clone(),
            tree_digest: tree.clone(),
            added: next.added,
            modified: next.modified,
            deleted: next.deleted,
            shipped: shipped_paths.len(),
            rewritten: plan.rewritten.len(),
            removed: plan.deleted.len(),
            shipped_paths,
            rewritten_paths: names(&plan.rewritten),
            removed_paths: names(&plan.deleted),
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
        }))?;
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

    /// The tree a re-sync moves to, after journaling the resolved commit;
    /// refused (before the sandbox is touched) when the commit has
    /// submodules or the change cannot be planned.
    fn resync_target(
        &self,
        bound: &BoundSource,
        resolved: &ResolvedSource,
        key: &SyncRequestKey,
    ) -> Result<NextTree> {
        let commit = resolved.commit.to_string();
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
        // The rev may be a secret (`rev: arg("TOKEN")`) that resolves.
        let rev = self.state().redactor.redact_str(&key.rev);
        self.record(Event::SourceResolved {
            repo: resolved.repo_root.display().to_string(),
            rev,
            commit: commit.clone(),
            tree_digest: resolved.tree.to_string(),
            subdir: resolved.subdir.clone(),
            implicit: false,
            dirty_paths_not_shipped: resolved.dirty.clone(),
            own_outputs_ignored: resolved.own_outputs_ignored.clone(),
            submodules: vec![],
            working_tree: super::sync::working_tree_of(resolved),
        })?;
        let old_tree = git2::Oid::from_str(&bound.pin.tree_digest).map_err(Error::internal)?;
        plan_mod::next_tree(
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
        })
    }

    /// The delta tar in a scratch file, with its sha256, size and the
    /// manifest of what it holds; `None` when nothing is shipped.
    fn build_delta(
        &self,
        resolved: &ResolvedSource,
        ship: &[Vec<u8>],
    ) -> std::result::Result<Option<Delta>, SourceError> {
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

/// The delta archive: the scratch file, its sha256 and size, and the
/// manifest of what it holds.
type Delta = (tempfile::NamedTempFile, String, u64, Manifest);

/// One re-sync once it works in the sandbox: where its commands run and
/// what they name there. Any failure from here on destroys the sandbox.
struct Resync<'a> {
    run: &'a Run,
    sb: &'a SandboxInfo,
    commit: &'a str,
    /// The provider's streaming input, if it has one.
    stream: Option<&'a dyn StreamInput>,
    /// The synced root.
    dest: String,
    /// The file whose modification time marks the end of the last sync.
    stamp: String,
    /// The apply's scratch directory.
    aux: String,
    /// Where the delta is uploaded when it is not streamed.
    upload: String,
}

impl<'a> Resync<'a> {
    fn new(run: &'a Run, sb: &'a SandboxInfo, commit: &'a str, dest: String) -> Resync<'a> {
        let home = sb.home.trim_end_matches('/').to_owned();
        let run_id = run.cfg.run_id.clone();
        Resync {
            run,
            sb,
            commit,
            stream: run.cfg.provider.streaming(),
            dest,
            stamp: stamp_path(&home, &run_id),
            aux: format!("{home}/.rfs-resync-{run_id}"),
            upload: format!("{home}/.rfs-resync-{run_id}.tar"),
        }
    }

    /// The re-sync failed after it touched the sandbox (see [`Run::sync_failed`]).
    fn fail(&self, what: String) -> Error {
        let msg = format!(
            "re-sync of sandbox {} to commit {} failed: {what}",
            self.sb.id, self.commit
        );
        self.run
            .sync_failed(&self.sb.id, self.commit, msg, "failed re-sync")
    }

    /// Run one command of the re-sync in the sandbox (with `input` on its
    /// stdin, where the provider streams); its output, or why it failed.
    fn exec(
        &self,
        argv: Vec<String>,
        input: Option<InputStream>,
        deadline: std::time::Duration,
    ) -> std::result::Result<Collect, ApplyError> {
        let (run, sb) = (self.run, self.sb);
        let req = ExecRequest {
            argv,
            cwd: sb.home.clone(),
            env: vec![("LC_ALL".into(), "C".into())],
            timeout: Some(deadline),
            cancel: run.cancel_token().child_token(),
        };
        let mut bounded =
            BoundedCollect::new(TREE_REPORT_OUTPUT, TREE_REPORT_STDERR, req.cancel.clone());
        let p = &run.cfg.provider;
        // An input is only made where the provider streams.
        let waited = match (input, self.stream) {
            (Some(i), Some(st)) => {
                run.block_on_watched(&sb.id, st.exec_with_input(&sb.id, &req, i, &mut bounded))
            }
            _ => run.block_on_watched(&sb.id, p.exec(&sb.id, &req, &mut bounded)),
        };
        if let Some(e) = bounded.error(&format!("the re-sync's command in sandbox {}", sb.id)) {
            return Err(ApplyError::Provider(e));
        }
        let out = bounded.out;
        let o = waited.map_err(|how| {
            run.record_sandbox_lost(&sb.id, "sync_source", &how);
            ApplyError::Stalled(how)
        })??;
        if o.cancelled {
            return Err(ApplyError::Interrupted);
        }
        if o.timed_out {
            return Err(ApplyError::Deadline(deadline.as_secs()));
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
    }

    /// What the synced root holds now; it must still resolve to
    /// `physical_root`, where the first sync put it (`tracked`: entries
    /// the old commit has, for the deadline).
    fn inspect(&self, physical_root: &str, tracked: usize) -> Result<Listing> {
        let seen = self
            .exec(
                vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    remote::inspect_script(),
                    "rfs-inspect".into(),
                    self.dest.clone(),
                    self.stamp.clone(),
                ],
                None,
                deadline(tracked, 0),
            )
            .and_then(|o| Ok(remote::parse_listing(&o.stdout, false)?))
            .map_err(|e| self.fail(format!("inspecting the synced root: {e}")))?;
        if seen.physical_root != physical_root {
            return Err(self.fail(format!(
                "the synced root now resolves to {} instead of {}",
                seen.physical_root, physical_root
            )));
        }
        Ok(seen)
    }

    /// The sandbox's sha256 of each of `files` (tracked regular files of
    /// `tree`, which gives their sizes), in commands of bounded size;
    /// nothing runs when there are none.
    fn hash(
        &self,
        files: &[Vec<u8>],
        tree: &Manifest,
        what: &str,
    ) -> Result<std::collections::BTreeMap<Vec<u8>, String>> {
        let mut hashed = std::collections::BTreeMap::new();
        let args: Vec<String> = files.iter().map(|p| remote::escape_arg(p)).collect();
        // Every file's size counts in each command: a bound, not a forecast.
        let bytes = files
            .iter()
            .filter_map(|p| match tree.entries.get(p) {
                Some(Entry::File { size, .. }) => Some(*size),
                _ => None,
            })
            .sum();
        for chunk in argv_chunks(args).into_iter().filter(|c| !c.is_empty()) {
            let n = chunk.len();
            let mut argv = vec![
                "/bin/sh".into(),
                "-c".into(),
                remote::hash_script(),
                "rfs-hash".into(),
                self.dest.clone(),
            ];
            argv.extend(chunk);
            let l = self
                .exec(argv, None, deadline(n, bytes))
                .and_then(|o| Ok(remote::parse_listing(&o.stdout, false)?))
                .map_err(|e| self.fail(format!("{what}: {e}")))?;
            hashed.extend(l.hashed);
        }
        Ok(hashed)
    }

    /// Upload the delta, if any, unless the provider streams it on the
    /// apply's stdin instead.
    fn upload_delta(&self, delta: &Option<Delta>) -> Result<()> {
        if let (Some((tmp, _, _, _)), false) = (delta, self.stream.is_some()) {
            let (run, id) = (self.run, &self.sb.id);
            run.block_on_watched(id, run.cfg.provider.upload(id, tmp.path(), &self.upload))
                .map_err(|how| {
                    run.record_sandbox_lost(id, "sync_source", &how);
                    self.fail(format!("upload: {}", ApplyError::Stalled(how)))
                })?
                .map_err(|e| self.fail(format!("upload: {e}")))?;
        }
        Ok(())
    }

    /// What the sandbox holds now: the listing of the synced root, and the
    /// content hash of the tracked files written since the last sync.
    fn inspect_and_hash(
        &self,
        bound: &BoundSource,
        next: &NextTree,
    ) -> Result<(Listing, std::collections::BTreeMap<Vec<u8>, String>)> {
        let seen = self.inspect(&bound.physical_root, bound.manifest.entries.len())?;
        let before = self.hash(
            &plan_mod::candidates(&bound.manifest, next, &seen),
            &next.manifest,
            "hashing the tracked files written since the last sync",
        )?;
        Ok((seen, before))
    }

    /// Hash the tracked files of `manifest` that something else wrote
    /// while the change was applied, into `after`.
    fn hash_written_meanwhile(&self, after: &mut Listing, manifest: &Manifest) -> Result<()> {
        let meanwhile: Vec<Vec<u8>> = after
            .newer
            .iter()
            .filter(|p| {
                matches!(manifest.entries.get(*p), Some(Entry::File { .. }))
                    && !after.hashed.contains_key(*p)
            })
            .cloned()
            .collect();
        let meanwhile = self.hash(
            &meanwhile,
            manifest,
            "hashing the tracked files written during the change",
        )?;
        after.hashed.extend(meanwhile);
        Ok(())
    }

    /// Remove what the plan removes, extract the delta and hash the
    /// files it shipped: the removals in commands of bounded size, then
    /// the delta with the first command naming a shipped file (later ones
    /// only hash). The last command's report of the root is returned,
    /// with the delta's digest and every shipped file's hash. `walked`:
    /// entries of the synced root, for the deadline.
    fn apply(
        &self,
        plan: &Plan,
        next: &NextTree,
        delta: &Option<Delta>,
        walked: usize,
    ) -> Result<Listing> {
        let mut args = remote::removal_args(&plan.remove, &plan.rmdir)
            .into_iter()
            .map(|a| {
                String::from_utf8(a).map_err(|a| {
                    self.fail(format!(
                        "{} must be removed, and a re-sync passes only UTF-8 paths",
                        rfs_sandbox::source::display_path(&a.into_bytes()[1..])
                    ))
                })
            })
            .collect::<Result<Vec<String>>>()?;
        args.extend(remote::hash_args(&plan.shipped_regular(next)));
        let chunks = argv_chunks(args);
        let last = chunks.len() - 1;
        let extract = chunks
            .iter()
            .position(|c| c.iter().any(|a| a.starts_with('S')))
            .unwrap_or(last);
        let bytes = delta.as_ref().map_or(0, |d| d.2);
        let streaming = self.stream.is_some();
        let mut after = Listing::default();
        let mut archive_sha256 = String::new();
        let mut hashed = std::collections::BTreeMap::new();
        for (i, chunk) in chunks.into_iter().enumerate() {
            let input: Option<InputStream> =
                match delta {
                    Some((tmp, _, _, _)) if i == extract && streaming => Some(InputStream::new(
                        tokio::fs::File::from_std(tmp.reopen().map_err(|e| {
                            self.fail(format!("cannot read the delta archive: {e}"))
                        })?),
                    )),
                    _ => None,
                };
            let arc = match (delta, input.is_some()) {
                (_, true) => remote::STDIN.to_owned(),
                (Some(_), false) if i == extract => self.upload.clone(),
                _ => "none".into(),
            };
            let mut argv = vec![
                "/bin/sh".into(),
                "-c".into(),
                remote::apply_script(),
                "rfs-apply".into(),
                arc,
                self.dest.clone(),
                self.aux.clone(),
                self.stamp.clone(),
            ];
            let n = walked + chunk.len();
            argv.extend(chunk);
            // The extraction writes the delta and hashes it and the files.
            let budget = deadline(n, if i == extract { 2 * bytes } else { bytes });
            let out = self
                .exec(argv, input, budget)
                .map_err(|e| self.fail(format!("applying the change: {e}")))?;
            let mut l =
                remote::parse_listing(&out.stdout, true).map_err(|e| self.fail(e.to_string()))?;
            hashed.append(&mut l.hashed);
            if i == extract {
                archive_sha256 = std::mem::take(&mut l.archive_sha256);
            }
            if i == last {
                after = l;
            }
        }
        after.archive_sha256 = archive_sha256;
        after.hashed = hashed;
        Ok(after)
    }

    /// Check the root the sandbox reported against the new tree: the
    /// delta arrived intact and the root equals the commit. The new
    /// manifest (with the shipped files' digests) and what was compared.
    fn verify(
        &self,
        old: &Manifest,
        next: &NextTree,
        plan: &Plan,
        after: &Listing,
        archive_sha256: &str,
        shipped: &Manifest,
    ) -> Result<(Manifest, Checked)> {
        if after.archive_sha256 != archive_sha256 {
            return Err(self.fail(format!(
                "the delta archive arrived corrupted: local sha256 {archive_sha256}, sandbox sha256 {}",
                after.archive_sha256
            )));
        }
        let mut manifest = next.manifest.clone();
        plan_mod::fill_digests(&mut manifest, shipped).map_err(|e| self.fail(e.to_string()))?;
        let checked = plan_mod::check(old, &manifest, plan, after, 20).map_err(|d| {
            self.fail(format!(
                "the synced root does not equal commit {}: {}",
                self.commit,
                d.join("; ")
            ))
        })?;
        Ok((manifest, checked))
    }
}

/// Removal arguments in groups of at most [`ARGV_BUDGET`] bytes (a
/// longer argument alone), one command each; always at least one group.
fn argv_chunks(removals: Vec<String>) -> Vec<Vec<String>> {
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
    chunks
}
