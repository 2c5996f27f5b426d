//! Commands of a gVisor sandbox fed a stream: through the `runsc exec`
//! client's standard input, which becomes the command's (a FIFO on the
//! host, as namespaces use, cannot be opened from inside gVisor).

use std::sync::Arc;

use super::super::child::LocalChild;
use super::super::commands::wait_streaming;
use super::super::input_feed::{run_fed, stdin_pipe};
use super::super::LocalProvider;
use super::GvisorSandbox;
use crate::provider::{
    ExecOutcome, ExecRequest, InputStream, OutputSink, ProviderError, ProviderResult,
};

impl LocalProvider {
    /// The gVisor sandbox of `id`, when it runs under gVisor.
    pub(in crate::provider::local) fn gvisor_of(
        &self,
        id: &str,
    ) -> ProviderResult<Option<Arc<GvisorSandbox>>> {
        Ok(self.init_of(id)?.and_then(|i| i.gvisor.get().cloned()))
    }

    /// [`crate::provider::StreamInput::exec_with_input`] in gVisor
    /// sandbox `g`: `input`'s pipe, or a pipe rfs copies `input` into,
    /// is the command's standard input.
    pub(in crate::provider::local) async fn gvisor_exec_with_input(
        &self,
        id: &str,
        g: &GvisorSandbox,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        // The same checks and environment as every other start.
        let (_, env, _) = self.prepare_command(id, req)?;
        let dir = self.dir(id)?;
        let (stdin, feed) = stdin_pipe(input).map_err(|e| {
            ProviderError::NotStarted(format!("cannot feed a command in sandbox {id}: {e}"))
        })?;
        let (child, out, err) =
            super::start_with_stdin(g, &dir, id, req, &env, Some(stdin), false)?;
        let child = LocalChild::Gvisor(child);
        run_fed(feed, wait_streaming(child, out, err, req, sink)).await
    }
}
