//! A provider that could not even be constructed (daemon socket missing,
//! bad configuration). It stands in so that the run still gets its output
//! directory and journal, and refuses at preflight with the reason.

use std::path::Path;

use async_trait::async_trait;

use super::{
    CreateSpec, ExecOutcome, ExecRequest, Labels, OutputSink, Provider, ProviderError,
    ProviderResult, PtyChannel, PtyRequest, SandboxInfo,
};

/// The chosen provider, unusable for `message`.
pub struct Unavailable {
    pub name: String,
    pub message: String,
}

impl Unavailable {
    fn err(&self) -> ProviderError {
        ProviderError::Unavailable {
            provider: self.name.clone(),
            message: self.message.clone(),
        }
    }
}

#[async_trait]
impl Provider for Unavailable {
    fn name(&self) -> &str {
        &self.name
    }
    async fn preflight(&self) -> ProviderResult<()> {
        Err(self.err())
    }
    async fn create(&self, _: &CreateSpec) -> ProviderResult<SandboxInfo> {
        Err(self.err())
    }
    async fn get(&self, _: &str) -> ProviderResult<Option<SandboxInfo>> {
        Err(self.err())
    }
    async fn list(&self, _: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        Err(self.err())
    }
    async fn upload(&self, _: &str, _: &Path, _: &str) -> ProviderResult<()> {
        Err(self.err())
    }
    async fn exec(
        &self,
        _: &str,
        _: &ExecRequest,
        _: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        Err(self.err())
    }
    async fn open_pty(&self, _: &str, _: &PtyRequest) -> ProviderResult<PtyChannel> {
        Err(self.err())
    }
    async fn destroy(&self, _: &str) -> ProviderResult<()> {
        Err(self.err())
    }
}
