//! `rfs bisect GOOD BAD PROOF`: the first commit where a proof's result
//! changes.

use std::path::PathBuf;

use super::session_args::SessionArgs;
use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
#[command(mut_arg("out", |a| a.help(
    "Output directory for the bisect: its report and every tested commit's bundle (default: $RFS_STATE_DIR/bisects/<run-id>, or runs/<run-id> when one lane runs without a setup; outside the repository)"
)))]
pub(crate) struct BisectCommand {
    /// A commit where the proof has one result (usually passes).
    good: String,
    /// A later commit where it has the other (usually fails).
    bad: String,
    /// The proof (read once from here, run at every commit).
    proof: PathBuf,
    #[command(flatten)]
    pub(super) session: SessionArgs,
    /// How many commits are tested at once, each in its own sandbox.
    #[arg(long, short, default_value_t = 1)]
    jobs: usize,
    /// A commit (id or prefix) not to test, as `git bisect skip`. Repeatable.
    #[arg(long, value_name = "COMMIT")]
    skip: Vec<String>,
    /// Sign the journal with this key (as `rfs run`).
    #[arg(long, value_name = "PATH")]
    sign_key: Option<PathBuf>,
    /// A setup script run once before any commit is tested (its bundle
    /// in the evidence folder's `_setup/`); every lane's sandbox starts
    /// from a fork of its checkpoint and moves its source to each commit
    /// tested. rfs.toml's `setup` is not used: only this flag.
    #[arg(long, value_name = "FILE")]
    setup: Option<PathBuf>,
    /// Do not test GOOD and BAD again: take it on your word that the
    /// proof passes at GOOD and fails at BAD (2 fewer commits tested, as
    /// `git bisect run`). Journaled and reported as "ends not re-tested".
    /// Without it both ends are tested first: an end that does not
    /// behave as claimed makes the bisect meaningless.
    #[arg(long)]
    trust_ends: bool,
}

impl BisectCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        let setup = match &self.setup {
            Some(f) => Some(crate::suite::setup::given_file(f).map_err(Error::Usage)?),
            None => None,
        };
        crate::bisect::run(crate::bisect::BisectArgs {
            good: self.good,
            bad: self.bad,
            proof: self.proof.clone(),
            skip: self.skip,
            jobs: self.jobs,
            template: self.session.into_run_args(self.proof, false),
            sign_key: self.sign_key,
            setup,
            trust_ends: self.trust_ends,
        })
    }
}
