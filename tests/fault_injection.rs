//! Faults injected through a provider wrapper: a corrupted upload and an
//! extraction that loses a file must both be refused, and the sandbox
//! destroyed, before any step runs.

mod common;
use common::*;

use std::path::Path;
use std::sync::Arc;

use async_trait::async_trait;
use rfs::provider::{
    CreateSpec, ExecOutcome, ExecRequest, InputStream, Labels, NativeVerifier, OutputSink,
    Provider, ProviderResult, PtyChannel, PtyRequest, SandboxInfo, StreamInput,
};

#[derive(Clone, Copy)]
enum Fault {
    /// Overwrite one byte of the uploaded archive inside the sandbox.
    CorruptUpload,
    /// Delete one extracted file right after extraction.
    LoseFile,
    /// The sandbox has every tool but `sha256sum` (the verification runs
    /// with a PATH that lacks it).
    NoSha256sum(&'static str),
    /// Every step's exec prints one line and then fails in the provider
    /// (the connection to the sandbox is lost mid-command).
    StepExecFails,
    /// Streamed transfer (the inner provider's): one byte of the stream is
    /// changed on its way into the sandbox.
    StreamCorrupt,
    /// Streamed transfer: the stream breaks (an I/O error) mid-transfer.
    StreamBreaks,
    /// Streamed transfer: one extracted file is deleted after extraction.
    StreamLoseFile,
    /// Streamed into rfs's native verifier (the local provider running the
    /// rfs binary in the sandbox), without a fault.
    Native,
    /// Native verifier: one byte of the stream is changed in transit.
    NativeStreamCorrupt,
    /// Native verifier: the stream breaks mid-transfer.
    NativeStreamBreaks,
    /// Native verifier, stream passed on untouched: its destination exists
    /// already, so it refuses at once without reading its input (of
    /// several MiB, more than a pipe holds).
    NativeRefusesEarly,
    /// The provider claims to be remote, so the transfer is compressed
    /// when the sandbox can decompress.
    Remote,
    /// Remote, and every command runs with this PATH (no `gzip`).
    RemoteWithoutGzip(&'static str),
    /// Remote; the probe finds gzip, but the verification runs with this
    /// PATH, which lacks it (gzip vanished in between).
    RemoteGzipVanishes(&'static str),
}

impl Fault {
    fn streams(self) -> bool {
        matches!(
            self,
            Fault::StreamCorrupt | Fault::StreamBreaks | Fault::StreamLoseFile
        )
    }
    fn native(self) -> bool {
        matches!(
            self,
            Fault::Native
                | Fault::NativeStreamCorrupt
                | Fault::NativeStreamBreaks
                | Fault::NativeRefusesEarly
        )
    }
    fn remote(self) -> bool {
        matches!(
            self,
            Fault::Remote | Fault::RemoteWithoutGzip(_) | Fault::RemoteGzipVanishes(_)
        )
    }
}

/// Changes the byte at `corrupt_at`, or fails with an I/O error once
/// `break_at` bytes went through.
struct Tamper {
    inner: InputStream,
    pos: u64,
    corrupt_at: Option<u64>,
    break_at: Option<u64>,
}

impl Tamper {
    /// `input` passed through untouched until a fault is set.
    fn new(inner: InputStream) -> Tamper {
        Tamper {
            inner,
            pos: 0,
            corrupt_at: None,
            break_at: None,
        }
    }
}

impl tokio::io::AsyncRead for Tamper {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let me = &mut *self;
        if me.break_at.is_some_and(|b| me.pos >= b) {
            return std::task::Poll::Ready(Err(std::io::Error::other(
                "connection reset mid-transfer",
            )));
        }
        let before = buf.filled().len();
        let r = std::pin::Pin::new(&mut me.inner).poll_read(cx, buf);
        if let std::task::Poll::Ready(Ok(())) = r {
            let n = (buf.filled().len() - before) as u64;
            if let Some(at) = me.corrupt_at.filter(|at| (me.pos..me.pos + n).contains(at)) {
                let i = before + (at - me.pos) as usize;
                buf.filled_mut()[i] ^= 0x20;
            }
            me.pos += n;
        }
        r
    }
}

/// Delete `lost.txt` right after extraction, before the sandbox lists
/// what it has.
fn lose_a_file(req: &mut ExecRequest) {
    let enter = r#"cd -P -- "$dest" || exit 92"#;
    assert!(
        req.argv[2].contains(enter),
        "verification script changed shape"
    );
    req.argv[2] = req.argv[2].replace(enter, &format!(r#"rm -f "$dest/lost.txt"; {enter}"#));
}

struct Faulty {
    inner: Arc<dyn Provider>,
    fault: Fault,
}

#[async_trait]
impl Provider for Faulty {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn profile(&self) -> rfs::provider::Profile {
        rfs::provider::Profile {
            remote: self.fault.remote(),
            ..rfs::provider::Profile::default()
        }
    }
    fn streaming(&self) -> Option<&dyn StreamInput> {
        let on = self.fault.streams() || self.fault.native();
        (on && self.inner.streaming().is_some()).then_some(self as &dyn StreamInput)
    }
    fn isolation(
        &self,
        req: &rfs::provider::isolation::IsolationRequest,
    ) -> Result<rfs::provider::isolation::IsolationInForce, rfs::provider::isolation::IsolationError>
    {
        self.inner.isolation(req)
    }
    async fn preflight(&self) -> ProviderResult<()> {
        self.inner.preflight().await
    }
    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        self.inner.create(spec).await
    }
    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        self.inner.get(id).await
    }
    async fn list(&self, labels: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        self.inner.list(labels).await
    }
    async fn upload(&self, id: &str, local: &Path, remote: &str) -> ProviderResult<()> {
        self.inner.upload(id, local, remote).await?;
        if let Fault::CorruptUpload = self.fault {
            corrupt_uploaded_byte(self.inner.as_ref(), id, remote, 700).await?;
        }
        Ok(())
    }
    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let mut req = req.clone();
        if let (Fault::NoSha256sum(path), Some("rfs-verify")) =
            (self.fault, req.argv.get(3).map(String::as_str))
        {
            req.env.push(("PATH".into(), path.into()));
        }
        if let (Fault::LoseFile, Some("rfs-verify")) =
            (self.fault, req.argv.get(3).map(String::as_str))
        {
            lose_a_file(&mut req);
        }
        match (self.fault, req.argv.get(3).map(String::as_str)) {
            (Fault::RemoteGzipVanishes(path), Some("rfs-verify")) => {
                req.env.push(("PATH".into(), path.into()))
            }
            // The probe and the verification (steps keep the host PATH).
            (Fault::RemoteWithoutGzip(path), arg)
                if arg == Some("rfs-verify") || req.argv[2].contains("gzip -dc") =>
            {
                req.env.push(("PATH".into(), path.into()))
            }
            _ => {}
        }
        if let (Fault::StepExecFails, false) = (
            self.fault,
            req.argv.get(3).map(String::as_str) == Some("rfs-verify"),
        ) {
            sink.stdout(b"partial output before the fault\n");
            return Err(rfs::provider::ProviderError::Api(
                "injected: connection to the sandbox lost".into(),
            ));
        }
        self.inner.exec(id, &req, sink).await
    }
    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        self.inner.open_pty(id, req).await
    }
    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        self.inner.destroy(id).await
    }
}

