//! The command line: clap definitions, then one file per command (its
//! flags, its call into the engine, its printing). Output for humans is
//! printed here and by [`crate::reporter`]; the engine never prints.

mod bisect;
mod cache;
mod check;
mod completions;
mod doctor;
mod journal;
mod mcp;
mod repl;
mod replay;
mod report;
mod run;
mod runs;
mod sandboxes;
mod session_args;
mod test;
mod verify;
mod verify_folder;

use clap::{Parser, Subcommand};

use rfs_evidence::error::Error;
use rfs_evidence::exit_code;

/// rfs: fail-closed, provable sandbox workflows scripted in Rhai.
#[derive(Debug, Parser)]
#[command(name = "rfs", version, about, long_about = None, after_help = EXIT_CODES)]
pub struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
    /// Colour diagnostics: auto (a terminal, unless NO_COLOR; CLICOLOR_FORCE forces), always, never.
    #[arg(long, global = true, value_enum, default_value_t = crate::color::ColorChoice::Auto)]
    pub(crate) color: crate::color::ColorChoice,
    /// Trace rfs itself to stderr (-v debug, -vv trace); RUST_LOG also works. Off by default.
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub(crate) verbose: u8,
}

const EXIT_CODES: &str = "Exit codes: 0 success, 1 script/step failed, 2 usage error, \
3 refused by the fail-closed runtime, 4 journal invalid, 5 internal error, 130 interrupted.";

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a workflow/proof script in the run's one shared sandbox.
    Run(run::RunCommand),
    /// Run a suite of proofs, each in its own sandbox, several at once.
    ///
    /// One line per proof, the failures with their output, an index of
    /// every bundle. Exit 0 all passed, 1 one failed, 3 one was refused,
    /// 130 interrupted (every sandbox still removed and verified gone).
    Test(test::TestCommand),
    /// Find the first commit at which a proof's result changes.
    ///
    /// One sandbox re-synced commit by commit (`--jobs N`: N sandboxes),
    /// printed as `git bisect` prints it. A commit where the proof is
    /// refused, or a step exits 125, is skipped.
    Bisect(bisect::BisectCommand),
    /// Explore a live sandbox interactively (one run, one sandbox, cleaned up on exit).
    Repl(repl::ReplCommand),
    /// Serve one session to a coding agent over MCP (stdio).
    ///
    /// One run with one live sandbox, as the REPL: tools sync, step,
    /// attach/send/screen/assert_screen, journal, save and end. The
    /// sandbox is destroyed and verified gone when the client
    /// disconnects.
    Mcp(mcp::McpCommand),
    /// Compile a script and report errors without running it: syntax,
    /// imports, unknown functions, wrong argument counts, misspelt option keys.
    Check(check::CheckCommand),
    /// Verify a run's output directory: the journal's chain, EVIDENCE.md
    /// against the journal, every step log, recording and bundled file
    /// against its journaled sha256, the signature and the attestation.
    Verify(verify::VerifyCommand),
    /// Make a run's report from its output directory, after verifying
    /// it (every check of `rfs verify`): `report.html` in the folder, or
    /// with `--format markdown` a short summary on standard output.
    Report(report::ReportCommand),
    /// Journal tools.
    Journal(journal::JournalCommand),
    /// Re-run a bundle's script against the commit it pinned, in a fresh
    /// sandbox, and compare each step with the original (exit 0 all match,
    /// 1 some differ).
    Replay(replay::ReplayCommand),
    /// Check each provider, one line each; exit 3 when the provider a run would use now is unusable.
    Doctor(doctor::DoctorCommand),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(completions::CompletionsCommand),
    /// Print the man page (roff) of rfs.
    Man,
    /// List the run bundles in the state directory, newest first, with
    /// their outcome.
    ///
    /// `rfs runs prune` removes old ones.
    Runs(runs::RunsCommand),
    /// The caches rfs keeps between runs (`sandbox(#{ caches })`).
    ///
    /// `rfs cache ls` lists them with their size and digest; `rfs cache
    /// prune` empties them.
    Cache(cache::CacheCommand),
    /// List the live rfs sandboxes of this user on every provider.
    ///
    /// Running runs and `--keep` ones, with their owner and age.
    Ps(sandboxes::PsCommand),
    /// Open an interactive shell in a sandbox rfs created.
    ///
    /// One kept with `--keep`, in its synced source; exits with the
    /// shell's status.
    Shell(sandboxes::ShellCommand),
    /// Remove the named sandboxes rfs created, each verified gone.
    ///
    /// Only this user's, and not one a live run is using, unless asked;
    /// exits non-zero when an id is unknown or was not removed.
    Rm(sandboxes::RmCommand),
    /// Destroy sandboxes left behind by rfs processes that are gone.
    Gc(sandboxes::GcCommand),
}

