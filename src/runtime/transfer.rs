//! How a first sync's archive reaches the sandbox and is verified there.
//! The transfer plan is chosen once, from the provider's typed
//! capabilities: a stream into the verifier while the archive is built
//! ([`rfs_sandbox::provider::StreamInput`], verified by rfs's own executable
//! where the provider offers [`rfs_sandbox::provider::NativeVerifier`]), or a
//! file uploaded whole and verified by the POSIX script. Both routes end
//! in the same report check.

use std::time::Instant;

use super::sync_target::SyncTarget;
use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::{Compression, Transfer, Verifier};
use rfs_sandbox::provider::{
    Collect, ExecOutcome, ExecRequest, InputRoute, NativeVerifier, Provider, StreamInput,
};
use rfs_sandbox::source::archive_digest::DigestKind;
use rfs_sandbox::source::repo::ResolvedSource;
use rfs_sandbox::source::{archive, native_check, remote_check, stream};

/// How the archive travels, decided once per sync.
pub(super) struct TransferPlan<'p> {
    pub(super) route: Route<'p>,
    /// The archive is gzip-compressed on the way (remote providers whose
    /// sandbox has gzip).
    pub(super) gzip: bool,
    /// Why the native verifier the provider offers is not used.
    pub(super) verifier_fallback: Option<String>,
}

/// The two routes of an archive.
pub(super) enum Route<'p> {
    /// Streamed into the verifier's standard input while it is built.
    Stream {
        stream: &'p dyn StreamInput,
        native: Option<&'p dyn NativeVerifier>,
        route: InputRoute,
    },
    /// Built into a file (before provisioning when it can be), uploaded,
    /// then verified by the POSIX script.
    File {
        prebuilt: std::cell::Cell<Option<(tempfile::NamedTempFile, archive::BuiltArchive)>>,
    },
}

impl TransferPlan<'_> {
    fn native(&self) -> Option<&dyn NativeVerifier> {
        match &self.route {
            Route::Stream { native, .. } => *native,
            Route::File { .. } => None,
        }
    }

    /// The native verifier's archive digest costs the host no second pass
    /// over the content (see `archive_digest`).
    pub(super) fn digest_kind(&self) -> DigestKind {
        if self.native().is_some() {
            DigestKind::Entries
        } else {
            DigestKind::Sha256
        }
    }

    pub(super) fn transfer(&self) -> Transfer {
        match self.route {
            Route::Stream { .. } => Transfer::Stream,
            Route::File { .. } => Transfer::File,
        }
    }

    pub(super) fn verifier(&self) -> Verifier {
        if self.native().is_some() {
            Verifier::Native
        } else {
            Verifier::Posix
        }
    }

    pub(super) fn compression(&self) -> Compression {
        if self.gzip {
            Compression::Gzip
        } else {
            Compression::None
        }
    }

    pub(super) fn route(&self) -> Option<&InputRoute> {
        match &self.route {
            Route::Stream { route, .. } => Some(route),
            Route::File { .. } => None,
        }
    }

    /// The verifier's command for `archive` (`-`: its standard input):
    /// both verifiers take the same arguments after their own program.
    fn verify_req(&self, run: &Run, t: &SyncTarget<'_>, archive: &str) -> ExecRequest {
        let program: &[&str] = if self.native().is_some() {
            &["rfs", native_check::COMMAND]
        } else {
            &["/bin/sh", "-c", remote_check::SCRIPT, "rfs-verify"]
        };
        let gzip = if self.gzip { "gzip" } else { "" };
        ExecRequest {
            argv: program
                .iter()
                .copied()
                .chain([archive, &t.dest, &t.aux, gzip, &t.stamp])
                .map(str::to_owned)
                .collect(),
            cwd: t.sb.home.clone(),
            env: vec![("LC_ALL".into(), "C".into())],
            timeout: Some(std::time::Duration::from_secs(1800)),
            // Its own, cancelled too where its report passes its bound.
            cancel: run.cancel_token().child_token(),
        }
    }
}

/// What a route delivered: the archive as built, and how the verifier
/// ended.
pub(super) struct Sent {
    pub(super) built: archive::BuiltArchive,
    pub(super) build_ms: u128,
    pub(super) upload_ms: u128,
    pub(super) verify_ms: u128,
    outcome: ExecOutcome,
    out: Collect,
}

/// The verifier's report, checked against the archive as built.
pub(super) struct Checked {
    pub(super) archive_sha256: String,
    pub(super) physical_root: String,
    pub(super) entries_compared: usize,
}

/// How a failed sync's transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SyncEnd {
    /// Refused or failed on its own terms.
    Refused,
    /// Cut: the verifier was killed or the stream broke, which may be the
    /// sandbox's death showing before the provider's state does.
    Cut,
}