impl Faulty {
    fn inner_stream(&self) -> &dyn StreamInput {
        self.inner
            .streaming()
            .expect("offered only when the inner provider streams")
    }
    fn inner_native(&self) -> &dyn NativeVerifier {
        self.inner_stream()
            .native()
            .expect("offered only when the inner provider has it")
    }
}

#[async_trait]
impl StreamInput for Faulty {
    async fn input_route(&self, id: &str) -> rfs::provider::InputRoute {
        self.inner_stream().input_route(id).await
    }
    async fn exec_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let mut req = req.clone();
        let mut tamper = Tamper::new(input);
        match self.fault {
            Fault::StreamCorrupt => tamper.corrupt_at = Some(700),
            Fault::StreamBreaks => tamper.break_at = Some(4096),
            Fault::StreamLoseFile => lose_a_file(&mut req),
            _ => {}
        }
        self.inner_stream()
            .exec_with_input(id, &req, InputStream::new(tamper), sink)
            .await
    }
    fn native(&self) -> Option<&dyn NativeVerifier> {
        let has = self.inner.streaming().and_then(|s| s.native()).is_some();
        (self.fault.native() && has).then_some(self as &dyn NativeVerifier)
    }
}

#[async_trait]
impl NativeVerifier for Faulty {
    async fn prepare_own_executable(&self, id: &str) -> ProviderResult<()> {
        self.inner_native().prepare_own_executable(id).await
    }
    async fn exec_own_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let mut tamper = Tamper::new(input);
        match self.fault {
            Fault::NativeStreamCorrupt => tamper.corrupt_at = Some(700),
            Fault::NativeStreamBreaks => tamper.break_at = Some(4096),
            Fault::NativeRefusesEarly => {
                let dest = req.argv[req.argv.len() - 4].clone();
                let mkdir = ExecRequest {
                    argv: vec!["mkdir".into(), "-p".into(), dest],
                    ..req.clone()
                };
                self.inner.exec(id, &mkdir, sink).await?;
            }
            _ => {}
        }
        // Untouched, the stream goes on as rfs made it (on `local`, the
        // pipe the builder writes into reaches the verifier as it is).
        let input = if tamper.corrupt_at.is_some() || tamper.break_at.is_some() {
            InputStream::new(tamper)
        } else {
            tamper.inner
        };
        self.inner_native()
            .exec_own_with_input(id, req, input, sink)
            .await
    }
}

