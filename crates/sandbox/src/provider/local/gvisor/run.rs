//! A command in a gVisor sandbox, to its end: through rfs's agent inside
//! where it can ([`super::agent`]: no `runsc exec`), else `runsc exec`.

use std::time::Duration;

use super::super::child::LocalChild;
use super::super::commands::{wait_streaming, OwnProgram};
use super::super::LocalProvider;
use super::agent_client::{AgentChild, AgentCmd};
use super::frames::Start;
use super::{GvisorChild, GvisorSandbox};
use crate::provider::{ExecOutcome, ExecRequest, OutputSink, ProviderResult};

/// How long rfs waits for the agent to say a command started.
const START_WITHIN: Duration = Duration::from_secs(30);

impl LocalProvider {
    /// Run `req` (with `own`: rfs's own executable, fed its stdin) in
    /// gVisor sandbox `g` of sandbox `id`, streaming into `sink`.
    pub(in crate::provider::local) async fn gvisor_run(
        &self,
        id: &str,
        g: &GvisorSandbox,
        req: &ExecRequest,
        own: Option<OwnProgram>,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let (prog, env, _) = self.prepare_command(id, req)?;
        let dir = self.dir(id)?;
        let Some(agent) = g.agent.as_ref().filter(|_| own.is_none()) else {
            let (child, out, err) = super::start(g, &dir, id, req, &env, own)?;
            let child = LocalChild::Gvisor(child);
            return wait_streaming(child, out, err, req, sink).await;
        };
        let cannot = |e: &dyn std::fmt::Display| super::super::commands::cannot_start(prog, id, e);
        let missing_cwd = || super::super::commands::missing_cwd(id, &req.cwd);
        if !super::exec::cwd_exists(&dir, &req.cwd) {
            return Err(missing_cwd());
        }
        let AgentCmd {
            id: cmd,
            started,
            out,
            err,
            exit,
        } = agent
            .start(&Start {
                argv: req.argv.clone(),
                env,
                cwd: req.cwd.clone(),
            })
            .map_err(|e| cannot(&e))?;
        let refused = match tokio::time::timeout(START_WITHIN, started).await {
            Ok(Ok(Ok(()))) => None,
            Ok(Ok(Err(f))) if f.cwd => Some(missing_cwd()),
            Ok(Ok(Err(f))) => Some(cannot(&f.message)),
            Ok(Err(_)) => Some(cannot(&"the gVisor sandbox's agent dropped it")),
            Err(_) => {
                agent.kill(cmd);
                Some(cannot(&format!(
                    "the gVisor sandbox's agent did not start it within {START_WITHIN:?}"
                )))
            }
        };
        if let Some(e) = refused {
            agent.forget(cmd);
            return Err(e);
        }
        let child = LocalChild::Gvisor(GvisorChild::Agent(AgentChild {
            agent: agent.clone(),
            id: cmd,
            exit,
            status: None,
        }));
        wait_streaming(child, Box::pin(out), Box::pin(err), req, sink).await
    }
}
