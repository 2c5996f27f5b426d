//! Tracing of every provider call (`-v`: each operation with its sandbox,
//! outcome and duration; `-vv`: also the command lines), for any provider,
//! as a decorator: providers themselves stay free of it.
//!
//! What is traced passes the process's redactor on its way to stderr
//! ([`crate::logging`]), so a secret in a command line or an error is
//! never printed.

use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use async_trait::async_trait;

use super::isolation::{IsolationError, IsolationInForce, IsolationRequest};
use super::{
    CreateSpec, ExecOutcome, ExecRequest, InputRoute, InputStream, Labels, NativeVerifier,
    OutputSink, Profile, Provider, ProviderError, ProviderResult, PtyChannel, PtyRequest,
    SandboxInfo, StreamInput,
};

/// `inner`, with each call traced under the `rfs::provider` target.
pub struct Traced(pub Arc<dyn Provider>);

/// Wrap `p` (a no-op cost when tracing is off: the events are filtered
/// before anything is formatted).
pub fn traced(p: Arc<dyn Provider>) -> Arc<dyn Provider> {
    Arc::new(Traced(p))
}

fn done<T>(op: &str, provider: &str, id: &str, started: Instant, r: &ProviderResult<T>) {
    let ms = started.elapsed().as_millis() as u64;
    match r {
        Ok(_) => tracing::debug!(target: "rfs::provider", provider, op, sandbox = id, ms, "ok"),
        Err(e) => {
            tracing::debug!(target: "rfs::provider", provider, op, sandbox = id, ms, error = %e, "failed")
        }
    }
}

fn outcome(o: &ProviderResult<ExecOutcome>) -> String {
    match o {
        Ok(o) => format!(
            "exit={:?} signal={:?} timed_out={} cancelled={}",
            o.exit, o.signal, o.timed_out, o.cancelled
        ),
        Err(e) => format!("error: {e}"),
    }
}

impl Traced {
    /// `call` timed and traced as `op` on sandbox `id` (the one wrapper
    /// every traced operation goes through).
    async fn timed<T>(
        &self,
        op: &str,
        id: &str,
        call: impl std::future::Future<Output = ProviderResult<T>>,
    ) -> ProviderResult<T> {
        let t = Instant::now();
        let r = call.await;
        done(op, self.name(), id, t, &r);
        r
    }

    /// A command `call` (its line traced at `-vv`), timed and traced with
    /// its outcome as `op`.
    async fn command(
        &self,
        op: &str,
        id: &str,
        req: &ExecRequest,
        call: impl std::future::Future<Output = ProviderResult<ExecOutcome>>,
    ) -> ProviderResult<ExecOutcome> {
        tracing::trace!(target: "rfs::provider", provider = self.name(), sandbox = id, cwd = %req.cwd, argv = ?req.argv, op, "start");
        let t = Instant::now();
        let r = call.await;
        tracing::debug!(target: "rfs::provider", provider = self.name(), op, sandbox = id,
            cwd = %req.cwd, ms = t.elapsed().as_millis() as u64, "{}", outcome(&r));
        r
    }
}

#[async_trait]
impl Provider for Traced {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn profile(&self) -> Profile {
        self.0.profile()
    }

    /// Traced too, when the provider has the capability.
    fn streaming(&self) -> Option<&dyn StreamInput> {
        self.0.streaming().map(|_| self as &dyn StreamInput)
    }

    fn forking(&self) -> Option<&dyn super::fork::Fork> {
        self.0.forking()
    }

    fn services(&self) -> Option<&dyn super::Services> {
        self.0.services()
    }

    fn isolation(&self, req: &IsolationRequest) -> Result<IsolationInForce, IsolationError> {
        self.0.isolation(req)
    }

    fn cache_mounts(&self, req: &IsolationRequest) -> Result<(), String> {
        self.0.cache_mounts(req)
    }

    fn caches_bound_as_they_are(&self, req: &IsolationRequest) -> bool {
        self.0.caches_bound_as_they_are(req)
    }

    fn limits(
        &self,
        req: &super::limits::LimitsRequest,
    ) -> Result<super::limits::LimitsFact, super::limits::LimitsError> {
        self.0.limits(req)
    }

    fn egress(&self, id: &str) -> Option<std::sync::Arc<crate::network::EgressLog>> {
        self.0.egress(id)
    }

