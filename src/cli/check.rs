//! `rfs check SCRIPT…`: compile and lint without running anything.

use std::path::PathBuf;

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct CheckCommand {
    /// The Rhai scripts; `-` reads one from standard input.
    #[arg(required = true)]
    scripts: Vec<PathBuf>,
}

impl CheckCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        check(&self.scripts)
    }
}

/// `rfs check SCRIPT…`: every script is checked; each problem is shown
/// with its script line, and the exit code is 2 if any script has one.
fn check(scripts: &[PathBuf]) -> Result<i32, Error> {
    let one = |script: &PathBuf| -> Result<(), Error> {
        let s = crate::script::Script::load(script)?;
        let engine = crate::script::base_engine(&s.dir)?;
        crate::script::compile(&engine, &s)?;
        Ok(())
    };
    if let [script] = scripts {
        one(script)?;
        outln!("{}: ok", script.display());
        return Ok(exit_code::SUCCESS);
    }
    let mut failed = 0;
    for script in scripts {
        match one(script) {
            Ok(()) => outln!("{}: ok", script.display()),
            Err(e) => {
                failed += 1;
                errln!("{:?}", miette::Report::new(e));
            }
        }
    }
    if failed > 0 {
        errln!("rfs: {failed} of {} scripts have problems", scripts.len());
        return Ok(exit_code::USAGE);
    }
    Ok(exit_code::SUCCESS)
}
