//! `sync_source()`: resolve once, build from the object database, provision
//! (labels carry the pins), upload, verify inside the sandbox, pin. Any
//! failure after provisioning destroys the sandbox and is a refusal.

use std::path::Path;
use std::time::Instant;

use super::{BoundSource, Run};
use crate::error::{Error, Result};
use crate::events::{Event, SubmodulePin};
use crate::provider::Provider;
use crate::provider::{Collect, ExecRequest};
use crate::source::archive_digest::DigestKind;
use crate::source::manifest::Entry;
use crate::source::repo::ResolvedSource;
use crate::source::{
    archive, native_check, remote_check, repo, stream, SourceError, SourceOptions, SubmodulePolicy,
};

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

impl SyncRequestKey {
    /// Whether `other` binds the same place (repository, subdirectory,
    /// destination, submodule policy): a re-sync may change only the
    /// revision (and `allow_dirty`).
    pub fn same_place(&self, other: &SyncRequestKey) -> bool {
        self.repo_root == other.repo_root
            && self.subdir == other.subdir
            && self.dest == other.dest
            && self.submodules == other.submodules
    }
}

impl Run {
    /// Bind the run's source. `implicit` marks a bind done by the first
    /// `step()` because the script did not call `sync_source()`.
    pub fn sync_source(&self, opts: SourceOptions, implicit: bool) -> Result<SourcePin> {
        self.check_cancelled()?;
        // A replay ships the commit it replays, whatever HEAD and the
        // working tree are now (dirty paths are still journaled).
        // A full commit id names one commit whatever the repository's
        // state, so a replay honours it (a replayed re-sync walks the same
        // commits).
        let opts = match &self.cfg.replay_of {
            Some(_) if is_full_id(&opts.rev) => SourceOptions {
                allow_dirty: true,
                ..opts
            },
            Some(r) => SourceOptions {
                rev: r.commit.clone(),
                allow_dirty: true,
                ..opts
            },
            None => opts,
        };
        validate_rev(&opts.rev).map_err(|e| self.refuse(e.to_string()))?;
        validate_dest(&opts.dest).map_err(|e| self.refuse(e.to_string()))?;
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
        let bound = self.state().source.clone();
        if let Some(b) = bound {
            let same = b.pin.commit == resolved.commit.to_string()
                && b.pin.tree_digest == resolved.tree.to_string();
            if implicit || (same && b.request.same_place(&key)) {
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

        let p = self.cfg.provider.clone();
        let started = Instant::now();
        // The provider's capabilities decide the transfer: a stream into
        // the verifier where it can take one, else a file.
        let stream = p.streaming();
        let streaming = stream.is_some();
        let remote = p.profile().remote;
        // On the file path the archive is built before provisioning (a
        // repository problem must not cost a sandbox), except for remote
        // providers, whose compression is decided by probing the sandbox.
        // A streamed archive is built while the sandbox extracts it.
        let mut prebuilt = None;
        if !streaming && !remote {
            prebuilt = Some(
                self.build_archive_file(&resolved, false)
                    .map_err(|e| self.refuse(format!("cannot build the source archive: {e}")))?,
            );
        }

        let sb = self.sandbox_with_pins(Some((&commit, &tree)))?;
        let home = sb.home.trim_end_matches('/');
        let dest = format!("{home}/{}", opts.dest);
        let upload = format!("{home}/.rfs-upload-{}.tar", self.cfg.run_id);
        let aux = format!("{home}/.rfs-verify-{}", self.cfg.run_id);
        let fail = |what: String| -> Error {
            // A sandbox killed or removed from outside is named as such,
            // not as the exit code its end left the verifier with.
            // A paused one too: docker refuses an exec into it at once.
            if let Some(how) = self.sandbox_stall(&sb.id) {
                let msg = format!(
                    "source sync into sandbox {id} failed: sandbox {id} {how} during the source's verification ({what})",
                    id = sb.id
                );
                self.record_sandbox_lost(&sb.id, "sync_source", &how);
                return self.sync_failed(&sb.id, &commit, msg, "failed source sync");
            }
            let msg = format!("source sync into sandbox {} failed: {what}", sb.id);
            self.sync_failed(&sb.id, &commit, msg, "failed source sync")
        };
        // A sandbox that stalls while the sync waits on it (paused, dead or
        // gone outside rfs) ends the wait (see `watch`).
        let stall = |how: String| -> Error {
            let msg = format!(
                "source sync into sandbox {id} failed: sandbox {id} {how} during the source sync; rfs stopped waiting for it",
                id = sb.id
            );
            self.record_sandbox_lost(&sb.id, "sync_source", &how);
            self.sync_failed(&sb.id, &commit, msg, "failed source sync")
        };
        let gzip = if remote {
            match self
                .block_on_watched(
                    &sb.id,
                    probe_gzip(p.as_ref(), &sb.id, &sb.home, self.cancel_token()),
                )
                .map_err(stall)?
            {
                Ok(g) => g,
                Err(e) => return Err(fail(format!("probing for a decompressor: {e}"))),
            }
        } else {
            false
        };
        // rfs's own verifier where the provider can run it (it reads the
        // stream itself); the POSIX script everywhere else, and where it
        // does not start (the journal says why).
        let mut native = stream.and_then(|s| s.native());
        let mut verifier_fallback = None;
        // How the stream will travel is decided alongside (both may ask
        // the sandbox something).
        let (prepared, route) = self
            .block_on_watched(&sb.id, async {
                tokio::join!(
                    async {
                        match native {
                            Some(n) => n.prepare_own_executable(&sb.id).await,
                            None => Ok(()),
                        }
                    },
                    async {
                        match stream {
                            Some(s) => Some(s.input_route(&sb.id).await),
                            None => None,
                        }
                    }
                )
            })
            .map_err(stall)?;
        if let Err(e) = prepared {
            tracing::info!(sandbox = %sb.id, "verifying with the POSIX script: {e}");
            native = None;
            verifier_fallback = Some(e.to_string());
        }
        // The native verifier's archive digest costs the host no second
        // pass over the content (see `archive_digest`).
        let digest_kind = if native.is_some() {
            DigestKind::Entries
        } else {
            DigestKind::Sha256
        };
        let stamp = super::resync::stamp_path(home, &self.cfg.run_id);
        // Both verifiers take the same arguments after their own program.
        let program: &[&str] = if native.is_some() {
            &["rfs", native_check::COMMAND]
        } else {
            &["/bin/sh", "-c", remote_check::SCRIPT, "rfs-verify"]
        };
        let verify_req = |archive: &str| ExecRequest {
            argv: program
                .iter()
                .copied()
                .chain([archive, &dest, &aux, if gzip { "gzip" } else { "" }, &stamp])
                .map(str::to_owned)
                .collect(),
            cwd: sb.home.clone(),
            env: vec![("LC_ALL".into(), "C".into())],
            timeout: Some(std::time::Duration::from_secs(1800)),
            cancel: self.cancel_token(),
        };
        let mut out = Collect::default();
        let (built, build_ms, upload_ms, outcome, t_ver) = if let Some(stream) = stream {
            // The builder computes the digest when the reader cannot (it
            // sees compressed bytes) or should not (the entries digest
            // reuses the builder's file hashes); the reader otherwise.
            let builder_digest =
                (gzip || digest_kind == DigestKind::Entries).then_some(digest_kind);
            // With the builder's digest and no compression the stream
            // needs no counting or hashing on the way: a pipe the provider
            // can hand to the verifier as its standard input.
            let (writer, input, streamed) = if builder_digest.is_some() && !gzip {
                let (w, input) = stream::pipe()
                    .map_err(|e| fail(format!("cannot create the archive's pipe: {e}")))?;
                (stream::ArchiveWriter::Pipe(w), input, None)
            } else {
                let (w, r) = stream::channel_with(builder_digest.is_none());
                let digest = r.digest();
                (
                    stream::ArchiveWriter::Chunks(w),
                    crate::provider::InputStream::new(r),
                    Some(digest),
                )
            };
            let resolved2 = resolved.clone();
            let builder = std::thread::Builder::new()
                .name("rfs-archive".into())
                .spawn(move || {
                    let t = Instant::now();
                    build_streamed(&resolved2, writer, gzip, builder_digest)
                        .map(|b| (b, t.elapsed().as_millis()))
                })
                .map_err(Error::internal)?;
            let t_ver = Instant::now();
            let req = verify_req(remote_check::STDIN);
            // On a stall the builder is left to end when the teardown
            // ends the sandbox that holds its pipe's reader.
            let outcome = self
                .block_on_watched(&sb.id, async {
                    match native {
                        Some(n) => n.exec_own_with_input(&sb.id, &req, input, &mut out).await,
                        None => stream.exec_with_input(&sb.id, &req, input, &mut out).await,
                    }
                })
                .map_err(stall)?;
            let (built, build_ms) = match builder.join() {
                Ok(Ok(b)) => b,
                // The consumer stopped reading first: its failure, or the
                // verifier's refusal, says why.
                Ok(Err(e)) if e.to_string().contains(stream::READER_GONE) => match outcome {
                    Err(e) => return Err(fail(format!("streaming the archive: {e}"))),
                    Ok(o) => {
                        let why = refusal(&o, &out.stderr, &dest).unwrap_or_else(|| {
                            "the sandbox did not read the archive to its end".into()
                        });
                        return Err(fail(why));
                    }
                },
                Ok(Err(e)) => return Err(fail(format!("cannot build the source archive: {e}"))),
                Err(_) => return Err(fail("the archive builder panicked".into())),
            };
            let outcome = match outcome {
                Ok(o) => o,
                Err(e) => return Err(fail(format!("streaming the archive: {e}"))),
            };
            // The pipe's bytes are the builder's own count (the digest
            // the sandbox reports proves it read them all).
            let (sha, wire) = match streamed.map(|d| d.get()) {
                Some(Some(counted)) => counted,
                Some(None) => {
                    return Err(fail(
                        "the sandbox did not read the archive to its end".into(),
                    ))
                }
                None => (None, built.archive.as_ref().map_or(0, |a| a.1)),
            };
            let Some((sha256, size)) = built.archive.clone().or(sha.map(|s| (s, wire))) else {
                return Err(fail("the archive was not hashed".into()));
            };
            let built = archive::BuiltArchive {
                sha256,
                size,
                wire_bytes: wire,
                manifest: built.manifest,
            };
            (built, build_ms, 0, outcome, t_ver)
        } else {
            let t_build = Instant::now();
            let (tmp, built) = match prebuilt.take() {
                Some(b) => b,
                None => match self.build_archive_file(&resolved, gzip) {
                    Ok(b) => b,
                    Err(e) => return Err(fail(format!("cannot build the source archive: {e}"))),
                },
            };
            let build_ms = if remote {
                t_build.elapsed().as_millis()
            } else {
                started.elapsed().as_millis()
            };
            let t_up = Instant::now();
            let uploaded = self.block_on_watched(&sb.id, p.upload(&sb.id, tmp.path(), &upload));
            if let Err(e) = uploaded.map_err(stall)? {
                return Err(fail(format!("upload: {e}")));
            }
            let upload_ms = t_up.elapsed().as_millis();
            drop(tmp);
            let t_ver = Instant::now();
            let verified =
                self.block_on_watched(&sb.id, p.exec(&sb.id, &verify_req(&upload), &mut out));
            let outcome = match verified.map_err(stall)? {
                Ok(o) => o,
                Err(e) => return Err(fail(format!("running the verification: {e}"))),
            };
            (built, build_ms, upload_ms, outcome, t_ver)
        };
        if let Some(why) = refusal(&outcome, &out.stderr, &dest) {
            return Err(fail(why));
        }
        let report = match remote_check::parse_report(&out.stdout) {
            Ok(r) => r,
            Err(e) => return Err(fail(e.to_string())),
        };
        if report.archive_sha256 != built.sha256 {
            return Err(fail(format!(
                "the archive arrived corrupted: local {kind} {}, sandbox {kind} {}",
                built.sha256,
                report.archive_sha256,
                kind = digest_kind.name()
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
            transfer: if streaming { "stream" } else { "file" }.into(),
            compression: if gzip { "gzip" } else { "none" }.into(),
            wire_bytes: built.wire_bytes,
            tree_bytes: built
                .manifest
                .entries
                .values()
                .map(|e| match e {
                    Entry::File { size, .. } => *size,
                    _ => 0,
                })
                .sum(),
            sync_ms: ms(started.elapsed().as_millis()),
            verifier: if native.is_some() { "native" } else { "posix" }.into(),
            verifier_fallback,
            stream_route: route.as_ref().map(|r| r.via.clone()),
            stream_fallback: route.and_then(|r| r.fallback),
            archive_digest: digest_kind.name().into(),
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
    fn build_archive_file(
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

/// Why a verification that ended this way refused (`None`: it exited 0).
fn refusal(outcome: &crate::provider::ExecOutcome, stderr: &[u8], dest: &str) -> Option<String> {
    if outcome.cancelled {
        return Some("interrupted".into());
    }
    let stderr = String::from_utf8_lossy(stderr).trim().to_owned();
    Some(match outcome.exit {
        Some(0) => return None,
        Some(remote_check::EXIT_MISSING_TOOL) => stderr,
        Some(remote_check::EXIT_DEST_EXISTS) => stderr,
        Some(remote_check::EXIT_MKDIR) => format!("cannot create {dest}: {stderr}"),
        Some(remote_check::EXIT_EXTRACT) => format!("extraction failed: {stderr}"),
        Some(remote_check::EXIT_DIGEST) => format!("cannot hash the upload: {stderr}"),
        Some(remote_check::EXIT_DECOMPRESS) => {
            format!("decompressing the transfer failed: {stderr}")
        }
        other if stderr.is_empty() => format!(
            "verification ended with {} and said nothing",
            crate::exit_code::ExitText(other)
        ),
        other => format!(
            "verification ended with {}: {stderr}",
            crate::exit_code::ExitText(other)
        ),
    })
}

/// Build the archive into the stream (gzip-compressed with `gzip`),
/// computing the `digest` of the uncompressed tar here when asked.
fn build_streamed(
    resolved: &ResolvedSource,
    writer: stream::ArchiveWriter,
    gzip: bool,
    digest: Option<DigestKind>,
) -> std::result::Result<archive::Built, crate::source::SourceError> {
    if gzip {
        let z = flate2::write::GzEncoder::new(writer, flate2::Compression::fast());
        let (z, built) = archive::build_into(&resolved.repo_root, resolved, z, digest)?;
        z.finish()?.finish()?;
        Ok(built)
    } else {
        let (w, built) = archive::build_into(&resolved.repo_root, resolved, writer, digest)?;
        w.finish()?;
        Ok(built)
    }
}

/// Whether the sandbox can decompress gzip: a round trip through its
/// `gzip`. An unusable or missing gzip means an uncompressed transfer; a
/// provider failure is an error.
async fn probe_gzip(
    p: &dyn Provider,
    id: &str,
    home: &str,
    cancel: tokio_util::sync::CancellationToken,
) -> crate::provider::ProviderResult<bool> {
    let req = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            "command -v gzip >/dev/null 2>&1 && printf rfs-probe | gzip -c | gzip -dc".into(),
        ],
        cwd: home.into(),
        env: vec![],
        timeout: Some(std::time::Duration::from_secs(60)),
        cancel,
    };
    let mut out = Collect::default();
    let o = p.exec(id, &req, &mut out).await?;
    Ok(o.success() && out.stdout == b"rfs-probe")
}

/// The destination must be a plain relative path below the sandbox home.
fn validate_dest(dest: &str) -> std::result::Result<(), crate::validate::InputError> {
    let p = Path::new(dest);
    let ok = !dest.is_empty()
        && p.is_relative()
        && p.components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if ok {
        Ok(())
    } else {
        Err(crate::validate::InputError::NotBelowHome {
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

/// Milliseconds for the journal.
pub(crate) fn ms(ms: u128) -> u64 {
    u64::try_from(ms).unwrap_or(u64::MAX)
}