    async fn limits_reached(&self, id: &str, ended_ok: bool) -> Vec<super::limits::LimitHit> {
        self.0.limits_reached(id, ended_ok).await
    }

    async fn usage(&self, id: &str, reset: bool) -> Option<super::limits::Usage> {
        self.0.usage(id, reset).await
    }

    async fn preflight(&self) -> ProviderResult<()> {
        self.timed("preflight", "", self.0.preflight()).await
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        let t = Instant::now();
        let r = self.0.create(spec).await;
        let id = r.as_ref().map(|s| s.id.as_str()).unwrap_or("");
        done("create", self.name(), id, t, &r);
        r
    }

    async fn baked_env_names(&self, base: Option<&super::Base>) -> ProviderResult<Vec<String>> {
        self.timed("baked_env_names", "", self.0.baked_env_names(base))
            .await
    }

    async fn environment(&self, id: &str) -> ProviderResult<Option<crate::events::Environment>> {
        self.timed("environment", id, self.0.environment(id)).await
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        let t = Instant::now();
        let r = self.0.get(id).await;
        tracing::trace!(target: "rfs::provider", provider = self.name(), op = "get", sandbox = id,
            ms = t.elapsed().as_millis() as u64,
            found = ?r.as_ref().map(|s| s.as_ref().map(|s| s.state.as_str())), "get");
        r
    }

    async fn list(&self, labels: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        let t = Instant::now();
        let r = self.0.list(labels).await;
        tracing::trace!(target: "rfs::provider", provider = self.name(), op = "list",
            ms = t.elapsed().as_millis() as u64,
            count = ?r.as_ref().map(Vec::len), "list");
        r
    }

    async fn upload(&self, id: &str, local: &Path, remote_path: &str) -> ProviderResult<()> {
        self.timed("upload", id, self.0.upload(id, local, remote_path))
            .await
    }

    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        self.command("exec", id, req, self.0.exec(id, req, sink))
            .await
    }

    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        tracing::trace!(target: "rfs::provider", provider = self.name(), sandbox = id, cwd = %req.cwd, argv = ?req.argv, "open pty");
        self.timed("open_pty", id, self.0.open_pty(id, req)).await
    }

    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        self.timed("destroy", id, self.0.destroy(id)).await
    }
}

impl Traced {
    /// The traced provider's stream capability (present whenever this
    /// decorator offers its own: see [`Provider::streaming`]).
    fn stream(&self) -> ProviderResult<&dyn StreamInput> {
        self.0.streaming().ok_or_else(|| {
            ProviderError::Unsupported(format!("provider {} cannot stream input", self.0.name()))
        })
    }

    fn native(&self) -> ProviderResult<&dyn NativeVerifier> {
        self.stream()?.native().ok_or_else(|| {
            ProviderError::Unsupported(format!(
                "provider {} cannot run rfs's own executable",
                self.0.name()
            ))
        })
    }
}

#[async_trait]
impl StreamInput for Traced {
    async fn input_route(&self, id: &str) -> InputRoute {
        let t = Instant::now();
        let r = match self.0.streaming() {
            Some(s) => s.input_route(id).await,
            None => InputRoute::stdin(),
        };
        tracing::debug!(target: "rfs::provider", provider = self.name(), op = "input_route", sandbox = id,
            ms = t.elapsed().as_millis() as u64, via = %r.via, fallback = ?r.fallback, "decided");
        r
    }

    async fn exec_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let inner = self.stream()?;
        self.command(
            "exec_with_input",
            id,
            req,
            inner.exec_with_input(id, req, input, sink),
        )
        .await
    }

    fn native(&self) -> Option<&dyn NativeVerifier> {
        self.0
            .streaming()
            .and_then(|s| s.native())
            .map(|_| self as &dyn NativeVerifier)
    }
}

#[async_trait]
impl NativeVerifier for Traced {
    async fn prepare_own_executable(&self, id: &str) -> ProviderResult<()> {
        let inner = self.native()?;
        self.timed(
            "prepare_own_executable",
            id,
            inner.prepare_own_executable(id),
        )
        .await
    }

    async fn exec_own_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let inner = self.native()?;
        self.command(
            "exec_own_with_input",
            id,
            req,
            inner.exec_own_with_input(id, req, input, sink),
        )
        .await
    }
}
