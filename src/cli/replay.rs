//! `rfs replay BUNDLE`: a bundle re-run against its pinned commit.

use std::path::PathBuf;
use std::sync::Arc;

use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
pub(crate) struct ReplayCommand {
    /// The original run's output directory (the bundle).
    bundle: PathBuf,
    /// Provider for the replay (default as for `run`).
    #[arg(long)]
    provider: Option<String>,
    /// Output directory of the replay.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Compare each step's stdout digest too.
    #[arg(long)]
    strict: bool,
    /// A value for a variable the original journal redacted. Repeatable.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    pub(super) vars: Vec<String>,
    /// Image for providers that take one (docker).
    #[arg(long)]
    image: Option<String>,
    /// Replay on a different image than the original run's (by default
    /// a different image under the same name is refused).
    #[arg(long)]
    allow_other_image: bool,
    /// The replay's resource ceilings are this person's (these flags and
    /// RFS_MAX_*), never the original run's.
    #[command(flatten)]
    ceilings: crate::limit_ceilings::CeilingArgs,
    /// The replay's network and the most the bundle's script may ask for
    /// (as for `run`). Also RFS_NETWORK.
    #[arg(long, value_name = "POLICY")]
    network: Option<String>,
}

impl ReplayCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        crate::replay::replay(
            crate::replay::ReplayArgs {
                bundle: self.bundle,
                provider: self.provider,
                out: self.out,
                strict: self.strict,
                vars: self.vars,
                image: self.image,
                allow_other_image: self.allow_other_image,
                ceilings: self.ceilings,
                network: self.network,
            },
            Arc::new(crate::reporter::Console::new(false).with_progress(super::progress(false))),
        )
    }
}
