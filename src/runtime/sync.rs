//! `sync_source()`: resolve once, build from the object database, provision
//! (labels carry the pins), upload, verify inside the sandbox, pin. Any
//! failure after provisioning destroys the sandbox and is a refusal.

use std::path::Path;
use std::time::Instant;

use super::{BoundSource, Run};
use crate::error::{Error, Result};
use crate::events::{Event, SubmodulePin};
use crate::provider::{Collect, ExecRequest};
use crate::source::{archive, remote_check, repo, SourceOptions, SubmodulePolicy};

/// What a bound source is pinned to; returned to the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePin {
    pub commit: String,
    pub tree_digest: String,
    pub archive_sha256: String,
    pub files: usize,
    /// Absolute remote path of the synced root.
    pub workdir: String,
}

/// The options that identify a bind request; a second bind must match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRequestKey {
    pub repo_root: std::path::PathBuf,
    pub rev: String,
    pub subdir: Option<String>,
    pub allow_dirty: bool,
    pub submodules: SubmodulePolicy,
    pub dest: String,
}

impl Run {
    /// Bind the run's source. `implicit` marks a bind done by the first
    /// `step()` because the script did not call `sync_source()`.
    pub fn sync_source(&self, opts: SourceOptions, implicit: bool) -> Result<SourcePin> {
        self.check_cancelled()?;
        validate_dest(&opts.dest).map_err(|m| self.refuse(m))?;
        let resolved = repo::resolve(&opts).map_err(|e| {
            let msg = format!("cannot bind the source: {e}");
            let _ = self.record(Event::SourceRefused {
                reason: msg.clone(),
            });
            self.refuse(msg)
        })?;
        let key = SyncRequestKey {
            repo_root: resolved.repo_root.clone(),
            rev: opts.rev.clone(),
            subdir: resolved.subdir.clone(),
            allow_dirty: opts.allow_dirty,
            submodules: opts.submodules,
            dest: opts.dest.clone(),
        };
        if let Some(b) = &self.state().source {
            if b.request == key || implicit {
                return Ok(b.pin.clone());
            }
            return Err(Error::Refused(format!(
                "the run's source is already bound to commit {} with other options; a run binds exactly one source",
                b.pin.commit
            )));
        }
        let commit = resolved.commit.to_string();
        let tree = resolved.tree.to_string();
        self.record(Event::SourceResolved {
            repo: resolved.repo_root.display().to_string(),
            rev: opts.rev.clone(),
            commit: commit.clone(),
            tree_digest: tree.clone(),
            subdir: resolved.subdir.clone(),
            implicit,
            dirty_paths_not_shipped: resolved.dirty.clone(),
            submodules: resolved
                .submodules
                .iter()
                .map(|s| SubmodulePin {
                    path: s.path.clone(),
                    commit: s.commit.to_string(),
                })
                .collect(),
        })?;

        // Build the archive locally before provisioning: a repository
        // problem must not cost a sandbox.
        let started = Instant::now();
        let tmp = tempfile::Builder::new()
            .prefix("rfs-source-")
            .suffix(".tar")
            .tempfile_in(&self.cfg.scratch_dir)
            .map_err(Error::internal)?;
        let repo_dir = resolved.repo_root.clone();
        // The script thread does the (blocking) git work itself.
        let built = archive::build(&repo_dir, &resolved, tmp.path())
            .map_err(|e| self.refuse(format!("cannot build the source archive: {e}")))?;
        let build_ms = started.elapsed().as_millis();

        let sb = self.sandbox_with_pins(Some((&commit, &tree)))?;
        let dest = format!("{}/{}", sb.home.trim_end_matches('/'), opts.dest);
        let upload = format!(
            "{}/.rfs-upload-{}.tar",
            sb.home.trim_end_matches('/'),
            self.cfg.run_id
        );
        let fail = |what: String| -> Error {
            let msg = format!("source sync into sandbox {} failed: {what}", sb.id);
            let _ = self.record(Event::SourceSyncFailed {
                sandbox_id: sb.id.clone(),
                commit: commit.clone(),
                reason: msg.clone(),
            });
            let err = self.refuse(msg);
            if let Some(w) = self.block_on(super::teardown::destroy_and_record(
                self,
                &sb.id,
                "failed source sync",
            )) {
                self.warn(&w);
            }
            err
        };
        let p = self.cfg.provider.clone();
        let t_up = Instant::now();
        if let Err(e) = self.block_on(p.upload(&sb.id, tmp.path(), &upload)) {
            return Err(fail(format!("upload: {e}")));
        }
        let upload_ms = t_up.elapsed().as_millis();
        drop(tmp);
        let t_ver = Instant::now();
        let req = ExecRequest {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                remote_check::SCRIPT.into(),
                "rfs-verify".into(),
                upload.clone(),
                dest.clone(),
            ],
            cwd: sb.home.clone(),
            env: vec![("LC_ALL".into(), "C".into())],
            timeout: Some(std::time::Duration::from_secs(1800)),
            cancel: self.cancel_token(),
        };
        let mut out = Collect::default();
        let outcome = match self.block_on(p.exec(&sb.id, &req, &mut out)) {
            Ok(o) => o,
            Err(e) => return Err(fail(format!("running the verification: {e}"))),
        };
        if outcome.cancelled {
            return Err(fail("interrupted".into()));
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if outcome.exit != Some(0) {
            let what = match outcome.exit {
                Some(remote_check::EXIT_MISSING_TOOL) => stderr,
                Some(remote_check::EXIT_DEST_EXISTS) => stderr,
                Some(remote_check::EXIT_MKDIR) => format!("cannot create {dest}: {stderr}"),
                Some(remote_check::EXIT_EXTRACT) => format!("extraction failed: {stderr}"),
                Some(remote_check::EXIT_DIGEST) => format!("cannot hash the upload: {stderr}"),
                other => format!("verification exited with {other:?}: {stderr}"),
            };
            return Err(fail(what));
        }
        let report = match remote_check::parse_report(&out.stdout) {
            Ok(r) => r,
            Err(e) => return Err(fail(e)),
        };
        if report.archive_sha256 != built.sha256 {
            return Err(fail(format!(
                "the archive arrived corrupted: local sha256 {}, sandbox sha256 {}",
                built.sha256, report.archive_sha256
            )));
        }
        let expected = remote_check::observable(&built.manifest);
        let diff = expected.diff(&report.manifest, 20);
        if !diff.is_empty() {
            return Err(fail(format!(
                "the extracted tree does not equal commit {commit}: {}",
                diff.join("; ")
            )));
        }
        let verify_ms = t_ver.elapsed().as_millis();
        let physical_root = report.physical_root.clone();
        let pin = SourcePin {
            commit: commit.clone(),
            tree_digest: tree.clone(),
            archive_sha256: built.sha256.clone(),
            files: built.manifest.file_count(),
            workdir: dest.clone(),
        };
        self.record(Event::SourceVerify {
            sandbox_id: sb.id.clone(),
            archive_sha256_local: built.sha256.clone(),
            archive_sha256_sandbox: report.archive_sha256.clone(),
            archive_bytes: built.size,
            entries_compared: expected.entries.len(),
            file_set_equal: true,
            content_equal: true,
            build_ms: ms(build_ms),
            upload_ms: ms(upload_ms),
            verify_ms: ms(verify_ms),
        })?;
        self.record(Event::SourcePin {
            sandbox_id: sb.id.clone(),
            commit: pin.commit.clone(),
            tree_digest: pin.tree_digest.clone(),
            archive_sha256: pin.archive_sha256.clone(),
            files: pin.files,
            workdir: pin.workdir.clone(),
            implicit,
        })?;
        self.state().source = Some(BoundSource {
            pin: pin.clone(),
            manifest: built.manifest,
            physical_root,
            request: key,
        });
        Ok(pin)
    }
}

/// The destination must be a plain relative path below the sandbox home.
fn validate_dest(dest: &str) -> std::result::Result<(), String> {
    let p = Path::new(dest);
    let ok = !dest.is_empty()
        && p.is_relative()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "sync_source dest `{dest}` must be a relative path below the sandbox home without `..`"
        ))
    }
}

/// Milliseconds for the journal.
pub(crate) fn ms(ms: u128) -> u64 {
    u64::try_from(ms).unwrap_or(u64::MAX)
}