fn run_with_fault(rfs: &Rfs, fault: Fault) -> (RunOut, std::path::PathBuf) {
    // Some faults put host directories on the sandbox's PATH, which only a
    // sandbox without namespaces sees.
    run_with_fault_in(rfs, fault, (rfs.prov == Prov::Local).then_some("none"))
}

fn run_with_fault_in(
    rfs: &Rfs,
    fault: Fault,
    isolation: Option<&str>,
) -> (RunOut, std::path::PathBuf) {
    let repo = Repo::new();
    repo.write("lost.txt", "this file must arrive\n");
    repo.write("payload.bin", &"0123456789abcdef".repeat(200));
    if let Fault::NativeRefusesEarly = fault {
        repo.write("large.bin", &"0123456789abcdef".repeat(6 << 16));
    }
    repo.commit("payload");
    let marker = tempfile::tempdir().unwrap().keep().join("RAN");
    let (script, out_dir) = rfs.prepare(&format!(
        "sync_source();\nstep(\"after\", \"mkdir -p {} && touch {}\");\n",
        marker.parent().unwrap().display(),
        marker.display()
    ));
    // The native verifier needs the rfs binary (this test process is not
    // one).
    let inner: Arc<dyn Provider> = if fault.native() && rfs.prov == Prov::Docker {
        Arc::new(
            rfs::provider::docker::DockerProvider::connect(rfs::provider::docker::DockerOptions {
                image: Some(DOCKER_TEST_IMAGE.into()),
                ..rfs::provider::docker::DockerOptions::from_env()
            })
            .unwrap()
            .with_own_executable(Some(env!("CARGO_BIN_EXE_rfs").into())),
        )
    } else if fault.native() {
        Arc::new(
            rfs::provider::local::LocalProvider::new(rfs.state.path())
                .with_own_executable(env!("CARGO_BIN_EXE_rfs").into()),
        )
    } else {
        rfs.provider()
    };
    let faulty: Arc<dyn Provider> = Arc::new(Faulty { inner, fault });
    let out = rfs.run_embedded(repo.path(), (script, out_dir), faulty, isolation);
    (out, marker)
}