impl SyncEnd {
    /// How a verifier that ended with `outcome` ended.
    fn of(outcome: &rfs_sandbox::provider::ExecOutcome) -> Self {
        if outcome.signal.is_some() || matches!(outcome.exit, Some(137 | 143)) {
            SyncEnd::Cut
        } else {
            SyncEnd::Refused
        }
    }
}

impl Run {
    /// A sync that failed after it touched the sandbox: a sandbox that
    /// died, vanished or was paused is named as such, not as the exit
    /// code its end left the verifier with (docker refuses an exec into a
    /// paused one at once).
    fn sync_fail(&self, t: &SyncTarget<'_>, what: String, end: SyncEnd) -> Error {
        let id = &t.sb.id;
        // An end by a kill (or a stream cut by one) may come just before
        // the provider's state catches up: asked a few more times then
        // (bounded, 1 s in all).
        let killed = end == SyncEnd::Cut;
        let stall = self.ask_sandbox(id, if killed { 5 } else { 1 }, super::watch::stalled);
        if let Some(how) = stall {
            let msg = format!(
                "source sync into sandbox {id} failed: sandbox {id} {how} during the source's verification ({what})"
            );
            self.record_sandbox_lost(id, "sync_source", &how);
            return self.sync_failed(id, t.commit, msg, "failed source sync");
        }
        let msg = format!("source sync into sandbox {id} failed: {what}");
        self.sync_failed(id, t.commit, msg, "failed source sync")
    }

    /// A sandbox that stalled while the sync waited on it (paused, dead or
    /// gone outside rfs; see `watch`).
    fn sync_stall(&self, t: &SyncTarget<'_>, how: String) -> Error {
        let id = &t.sb.id;
        let msg = format!(
            "source sync into sandbox {id} failed: sandbox {id} {how} during the source sync; rfs stopped waiting for it"
        );
        self.record_sandbox_lost(id, "sync_source", &how);
        self.sync_failed(id, t.commit, msg, "failed source sync")
    }

