//! `rfs completions SHELL` and `rfs man`: generated from the clap
//! definitions.

use rfs_evidence::error::Error;

#[derive(Debug, clap::Args)]
pub(crate) struct CompletionsCommand {
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

impl CompletionsCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        use clap::CommandFactory;
        let mut buf = Vec::new();
        clap_complete::generate(self.shell, &mut super::Cli::command(), "rfs", &mut buf);
        super::print_bytes(&buf)
    }
}

/// `rfs man`: the man page (roff).
pub(crate) fn man() -> Result<i32, Error> {
    use clap::CommandFactory;
    let mut buf = Vec::new();
    clap_mangen::Man::new(super::Cli::command())
        .render(&mut buf)
        .map_err(Error::internal)?;
    super::print_bytes(&buf)
}