#[track_caller]
fn assert_refused_and_destroyed(rfs: &Rfs, out: &RunOut, marker: &Path, needle: &str) {
    out.assert_code(3);
    assert!(
        out.stderr.contains(needle),
        "expected {needle:?} in {}",
        out.stderr
    );
    assert!(!marker.exists(), "a step ran after a failed sync");
    assert!(out.entries("step.start").is_empty());
    let failed = &out.entries("source.sync_failed")[0];
    let id = out.sandbox_id();
    assert_eq!(failed["sandbox_id"], id.as_str());
    let cleanup = &out.entries("cleanup.verified")[0];
    assert_eq!(cleanup["why"], "failed source sync");
    assert_eq!(cleanup["sandbox_id"], id.as_str());
    assert!(
        out.entries("source.pin").is_empty(),
        "nothing may be pinned"
    );
    rfs.assert_no_leftovers();
}

/// A directory of links to the host tools the verification uses, except
/// `sha256sum`.
fn tools_without_sha256sum() -> &'static str {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        tool_dir(&[
            "sh", "tar", "find", "mkdir", "readlink", "cut", "tr", "head", "rm", "cat",
        ])
    })
}

/// A directory of links to every host tool the verification may use,
/// except `gzip`.
fn tools_without_gzip() -> &'static str {
    static DIR: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        tool_dir(&[
            "sh",
            "tar",
            "find",
            "mkdir",
            "readlink",
            "cut",
            "tr",
            "head",
            "rm",
            "cat",
            "xargs",
            "mktemp",
            "tee",
            "mkfifo",
            "sha256sum",
            "nproc",
        ])
    })
}

fn tool_dir(tools: &[&str]) -> String {
    {
        let dir = tempfile::tempdir().unwrap().keep();
        for tool in tools {
            let host = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("host has no {tool}"));
            std::os::unix::fs::symlink(host, dir.join(tool)).unwrap();
        }
        dir.display().to_string()
    }
}

#[test]
fn a_sandbox_missing_a_verification_tool_is_refused_naming_it() {
    let rfs = Rfs::new(Prov::Local);
    let (out, marker) = run_with_fault(&rfs, Fault::NoSha256sum(tools_without_sha256sum()));
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "required tool 'sha256sum' is missing in the sandbox",
    );
}

provider_tests! {
    #[not_under_gvisor = "on local its faults need isolation none (they put host directories on the sandbox's PATH)"]
    fn corrupted_upload_is_refused_and_the_sandbox_destroyed(rfs: &Rfs) {
        let (out, marker) = run_with_fault(rfs, Fault::CorruptUpload);
        assert_refused_and_destroyed(rfs, &out, &marker, "the archive arrived corrupted: local sha256");
    }

    #[not_under_gvisor = "on local its faults need isolation none (they put host directories on the sandbox's PATH)"]
    fn extraction_that_loses_a_file_is_refused(rfs: &Rfs) {
        let (out, marker) = run_with_fault(rfs, Fault::LoseFile);
        assert_refused_and_destroyed(rfs, &out, &marker, "missing in sandbox: lost.txt");
    }

    #[not_under_gvisor = "on local its faults need isolation none (they put host directories on the sandbox's PATH)"]
    fn a_remote_transfer_is_compressed_and_verified(rfs: &Rfs) {
        let (out, _marker) = run_with_fault(rfs, Fault::Remote);
        out.assert_code(0);
        assert_eq!(out.entries("step.end")[0]["ok"], true, "the step after the sync did not run");
        let v = transfer(&out);
        assert_eq!(v["compression"], "gzip");
        assert_eq!(v["content_equal"], true);
        // The payload repeats: gzip must shrink it well below the tar.
        assert!(
            v["wire_bytes"].as_u64().unwrap() * 2 < v["archive_bytes"].as_u64().unwrap(),
            "{v}"
        );
        assert!(v["tree_bytes"].as_u64().unwrap() > 3200, "{v}");
        rfs.assert_no_leftovers();
    }
}