    /// Decide the transfer: compression (remote providers: does the
    /// sandbox have gzip), the route, and the verifier (rfs's own where
    /// the provider can run it and it starts; the POSIX script elsewhere,
    /// the journal says why).
    pub(super) fn plan_transfer<'p>(
        &self,
        t: &SyncTarget<'_>,
        p: &'p dyn Provider,
        stream: Option<&'p dyn StreamInput>,
        remote: bool,
        prebuilt: Option<(tempfile::NamedTempFile, archive::BuiltArchive)>,
    ) -> Result<TransferPlan<'p>> {
        let id = &t.sb.id;
        let stall = |how| self.sync_stall(t, how);
        let gzip = if remote {
            self.block_on_watched(id, probe_gzip(p, id, &t.sb.home, self.cancel_token()))
                .map_err(stall)?
                .map_err(|e| {
                    self.sync_fail(
                        t,
                        format!("probing for a decompressor: {e}"),
                        SyncEnd::Refused,
                    )
                })?
        } else {
            false
        };
        let Some(stream) = stream else {
            return Ok(TransferPlan {
                route: Route::File {
                    prebuilt: std::cell::Cell::new(prebuilt),
                },
                gzip,
                verifier_fallback: None,
            });
        };
        let native = stream.native();
        // How the stream travels is decided alongside (both may ask the
        // sandbox something).
        let (prepared, route) = self
            .block_on_watched(id, async {
                tokio::join!(
                    async {
                        match native {
                            Some(n) => n.prepare_own_executable(id).await,
                            None => Ok(()),
                        }
                    },
                    stream.input_route(id)
                )
            })
            .map_err(stall)?;
        let (native, verifier_fallback) = match prepared {
            Ok(()) => (native, None),
            Err(e) => {
                tracing::info!(sandbox = %id, "verifying with the POSIX script: {e}");
                (None, Some(e.to_string()))
            }
        };
        Ok(TransferPlan {
            route: Route::Stream {
                stream,
                native,
                route,
            },
            gzip,
            verifier_fallback,
        })
    }

    /// Send the archive by the plan's route and run the verifier.
    pub(super) fn send(
        &self,
        t: &SyncTarget<'_>,
        plan: &TransferPlan<'_>,
        resolved: &ResolvedSource,
    ) -> Result<Sent> {
        match &plan.route {
            Route::Stream { stream, native, .. } => {
                self.send_streamed(t, plan, *stream, *native, resolved)
            }
            Route::File { prebuilt } => self.send_file(t, plan, prebuilt.take(), resolved),
        }
    }

    fn send_streamed(
        &self,
        t: &SyncTarget<'_>,
        plan: &TransferPlan<'_>,
        stream: &dyn StreamInput,
        native: Option<&dyn NativeVerifier>,
        resolved: &ResolvedSource,
    ) -> Result<Sent> {
        let fail = |what: String| self.sync_fail(t, what, SyncEnd::Refused);
        let cut = |what: String| self.sync_fail(t, what, SyncEnd::Cut);
        let (gzip, digest_kind) = (plan.gzip, plan.digest_kind());
        // The builder computes the digest when the reader cannot (it sees
        // compressed bytes) or should not (the entries digest reuses the
        // builder's file hashes); the reader otherwise.
        let builder_digest = (gzip || digest_kind == DigestKind::Entries).then_some(digest_kind);
        // With the builder's digest and no compression the stream needs no
        // counting or hashing on the way: a pipe the provider can hand to
        // the verifier as its standard input.
        let (writer, input, streamed) = if builder_digest.is_some() && !gzip {
            let (w, input) = stream::pipe()
                .map_err(|e| fail(format!("cannot create the archive's pipe: {e}")))?;
            (stream::ArchiveWriter::Pipe(w), input, None)
        } else {
            let (w, r) = stream::channel_with(builder_digest.is_none());
            let digest = r.digest();
            (
                stream::ArchiveWriter::Chunks(w),
                rfs_sandbox::provider::InputStream::new(r),
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
        let req = plan.verify_req(self, t, remote_check::STDIN);
        let id = &t.sb.id;
        let mut bounded = verifier_sink(&req);
        // On a stall the builder is left to end when the teardown ends the
        // sandbox that holds its pipe's reader.
        let outcome = self
            .block_on_watched(id, async {
                match native {
                    Some(n) => n.exec_own_with_input(id, &req, input, &mut bounded).await,
                    None => stream.exec_with_input(id, &req, input, &mut bounded).await,
                }
            })
            .map_err(|how| self.sync_stall(t, how))?;
        // Past its bound the verifier was killed; the builder ends as
        // its reader is gone.
        if let Some(e) = bounded.error(&format!("the source verifier in sandbox {id}")) {
            return Err(fail(e.to_string()));
        }
        let out = bounded.out;
        let (built, build_ms) = match builder.join() {
            Ok(Ok(b)) => b,
            // The consumer stopped reading first: its failure, or the
            // verifier's refusal, says why.
            Ok(Err(rfs_sandbox::source::SourceError::ReaderGone)) => {
                return Err(match outcome {
                    Err(e) => cut(format!("streaming the archive: {e}")),
                    Ok(o) => match refusal(&o, &out.stderr, &t.dest) {
                        Some(why) => self.sync_fail(t, why, SyncEnd::of(&o)),
                        None => cut("the sandbox did not read the archive to its end".into()),
                    },
                });
            }
            Ok(Err(e)) => return Err(fail(format!("cannot build the source archive: {e}"))),
            Err(_) => return Err(fail("the archive builder panicked".into())),
        };
        let outcome = outcome.map_err(|e| cut(format!("streaming the archive: {e}")))?;
        // The pipe's bytes are the builder's own count (the digest the
        // sandbox reports proves it read them all).
        let (sha, wire) = match streamed.map(|d| d.get()) {
            Some(Some(counted)) => counted,
            Some(None) => {
                return Err(cut("the sandbox did not read the archive to its end".into()))
            }
            None => (None, built.archive.as_ref().map_or(0, |a| a.1)),
        };
        let Some((sha256, size)) = built.archive.clone().or(sha.map(|s| (s, wire))) else {
            return Err(fail("the archive was not hashed".into()));
        };
        Ok(Sent {
            built: archive::BuiltArchive {
                sha256,
                size,
                wire_bytes: wire,
                manifest: built.manifest,
            },
            build_ms,
            upload_ms: 0,
            verify_ms: t_ver.elapsed().as_millis(),
            outcome,
            out,
        })
    }

    fn send_file(
        &self,
        t: &SyncTarget<'_>,
        plan: &TransferPlan<'_>,
        prebuilt: Option<(tempfile::NamedTempFile, archive::BuiltArchive)>,
        resolved: &ResolvedSource,
    ) -> Result<Sent> {
        let fail = |what: String| self.sync_fail(t, what, SyncEnd::Refused);
        let stall = |how: String| self.sync_stall(t, how);
        let t_build = Instant::now();
        let ((tmp, built), build_ms) = match prebuilt {
            // Built before provisioning: its time is the sync's so far.
            Some(b) => (b, t.started.elapsed().as_millis()),
            None => (
                self.build_archive_file(resolved, plan.gzip)
                    .map_err(|e| fail(format!("cannot build the source archive: {e}")))?,
                t_build.elapsed().as_millis(),
            ),
        };
        let p = &self.cfg.provider;
        let id = &t.sb.id;
        let t_up = Instant::now();
        self.block_on_watched(id, p.upload(id, tmp.path(), &t.upload))
            .map_err(stall)?
            .map_err(|e| fail(format!("upload: {e}")))?;
        let upload_ms = t_up.elapsed().as_millis();
        drop(tmp);
        let t_ver = Instant::now();
        let req = plan.verify_req(self, t, &t.upload);
        let mut bounded = verifier_sink(&req);
        let ran = self
            .block_on_watched(id, p.exec(id, &req, &mut bounded))
            .map_err(stall)?;
        if let Some(e) = bounded.error(&format!("the source verifier in sandbox {id}")) {
            return Err(fail(e.to_string()));
        }
        let out = bounded.out;
        let outcome = ran.map_err(|e| fail(format!("running the verification: {e}")))?;
        Ok(Sent {
            built,
            build_ms,
            upload_ms,
            verify_ms: t_ver.elapsed().as_millis(),
            outcome,
            out,
        })
    }

    /// The verifier's report against the archive as built: same digest,
    /// same entries (type, mode, size, content).
    pub(super) fn check_report(
        &self,
        t: &SyncTarget<'_>,
        plan: &TransferPlan<'_>,
        sent: &Sent,
    ) -> Result<Checked> {
        let fail = |what: String| self.sync_fail(t, what, SyncEnd::Refused);
        if let Some(why) = refusal(&sent.outcome, &sent.out.stderr, &t.dest) {
            return Err(self.sync_fail(t, why, SyncEnd::of(&sent.outcome)));
        }
        let report =
            remote_check::parse_report(&sent.out.stdout).map_err(|e| fail(e.to_string()))?;
        if report.archive_sha256 != sent.built.sha256 {
            return Err(fail(format!(
                "the archive arrived corrupted: local {kind} {}, sandbox {kind} {}",
                sent.built.sha256,
                report.archive_sha256,
                kind = plan.digest_kind().name()
            )));
        }
        let expected = remote_check::observable(&sent.built.manifest);
        let diff = expected.diff(&report.manifest, 20);
        if !diff.is_empty() {
            return Err(fail(format!(
                "the extracted tree does not equal commit {}: {}",
                t.commit,
                diff.join("; ")
            )));
        }
        Ok(Checked {
            archive_sha256: report.archive_sha256,
            physical_root: report.physical_root,
            entries_compared: expected.entries.len(),
        })
    }
}

/// What keeps the verifier's output: its report (a line per entry) up to
/// [`rfs_sandbox::provider::TREE_REPORT_OUTPUT`], its stderr up to
/// [`rfs_sandbox::provider::TREE_REPORT_STDERR`]; past either the verifier is
/// cancelled.
fn verifier_sink(req: &ExecRequest) -> rfs_sandbox::provider::BoundedCollect {
    rfs_sandbox::provider::BoundedCollect::new(
        rfs_sandbox::provider::TREE_REPORT_OUTPUT,
        rfs_sandbox::provider::TREE_REPORT_STDERR,
        req.cancel.clone(),
    )
}

/// Why a verification that ended this way refused (`None`: it exited 0).
fn refusal(
    outcome: &rfs_sandbox::provider::ExecOutcome,
    stderr: &[u8],
    dest: &str,
) -> Option<String> {
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
            rfs_evidence::exit_code::ExitText(other)
        ),
        other => format!(
            "verification ended with {}: {stderr}",
            rfs_evidence::exit_code::ExitText(other)
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
) -> std::result::Result<archive::Built, rfs_sandbox::source::SourceError> {
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
) -> rfs_sandbox::provider::ProviderResult<bool> {
    let req = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            "command -v gzip >/dev/null 2>&1 && printf rfs-probe | gzip -c | gzip -dc".into(),
        ],
        cwd: home.into(),
        env: vec![],
        timeout: Some(std::time::Duration::from_secs(60)),
        cancel: cancel.child_token(),
    };
    let mut bounded = rfs_sandbox::provider::BoundedCollect::new(
        rfs_sandbox::provider::PROBE_OUTPUT,
        rfs_sandbox::provider::PROBE_OUTPUT,
        req.cancel.clone(),
    );
    let ran = p.exec(id, &req, &mut bounded).await;
    if let Some(e) = bounded.error(&format!("the gzip probe in sandbox {id}")) {
        return Err(e);
    }
    let (o, out) = (ran?, bounded.out);
    Ok(o.success() && out.stdout == b"rfs-probe")
}
