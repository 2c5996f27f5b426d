//! `rfs test [PATHS…]`: a suite of proofs, each in its own sandbox.

use std::path::PathBuf;

use super::session_args::SessionArgs;
use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
#[command(mut_arg("out", |a| a.help(
    "Output directory for the suite: its index, JUnit and every proof's bundle (default: $RFS_STATE_DIR/suites/<suite-id>, outside the repository)"
)))]
pub(crate) struct TestCommand {
    /// Proof files or folders (walked for *.rhai; `_name.rhai` files
    /// are modules, not proofs). Default: rfs.toml's `proofs`, else
    /// `proofs/` at the repository's root.
    paths: Vec<PathBuf>,
    #[command(flatten)]
    pub(super) session: SessionArgs,
    /// How many proofs run at once (default: RFS_JOBS, rfs.toml's
    /// `jobs`, else the cores here for local and docker, 8 for daytona).
    #[arg(long, short)]
    jobs: Option<usize>,
    /// Start no new proof once one has not passed.
    #[arg(long)]
    fail_fast: bool,
    /// Run a failed proof again up to N times (it is then "flaky").
    #[arg(long, value_name = "N", default_value_t = 0)]
    retries: u32,
    /// Run only proofs whose name contains this. Repeatable (any).
    #[arg(long, short = 'k', value_name = "TEXT")]
    filter: Vec<String>,
    /// Leave out proofs whose name contains this. Repeatable.
    #[arg(long, value_name = "TEXT")]
    skip: Vec<String>,
    /// Machine-readable: stdout carries only the suite's events as
    /// JSON lines.
    #[arg(long)]
    json: bool,
    /// Also write JUnit XML (a test suite per proof, a case per step).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Run this script once before the proofs (default: rfs.toml's
    /// `setup`); every proof starts from a fork of its checkpoint.
    #[arg(long, value_name = "FILE")]
    setup: Option<PathBuf>,
    /// Sign every proof's journal with this key (as `rfs run`).
    #[arg(long, value_name = "PATH")]
    sign_key: Option<PathBuf>,
}

impl TestCommand {
    pub(crate) fn exec(self, color: bool) -> Result<i32, Error> {
        use std::io::IsTerminal;
        let terminal = !self.json && std::io::stderr().is_terminal();
        let mut template = self.session.into_run_args(PathBuf::new(), false);
        template.own_outputs.extend(
            self.junit
                .iter()
                .map(|j| super::session_args::own_output(j, false)),
        );
        crate::suite::run(crate::suite::SuiteArgs {
            paths: self.paths,
            filters: crate::suite::plan::Filters {
                include: self.filter,
                skip: self.skip,
            },
            jobs: self.jobs,
            retries: self.retries,
            fail_fast: self.fail_fast,
            out: template.out.clone(),
            junit: self.junit,
            json: self.json,
            template,
            sign_key: self.sign_key,
            setup: self.setup,
            terminal,
            color,
        })
    }
}
