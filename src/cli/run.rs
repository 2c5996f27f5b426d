//! `rfs run SCRIPT`: one script, one run, one sandbox (`--watch`: again on
//! each change, in the same sandbox).

use std::path::PathBuf;
use std::sync::Arc;

use super::session_args::SessionArgs;
use crate::settings::{RunArgs, RunSettings};
use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
pub(crate) struct RunCommand {
    /// The Rhai script; `-` reads it from standard input.
    script: PathBuf,
    #[command(flatten)]
    pub(super) session: SessionArgs,
    /// Keep the sandbox after the run (journaled).
    #[arg(long)]
    keep: bool,
    /// Only step output and script prints.
    #[arg(long, short)]
    quiet: bool,
    /// Machine-readable: stdout carries only JSON lines (each event,
    /// then a summary); step output and diagnostics go to stderr.
    #[arg(long)]
    json: bool,
    /// Sign the journal (journal.sig) and the attestation with this
    /// OpenSSH ed25519 key: a private key file, or a key (private or
    /// .pub) held by ssh-agent. Also RFS_SIGNING_KEY.
    #[arg(long, value_name = "PATH")]
    sign_key: Option<PathBuf>,
    /// Also write JUnit XML of the steps and screen assertions here
    /// (for CI test reports).
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Run again on each change, in the same sandbox (re-synced): each
    /// new commit, or with --allow-dirty each change of the working
    /// tree, and each edit of the script. Ctrl-C ends it.
    #[arg(long, conflicts_with_all = ["json", "junit"])]
    watch: bool,
}

impl RunCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        let mut args = self.session.into_run_args(self.script, self.keep);
        args.own_outputs.extend(
            self.junit
                .iter()
                .map(|j| super::session_args::own_output(j, false)),
        );
        let views = crate::ci::Views::from_args(self.junit)?;
        if self.json {
            run_json(args, self.sign_key, &views)
        } else {
            let console = crate::reporter::Console::new(self.quiet)
                .with_progress(super::progress(self.quiet));
            run_script(args, self.sign_key, Arc::new(console), &views, self.watch)
        }
    }
}

/// `rfs run`: validate, run, report; the exit code is the run's.
fn run_script(
    args: RunArgs,
    sign_key: Option<PathBuf>,
    reporter: Arc<dyn rfs_evidence::events::Reporter>,
    views: &crate::ci::Views,
    watch: bool,
) -> Result<i32, Error> {
    let settings = RunSettings::from_args(args)?;
    let hooks = crate::runner::Hooks {
        reporter,
        handle_signals: true,
        signing_key: rfs_evidence::signing::key::for_run(sign_key.as_deref())?,
        ..Default::default()
    };
    // `--watch`: the script runs again on each change until Ctrl-C, which
    // is how a watch ends (not an error to show).
    let report = if watch {
        let body = crate::rerun::body(settings.vars.clone());
        crate::runner::run_with_body(settings, hooks, body)
    } else {
        crate::runner::run(settings, hooks)
    };
    if let Some(e) = report.error {
        if !(watch && matches!(e, Error::Interrupted)) {
            errln!("{:?}", miette::Report::new(e));
        }
    }
    Ok(views.write(&report.out_dir, report.exit_code))
}

/// `rfs run --json`: as [`run_script`], then the summary line, which is
/// printed even when the arguments are refused before the run begins.
fn run_json(
    args: RunArgs,
    sign_key: Option<PathBuf>,
    views: &crate::ci::Views,
) -> Result<i32, Error> {
    let json = Arc::new(crate::reporter::Json::default());
    let code = run_script(args, sign_key, json.clone(), views, false).unwrap_or_else(|e| {
        let code = e.exit_code();
        errln!("{:?}", miette::Report::new(e));
        code
    });
    json.finish(None, code);
    Ok(code)
}
