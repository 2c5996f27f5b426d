//! `rfs journal verify FILE`: a journal's hash chain alone.

use std::path::PathBuf;

use clap::Subcommand;

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

#[derive(Debug, clap::Args)]
pub(crate) struct JournalCommand {
    #[command(subcommand)]
    command: JournalSubcommand,
}

#[derive(Debug, Subcommand)]
enum JournalSubcommand {
    /// Verify a journal's hash chain (detects edited, dropped, reordered lines).
    Verify { file: PathBuf },
}

impl JournalCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        match self.command {
            JournalSubcommand::Verify { file } => journal_verify(&file),
        }
    }
}

/// `rfs journal verify FILE`.
fn journal_verify(file: &std::path::Path) -> Result<i32, Error> {
    let v = rfs_evidence::journal::chain::verify(file).map_err(|reason| Error::JournalInvalid {
        path: file.display().to_string(),
        reason: reason.to_string(),
    })?;
    outln!(
        "{}: intact, {} lines, head {}{}{}",
        file.display(),
        v.lines,
        v.head,
        if v.complete {
            ""
        } else {
            " (run did not reach run.end: incomplete)"
        },
        match v.matches_recorded_head {
            Some(true) => ", matches journal.head",
            Some(false) =>
                ", runs past the head journal.head recorded (the run stopped before rewriting it)",
            None => ", no journal.head beside it",
        }
    );
    Ok(exit_code::SUCCESS)
}
