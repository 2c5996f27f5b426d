//! `rfs repl`: a live sandbox explored interactively.

use std::path::PathBuf;
use std::sync::Arc;

use super::session_args::SessionArgs;
use crate::settings::RunSettings;
use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
pub(crate) struct ReplCommand {
    #[command(flatten)]
    pub(super) session: SessionArgs,
    /// Keep the sandbox when the session ends (journaled; prints how to remove it).
    #[arg(long)]
    keep: bool,
}

impl ReplCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        let console = crate::reporter::Console::new(false).with_progress(super::progress(false));
        let settings =
            RunSettings::for_repl(self.session.into_run_args(PathBuf::new(), self.keep))?;
        crate::repl::run(settings, Arc::new(console))
    }
}