/// The journal's account of the transfer.
fn transfer(out: &RunOut) -> serde_json::Value {
    out.entries("source.verify")[0].clone()
}

#[test]
fn a_streamed_archive_corrupted_in_transit_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let (out, marker) = run_with_fault(&rfs, Fault::StreamCorrupt);
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "the archive arrived corrupted: local sha256",
    );
}

#[test]
fn a_stream_that_breaks_mid_transfer_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let (out, marker) = run_with_fault(&rfs, Fault::StreamBreaks);
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "the input stream broke before its end: connection reset mid-transfer",
    );
}

#[test]
fn a_streamed_extraction_that_loses_a_file_is_refused() {
    let rfs = Rfs::new(Prov::Local);
    let (out, marker) = run_with_fault(&rfs, Fault::StreamLoseFile);
    assert_refused_and_destroyed(&rfs, &out, &marker, "missing in sandbox: lost.txt");
}

#[test]
fn without_gzip_in_the_sandbox_a_remote_transfer_is_uncompressed() {
    let rfs = Rfs::new(Prov::Local);
    let (out, marker) = run_with_fault(&rfs, Fault::RemoteWithoutGzip(tools_without_gzip()));
    out.assert_code(0);
    assert!(marker.exists(), "the step after the sync did not run");
    let v = transfer(&out);
    assert_eq!(v["compression"], "none");
    assert_eq!(v["wire_bytes"], v["archive_bytes"]);
    rfs.assert_no_leftovers();
}

#[test]
fn a_decompressor_missing_at_verification_fails_closed() {
    let rfs = Rfs::new(Prov::Local);
    let (out, marker) = run_with_fault(&rfs, Fault::RemoteGzipVanishes(tools_without_gzip()));
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "required tool 'gzip' is missing in the sandbox (the transfer is compressed)",
    );
}

#[test]
fn evidence_lists_a_step_whose_provider_failed() {
    let rfs = Rfs::new(Prov::Local);
    let (out, _marker) = run_with_fault(&rfs, Fault::StepExecFails);
    out.assert_code(1);
    assert!(
        out.stderr.contains("connection to the sandbox lost"),
        "{}",
        out.stderr
    );
    let errors = out.entries("step.provider_error");
    assert_eq!(errors.len(), 1, "{:?}", out.kinds());
    assert_eq!(
        errors[0]["stdout_log"]["path"],
        "steps/001-after.stdout.log"
    );
    let ev = out.evidence();
    assert!(!ev.contains("(no steps ran)"), "{ev}");
    let row = ev
        .lines()
        .find(|l| l.starts_with("| 1 | after |"))
        .unwrap_or_else(|| panic!("no row for the step in\n{ev}"));
    assert!(
        row.contains("FAILED (the provider could not run it: injected: connection"),
        "{row}"
    );
    assert!(row.contains("steps/001-after.stdout.log"), "{row}");
    let v = rfs
        .cmd(&out.out_dir)
        .arg("verify")
        .arg(&out.out_dir)
        .output()
        .unwrap();
    assert_eq!(
        v.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&v.stderr)
    );
    rfs.assert_no_leftovers();
}

/// Docker streams the archive into the verification's stdin too: the same
/// faults in transit are refused there, and the sandbox destroyed.
#[test]
fn docker_streamed_archive_faults_are_refused() {
    if docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let (out, marker) = run_with_fault(&rfs, Fault::StreamCorrupt);
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "the archive arrived corrupted: local sha256",
    );
    let (out, marker) = run_with_fault(&rfs, Fault::StreamBreaks);
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "the input stream broke before its end: connection reset mid-transfer",
    );
    let (out, marker) = run_with_fault(&rfs, Fault::StreamLoseFile);
    assert_refused_and_destroyed(&rfs, &out, &marker, "missing in sandbox: lost.txt");
}