impl Command {
    /// The `--var K=V` pairs given (secret-named values are redacted from
    /// tracing before anything is logged).
    fn vars(&self) -> &[String] {
        match self {
            Command::Run(c) => &c.session.vars,
            Command::Repl(c) => &c.session.vars,
            Command::Test(c) => &c.session.vars,
            Command::Bisect(c) => &c.session.vars,
            Command::Mcp(c) => &c.session.vars,
            Command::Replay(c) => &c.vars,
            _ => &[],
        }
    }
}

/// Parse arguments, run, return the process exit code.
pub fn run() -> i32 {
    // A sandbox's init (or its parent) once set up: reap, nothing else.
    let mut all = std::env::args_os();
    if let Some(argv0) = all.next() {
        let rest: Vec<_> = all.collect();
        if let Some(code) = rfs_sandbox::provider::local::reaper_main(&argv0, &rest) {
            return code;
        }
        // rfs's agent inside a gVisor sandbox: no CLI, logging or runtime.
        if let Some(code) = rfs_sandbox::provider::local::gvisor::agent_main(&rest) {
            return code;
        }
        // The keeper of a gVisor sandbox on the host: reaps, nothing else.
        if let Some(code) = rfs_sandbox::provider::local::gvisor::keeper_main(&rest) {
            return code;
        }
    }
    // The in-sandbox verifier: no CLI parsing, logging or runtime.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| rfs_sandbox::source::native_check::is_command(&a))
    {
        return rfs_sandbox::source::native_check::main(args.collect());
    }
    rfs_sandbox::source::native_check::declare_executable("/proc/self/exe".into());
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                exit_code::USAGE
            } else {
                exit_code::SUCCESS
            };
        }
    };
    install_miette_hook(crate::color::decide(cli.color), cli.verbose > 0);
    crate::logging::init(cli.verbose, cli.command.vars().iter().map(String::as_str));
    crate::logging::install_panic_hook();
    tracing::debug!(command = ?cli.command, "rfs {}", env!("CARGO_PKG_VERSION"));
    match dispatch(cli.command, crate::color::decide(cli.color)) {
        Ok(code) => code,
        Err(e) => {
            let code = e.exit_code();
            errln!("{:?}", miette::Report::new(e));
            code
        }
    }
}

fn dispatch(cmd: Command, color: bool) -> Result<i32, Error> {
    match cmd {
        Command::Run(c) => c.exec(),
        Command::Test(c) => c.exec(color),
        Command::Bisect(c) => c.exec(),
        Command::Repl(c) => c.exec(),
        Command::Mcp(c) => c.exec(),
        Command::Check(c) => c.exec(),
        Command::Verify(c) => c.exec(),
        Command::Report(c) => c.exec(),
        Command::Journal(c) => c.exec(),
        Command::Replay(c) => c.exec(),
        Command::Doctor(c) => c.exec(),
        Command::Completions(c) => c.exec(),
        Command::Man => completions::man(),
        Command::Runs(c) => c.exec(),
        Command::Cache(c) => c.exec(),
        Command::Ps(c) => c.exec(),
        Command::Shell(c) => c.exec(),
        Command::Rm(c) => c.exec(),
        Command::Gc(c) => c.exec(),
    }
}

/// The spinner for slow phases: on a terminal only, never with `-q`
/// (`--json` never asks). `RFS_PROGRESS_AFTER_MS` sets how long a phase
/// runs before it shows (default 1000).
fn progress(quiet: bool) -> Option<crate::reporter::Progress> {
    use std::io::IsTerminal;
    if quiet || !std::io::stderr().is_terminal() {
        return None;
    }
    let after = std::env::var("RFS_PROGRESS_AFTER_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(
            crate::reporter::progress::DEFAULT_AFTER,
            std::time::Duration::from_millis,
        );
    Some(crate::reporter::Progress::new(after))
}

/// Render diagnostics unwrapped when stderr is not a terminal (CI logs,
/// pasted bug reports), and to the terminal's width otherwise; their
/// codes (`rfs::script`) only with `-v`.
fn install_miette_hook(color: bool, codes: bool) {
    use std::io::IsTerminal;
    let tty = std::io::stderr().is_terminal();
    let _ = miette::set_hook(Box::new(move |_| {
        let opts = miette::MietteHandlerOpts::new()
            .wrap_lines(tty)
            .color(color);
        let opts = if tty { opts } else { opts.unicode(true) };
        Box::new(crate::error_render::Handler {
            inner: Box::new(opts.build()),
            codes,
        })
    }));
}

/// Write generated text to stdout; a closed pipe (`| head`) is not an error.
fn print_bytes(bytes: &[u8]) -> Result<i32, Error> {
    use std::io::Write;
    match std::io::stdout().lock().write_all(bytes) {
        Ok(()) => Ok(exit_code::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(exit_code::SUCCESS),
        Err(e) => Err(Error::internal(e)),
    }
}
