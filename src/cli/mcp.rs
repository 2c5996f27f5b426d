//! `rfs mcp`: one session served to a coding agent over MCP (stdio).

use std::path::PathBuf;

use super::session_args::SessionArgs;
use crate::settings::RunSettings;
use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
pub(crate) struct McpCommand {
    #[command(flatten)]
    pub(super) session: SessionArgs,
}

impl McpCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        let mut settings =
            RunSettings::for_repl(self.session.into_run_args(PathBuf::new(), false))?;
        settings.script = PathBuf::from("<mcp>");
        crate::mcp::run(settings)
    }
}