#[test]
fn the_native_verifier_verifies_a_streamed_sync_in_both_isolation_modes() {
    for isolation in ["none", "namespaces"] {
        let rfs = Rfs::new(Prov::Local);
        // (In namespaces the step's marker is in the sandbox's own /tmp.)
        let (out, _marker) = run_with_fault_in(&rfs, Fault::Native, Some(isolation));
        out.assert_code(0);
        assert_eq!(
            out.entries("step.end")[0]["ok"],
            true,
            "{isolation}: the step after the sync did not run"
        );
        let v = transfer(&out);
        assert_eq!(v["verifier"], "native", "{isolation}: {v}");
        assert_eq!(v["transfer"], "stream", "{isolation}: {v}");
        assert_eq!(v["content_equal"], true, "{isolation}: {v}");
        rfs.assert_no_leftovers();
    }
}

#[test]
fn a_stream_corrupted_in_transit_is_refused_by_the_native_verifier_in_both_isolation_modes() {
    for isolation in ["none", "namespaces"] {
        let rfs = Rfs::new(Prov::Local);
        let (out, marker) = run_with_fault_in(&rfs, Fault::NativeStreamCorrupt, Some(isolation));
        assert_refused_and_destroyed(
            &rfs,
            &out,
            &marker,
            "the archive arrived corrupted: local tar-entries-sha256",
        );
        assert!(out.entries("source.verify").is_empty(), "{isolation}");
    }
}

#[test]
fn a_stream_that_breaks_is_refused_by_the_native_verifier_in_both_isolation_modes() {
    for isolation in ["none", "namespaces"] {
        let rfs = Rfs::new(Prov::Local);
        let (out, marker) = run_with_fault_in(&rfs, Fault::NativeStreamBreaks, Some(isolation));
        assert_refused_and_destroyed(
            &rfs,
            &out,
            &marker,
            "the input stream broke before its end: connection reset mid-transfer",
        );
    }
}

/// Bug: a verifier that refused before reading an archive larger than the
/// stream's buffers (here: its destination exists) was reported as "cannot
/// build the source archive: the receiving side stopped reading", hiding
/// its reason. The refusal is the error now, and the builder writing into
/// it (on `local`, straight into its standard input's pipe) is not left
/// blocked on a pipe nobody reads.
#[test]
fn a_verifier_refusing_before_reading_a_large_archive_is_reported_with_its_reason() {
    for isolation in ["none", "namespaces"] {
        let rfs = Rfs::new(Prov::Local);
        let (out, marker) = run_with_fault_in(&rfs, Fault::NativeRefusesEarly, Some(isolation));
        assert_refused_and_destroyed(&rfs, &out, &marker, "already exists in the sandbox");
    }
}

/// The native verifier copied into a Docker container refuses a stream
/// changed in transit and one that breaks, like the local one.
#[test]
fn a_corrupted_or_broken_stream_is_refused_by_the_native_verifier_in_a_container() {
    if common::docker_missing() {
        return;
    }
    let rfs = Rfs::new(Prov::Docker);
    let (out, marker) = run_with_fault(&rfs, Fault::NativeStreamCorrupt);
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "the archive arrived corrupted: local tar-entries-sha256",
    );
    let (out, marker) = run_with_fault(&rfs, Fault::NativeStreamBreaks);
    assert_refused_and_destroyed(
        &rfs,
        &out,
        &marker,
        "the input stream broke before its end: connection reset mid-transfer",
    );
    let (out, _marker) = run_with_fault(&rfs, Fault::Native);
    out.assert_code(0);
    assert_eq!(transfer(&out)["verifier"], "native");
}
