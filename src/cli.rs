//! The command line: clap definitions and dispatch. Output for humans is
//! printed here and by [`crate::reporter`]; the engine never prints.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::error::Error;
use crate::exit_code;
use crate::provider::select;
use crate::settings::{self, RunArgs, RunSettings};

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
    Run {
        /// The Rhai script; `-` reads it from standard input.
        script: PathBuf,
        #[command(flatten)]
        session: SessionArgs,
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
    },
    /// Run a suite of proofs, each in its own sandbox, several at once.
    ///
    /// One line per proof, the failures with their output, an index of
    /// every bundle. Exit 0 all passed, 1 one failed, 3 one was refused,
    /// 130 interrupted (every sandbox still removed and verified gone).
    Test {
        /// Proof files or folders (walked for *.rhai; `_name.rhai` files
        /// are modules, not proofs). Default: rfs.toml's `proofs`, else
        /// `proofs/`.
        paths: Vec<PathBuf>,
        #[command(flatten)]
        session: SessionArgs,
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
        /// Sign every proof's journal with this key (as `rfs run`).
        #[arg(long, value_name = "PATH")]
        sign_key: Option<PathBuf>,
    },
    /// Find the first commit at which a proof's result changes.
    ///
    /// One sandbox re-synced commit by commit (`--jobs N`: N sandboxes),
    /// printed as `git bisect` prints it. A commit where the proof is
    /// refused, or a step exits 125, is skipped.
    Bisect {
        /// A commit where the proof has one result (usually passes).
        good: String,
        /// A later commit where it has the other (usually fails).
        bad: String,
        /// The proof (read once from here, run at every commit).
        proof: PathBuf,
        #[command(flatten)]
        session: SessionArgs,
        /// How many commits are tested at once, each in its own sandbox.
        #[arg(long, short, default_value_t = 1)]
        jobs: usize,
        /// A commit (id or prefix) not to test, as `git bisect skip`. Repeatable.
        #[arg(long, value_name = "COMMIT")]
        skip: Vec<String>,
        /// Sign the journal with this key (as `rfs run`).
        #[arg(long, value_name = "PATH")]
        sign_key: Option<PathBuf>,
    },
    /// Explore a live sandbox interactively (one run, one sandbox, cleaned up on exit).
    Repl {
        #[command(flatten)]
        session: SessionArgs,
        /// Keep the sandbox when the session ends (journaled; prints how to remove it).
        #[arg(long)]
        keep: bool,
    },
    /// Serve one session to a coding agent over MCP (stdio).
    ///
    /// One run with one live sandbox, as the REPL: tools sync, step,
    /// attach/send/screen/assert_screen, journal, save and end. The
    /// sandbox is destroyed and verified gone when the client
    /// disconnects.
    Mcp {
        #[command(flatten)]
        session: SessionArgs,
    },
    /// Compile a script and report errors without running it: syntax,
    /// imports, unknown functions, wrong argument counts, misspelt option keys.
    Check {
        /// The Rhai scripts; `-` reads one from standard input.
        #[arg(required = true)]
        scripts: Vec<PathBuf>,
    },
    /// Verify a run's output directory: the journal's chain, EVIDENCE.md
    /// against the journal, every step log, recording and bundled file
    /// against its journaled sha256, the signature and the attestation.
    Verify {
        /// The run's output directory (holds journal.jsonl).
        out: PathBuf,
        /// Require a signature (journal.sig) by a key this `ssh-keygen`
        /// allowed-signers file allows for namespace `rfs`.
        #[arg(long, value_name = "FILE")]
        allowed_signers: Option<PathBuf>,
        /// The principal the signer must be (with --allowed-signers).
        #[arg(long, value_name = "ID")]
        identity: Option<String>,
        /// Verify a bundle whose EVIDENCE.md or report.html another rfs
        /// made (this rfs cannot compare them): they are named as NOT
        /// CHECKED, and everything else must verify. Without it, such a
        /// bundle is not verified.
        #[arg(long)]
        allow_unchecked_views: bool,
    },
    /// Make a run's report from its output directory, after verifying
    /// it (every check of `rfs verify`): `report.html` in the folder, or
    /// with `--format markdown` a short summary on standard output.
    Report {
        /// The run's output directory (holds journal.jsonl).
        out: PathBuf,
        /// `html` (default) or `markdown`.
        #[arg(long, value_enum, default_value = "html")]
        format: ReportFormat,
        /// Write here instead (html: instead of OUT/report.html;
        /// markdown: instead of standard output).
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Journal tools.
    Journal {
        #[command(subcommand)]
        command: JournalCommand,
    },
    /// Re-run a bundle's script against the commit it pinned, in a fresh
    /// sandbox, and compare each step with the original (exit 0 all match,
    /// 1 some differ).
    Replay {
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
        vars: Vec<String>,
        /// Image for providers that take one (docker).
        #[arg(long)]
        image: Option<String>,
    },
    /// Check each provider, one line each; exit 3 when the provider a run would use now is unusable.
    Doctor {
        /// The provider to judge the exit code by (default: what a run would use now).
        #[arg(long)]
        provider: Option<String>,
        /// Docker image to look for (default: RFS_DOCKER_IMAGE).
        #[arg(long)]
        image: Option<String>,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page (roff) of rfs.
    Man,
    /// List the run bundles in the state directory, newest first, with
    /// their outcome.
    ///
    /// `rfs runs prune` removes old ones.
    Runs {
        #[command(subcommand)]
        command: Option<RunsCommand>,
    },
    /// List the live rfs sandboxes of this user on every provider.
    ///
    /// Running runs and `--keep` ones, with their owner and age.
    Ps {
        /// Only this provider.
        #[arg(long)]
        provider: Option<String>,
        /// Every user's sandboxes, not only this user's.
        #[arg(long)]
        all: bool,
    },
    /// Open an interactive shell in a sandbox rfs created.
    ///
    /// One kept with `--keep`, in its synced source; exits with the
    /// shell's status.
    Shell {
        /// The sandbox id (`rfs ps` lists them).
        id: String,
        /// The sandbox's provider (default: the one that knows the id).
        #[arg(long)]
        provider: Option<String>,
    },
    /// Remove the named sandboxes rfs created, each verified gone.
    ///
    /// Only this user's, and not one a live run is using, unless asked;
    /// exits non-zero when an id is unknown or was not removed.
    Rm {
        /// Sandbox ids (`rfs ps` lists them).
        #[arg(required = true)]
        ids: Vec<String>,
        /// Only this provider (default: the one that knows each id).
        #[arg(long)]
        provider: Option<String>,
        /// Also other users' sandboxes (and ones without an owner label).
        #[arg(long)]
        all: bool,
        /// Also sandboxes of live runs, and ones whose owner cannot be
        /// checked from here (another host).
        #[arg(long)]
        force: bool,
    },
    /// Destroy sandboxes left behind by rfs processes that are gone.
    Gc {
        /// List what would be destroyed.
        #[arg(long)]
        dry_run: bool,
        /// Only this provider (default: every available provider).
        #[arg(long)]
        provider: Option<String>,
        /// Also destroy sandboxes whose owner cannot be checked from here
        /// (another host) once they started longer ago than this (90m, 2h, 1d).
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
    },
}

impl Command {
    /// The `--var K=V` pairs given (secret-named values are redacted from
    /// tracing before anything is logged).
    fn vars(&self) -> &[String] {
        match self {
            Command::Run { session, .. }
            | Command::Repl { session, .. }
            | Command::Test { session, .. }
            | Command::Bisect { session, .. }
            | Command::Mcp { session, .. } => &session.vars,
            Command::Replay { vars, .. } => vars,
            _ => &[],
        }
    }
}

/// What `run` and `repl` share: where the run goes and what it gets.
#[derive(Debug, clap::Args)]
pub(crate) struct SessionArgs {
    /// Provider: local (default), docker or daytona. Overrides RELAYFLOWS_SANDBOX_PROVIDER.
    #[arg(long)]
    provider: Option<String>,
    /// Output directory for the journal, logs and EVIDENCE.md
    /// (default: $RFS_STATE_DIR/runs/<run-id>, outside the repository).
    #[arg(long)]
    out: Option<PathBuf>,
    /// A value for the script's arg(NAME). Repeatable.
    #[arg(long = "var", value_name = "KEY=VALUE")]
    vars: Vec<String>,
    /// Image for providers that take one (docker). Also RFS_DOCKER_IMAGE.
    #[arg(long)]
    image: Option<String>,
    /// Snapshot for providers that take one (daytona). Also
    /// RELAYFLOWS_SANDBOX_SNAPSHOT; `sandbox(#{ snapshot })` beats both.
    #[arg(long)]
    snapshot: Option<String>,
    /// Maximum sandbox lifetime in seconds (dead-man switch).
    #[arg(long, value_name = "SECS")]
    max_lifetime: Option<u64>,
    /// Isolation of local sandboxes: auto (default), namespaces, none.
    /// Also RFS_LOCAL_ISOLATION.
    #[arg(long, value_name = "MODE")]
    isolation: Option<String>,
    /// Ship the working tree as it is, uncommitted changes included, for
    /// writing a proof; the evidence is marked NOT REPRODUCIBLE (console,
    /// EVIDENCE.md, attestation, `rfs verify`).
    #[arg(long)]
    allow_dirty: bool,
    /// Let a script's `sync_source(#{ repo: PATH })` ship the repository
    /// at PATH besides the one rfs was started in. Repeatable.
    #[arg(long = "allow-repo", value_name = "PATH")]
    allow_repos: Vec<PathBuf>,
    /// Hand the environment variable NAME to the run as `arg(NAME)`,
    /// redacted as a secret (a repository's rfs.toml may ask for it, but
    /// only this flag passes it). Repeatable.
    #[arg(long = "secret", value_name = "NAME")]
    secrets: Vec<String>,
}

impl SessionArgs {
    fn into_run_args(self, script: PathBuf, keep: bool) -> RunArgs {
        RunArgs {
            script,
            provider: self.provider,
            out: self.out,
            vars: self.vars,
            keep,
            image: self.image,
            snapshot: self.snapshot,
            max_lifetime_secs: self.max_lifetime,
            isolation: self.isolation,
            allow_dirty: self.allow_dirty,
            allow_repos: self.allow_repos,
            secrets: self.secrets,
        }
    }
}

/// What `rfs report` makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ReportFormat {
    Html,
    Markdown,
}

#[derive(Debug, Subcommand)]
pub(crate) enum RunsCommand {
    /// Remove old bundles: beyond the newest N runs, or last written
    /// longer ago than AGE (also finished suites and bisections). A run
    /// that has not ended is never removed.
    Prune {
        /// Remove bundles last written longer ago than this (90m, 2h, 7d).
        #[arg(long, value_name = "AGE")]
        older_than: Option<String>,
        /// Keep only the newest N runs.
        #[arg(long, value_name = "N")]
        keep: Option<usize>,
        /// List what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum JournalCommand {
    /// Verify a journal's hash chain (detects edited, dropped, reordered lines).
    Verify { file: PathBuf },
}

/// Parse arguments, run, return the process exit code.
pub fn run() -> i32 {
    // A sandbox's init (or its parent) once set up: reap, nothing else.
    let mut all = std::env::args_os();
    if let Some(argv0) = all.next() {
        let rest: Vec<_> = all.collect();
        if let Some(code) = crate::provider::local::reaper_main(&argv0, &rest) {
            return code;
        }
    }
    // The in-sandbox verifier: no CLI parsing, logging or runtime.
    let mut args = std::env::args_os().skip(1);
    if args
        .next()
        .is_some_and(|a| crate::source::native_check::is_command(&a))
    {
        return crate::source::native_check::main(args.collect());
    }
    crate::source::native_check::declare_executable("/proc/self/exe".into());
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
        Command::Run {
            script,
            session,
            keep,
            quiet,
            json,
            sign_key,
            junit,
            watch,
        } => {
            let args = session.into_run_args(script, keep);
            let views = crate::ci::Views::from_args(junit)?;
            if json {
                run_json(args, sign_key, &views)
            } else {
                let console = crate::reporter::Console::new(quiet).with_progress(progress(quiet));
                run_script(args, sign_key, Arc::new(console), &views, watch)
            }
        }
        Command::Repl { session, keep } => {
            let console = crate::reporter::Console::new(false).with_progress(progress(false));
            let settings = RunSettings::for_repl(session.into_run_args(PathBuf::new(), keep))?;
            crate::repl::run(settings, Arc::new(console))
        }
        Command::Check { scripts } => check(&scripts),
        Command::Mcp { session } => {
            let mut settings = RunSettings::for_repl(session.into_run_args(PathBuf::new(), false))?;
            settings.script = PathBuf::from("<mcp>");
            crate::mcp::run(settings)
        }
        cmd @ Command::Bisect { .. } => bisect(cmd),
        cmd @ Command::Test { .. } => suite(cmd, color),
        Command::Journal {
            command: JournalCommand::Verify { file },
        } => journal_verify(&file),
        Command::Verify {
            out,
            allowed_signers,
            identity,
            allow_unchecked_views,
        } => verify(
            &out,
            crate::seal::Trust {
                allowed_signers,
                identity,
            },
            if allow_unchecked_views {
                crate::verify::Views::AllowUnchecked
            } else {
                crate::verify::Views::MustMatch
            },
        ),
        Command::Report {
            out,
            format,
            output,
        } => report(&out, format, output.as_deref()),
        Command::Runs {
            command:
                Some(RunsCommand::Prune {
                    older_than,
                    keep,
                    dry_run,
                }),
        } => prune(older_than, keep, dry_run),
        Command::Ps { provider, all } => crate::sandboxes::ps(provider, all),
        Command::Shell { id, provider } => crate::sandboxes::shell(&id, provider),
        Command::Runs { command: None } => list_runs(),
        Command::Rm {
            ids,
            provider,
            all,
            force,
        } => crate::sandboxes::rm::rm(&ids, provider, crate::sandboxes::rm::Scope { all, force }),
        Command::Gc {
            dry_run,
            provider,
            older_than,
        } => gc(dry_run, provider, older_than),
        Command::Replay {
            bundle,
            provider,
            out,
            strict,
            vars,
            image,
        } => crate::replay::replay(
            crate::replay::ReplayArgs {
                bundle,
                provider,
                out,
                strict,
                vars,
                image,
            },
            Arc::new(crate::reporter::Console::new(false).with_progress(progress(false))),
        ),
        Command::Doctor { provider, image } => doctor(provider, image),
        Command::Completions { shell } => {
            use clap::CommandFactory;
            let mut buf = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "rfs", &mut buf);
            print_bytes(&buf)
        }
        Command::Man => {
            use clap::CommandFactory;
            let mut buf = Vec::new();
            clap_mangen::Man::new(Cli::command())
                .render(&mut buf)
                .map_err(Error::internal)?;
            print_bytes(&buf)
        }
    }
}

/// `rfs test`.
fn suite(cmd: Command, color: bool) -> Result<i32, Error> {
    let Command::Test {
        paths,
        session,
        jobs,
        fail_fast,
        retries,
        filter,
        skip,
        json,
        junit,
        sign_key,
    } = cmd
    else {
        unreachable!("suite() is called for `rfs test`")
    };
    use std::io::IsTerminal;
    let terminal = !json && std::io::stderr().is_terminal();
    crate::suite::run(crate::suite::SuiteArgs {
        paths,
        filters: crate::suite::plan::Filters {
            include: filter,
            skip,
        },
        jobs,
        retries,
        fail_fast,
        out: session.out.clone(),
        junit,
        json,
        template: session.into_run_args(PathBuf::new(), false),
        sign_key,
        terminal,
        color,
    })
}

/// `rfs bisect`.
fn bisect(cmd: Command) -> Result<i32, Error> {
    let Command::Bisect {
        good,
        bad,
        proof,
        session,
        jobs,
        skip,
        sign_key,
    } = cmd
    else {
        unreachable!("bisect() is called for `rfs bisect`")
    };
    crate::bisect::run(crate::bisect::BisectArgs {
        good,
        bad,
        proof: proof.clone(),
        skip,
        jobs,
        template: session.into_run_args(proof, false),
        sign_key,
    })
}

/// `rfs journal verify FILE`.
fn journal_verify(file: &std::path::Path) -> Result<i32, Error> {
    let v = crate::journal::verify::verify(file).map_err(|reason| Error::JournalInvalid {
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

/// `rfs runs`.
fn list_runs() -> Result<i32, Error> {
    let runs = crate::runs::list(&settings::state_dir().join("runs"));
    for r in &runs {
        outln!(
            "{}  {:<11} {:>3} steps  {:<8} {}  {}",
            r.run_id,
            r.outcome,
            r.steps,
            r.provider,
            r.script,
            r.dir.display()
        );
    }
    if runs.is_empty() {
        errln!(
            "rfs: no runs in {}",
            settings::state_dir().join("runs").display()
        );
    }
    Ok(exit_code::SUCCESS)
}

/// `rfs run`: validate, run, report; the exit code is the run's.
fn run_script(
    args: RunArgs,
    sign_key: Option<PathBuf>,
    reporter: Arc<dyn crate::events::Reporter>,
    views: &crate::ci::Views,
    watch: bool,
) -> Result<i32, Error> {
    let settings = RunSettings::from_args(args)?;
    let hooks = crate::runner::Hooks {
        reporter,
        handle_signals: true,
        signing_key: crate::signing::key::for_run(sign_key.as_deref())?,
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

/// `rfs verify OUT`: print every check that passed; the first failure is
/// the error (exit 4).
fn verify(
    out: &std::path::Path,
    trust: crate::seal::Trust,
    views: crate::verify::Views,
) -> Result<i32, Error> {
    let (passed, failed) = match crate::verify::verify_views(out, trust, views) {
        Ok(p) => (p, None),
        Err(mut f) => (std::mem::take(&mut f.passed), Some(f)),
    };
    for p in &passed {
        let word = if p.unchecked { "UNCHECKED" } else { "ok" };
        outln!("{word}: {}: {}", p.check, p.detail);
    }
    match failed {
        None => {
            let unchecked: Vec<_> = passed
                .iter()
                .filter(|p| p.unchecked)
                .map(|p| p.check)
                .collect();
            if unchecked.is_empty() {
                outln!("{}: verified", out.display());
            } else {
                outln!(
                    "{}: verified, except {} (made by another rfs, NOT CHECKED: do not rely on {})",
                    out.display(),
                    unchecked.join(" and "),
                    if unchecked.len() == 1 { "it" } else { "them" }
                );
            }
            // Intact, and yet nobody else can re-run it: said every time.
            if let Some(w) = crate::report::Bundle::read(out)
                .ok()
                .and_then(|b| b.summary.not_reproducible)
            {
                outln!("warning: {}", w.describe());
            }
            Ok(exit_code::SUCCESS)
        }
        Some(f) => Err(Error::NotVerified {
            out: out.display().to_string(),
            check: f.check,
            reason: f.reason.to_string(),
        }),
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

/// `rfs report OUT`: verify the bundle (as `rfs verify` does; a bundle
/// that does not verify gets no report), then write its view.
fn report(
    out: &std::path::Path,
    format: ReportFormat,
    output: Option<&std::path::Path>,
) -> Result<i32, Error> {
    // The report in the bundle is what this command replaces.
    let skip = [crate::report::HTML_FILE];
    if let Err(f) = crate::verify::verify_except(
        out,
        crate::seal::Trust::default(),
        crate::verify::Views::MustMatch,
        &skip,
    ) {
        return Err(Error::NotVerified {
            out: out.display().to_string(),
            check: f.check,
            reason: f.reason.to_string(),
        });
    }
    let failed = |e: crate::report::ReportError| Error::Internal(e.to_string());
    match (format, output) {
        (ReportFormat::Html, None) => {
            crate::report::write_html(out).map_err(failed)?;
            outln!("{}", out.join(crate::report::HTML_FILE).display());
        }
        (ReportFormat::Html, Some(file)) => {
            let page = crate::report::render_html(out).map_err(failed)?;
            std::fs::write(file, page).map_err(Error::internal)?;
            outln!("{}", file.display());
        }
        (ReportFormat::Markdown, to) => {
            let b = crate::report::Bundle::read(out).map_err(failed)?;
            let md = crate::report::markdown::summary(&b, &out.display().to_string());
            match to {
                Some(file) => std::fs::write(file, md).map_err(Error::internal)?,
                None => outln!("{}", md.trim_end()),
            }
        }
    }
    Ok(exit_code::SUCCESS)
}

/// `rfs runs prune`.
fn prune(older_than: Option<String>, keep: Option<usize>, dry_run: bool) -> Result<i32, Error> {
    if older_than.is_none() && keep.is_none() {
        return Err(Error::Usage(
            "rfs runs prune: say what to remove: --older-than AGE (e.g. 7d) and/or --keep N".into(),
        ));
    }
    let older_than = older_than
        .as_deref()
        .map(crate::gc::parse_age)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let pruned = crate::runs::prune(&settings::state_dir(), older_than, keep, dry_run)
        .map_err(|e| Error::Internal(format!("cannot remove a bundle: {e}")))?;
    let verb = if dry_run { "would remove" } else { "removed" };
    for p in &pruned {
        outln!("{verb} {} ({})", p.dir.display(), p.why);
    }
    errln!("rfs runs prune: {verb} {} folder(s)", pruned.len());
    Ok(exit_code::SUCCESS)
}

fn gc(dry_run: bool, only: Option<String>, older_than: Option<String>) -> Result<i32, Error> {
    let older_than = older_than
        .as_deref()
        .map(crate::gc::parse_age)
        .transpose()
        .map_err(|e| Error::Usage(e.to_string()))?;
    let rt = tokio::runtime::Runtime::new().map_err(Error::internal)?;
    let mut failed = false;
    for provider in crate::sandboxes::reachable(&rt, only, "gc")? {
        let entries = rt
            .block_on(crate::gc::collect_older_than(
                provider.as_ref(),
                dry_run,
                older_than,
            ))
            .map_err(|e| Error::Refused(e.to_string()))?;
        for e in entries {
            use crate::gc::GcAction::*;
            let (verb, why) = match &e.action {
                KeptAlive => ("kept (owner alive)", String::new()),
                KeptUnknown(w) => ("kept", w.clone()),
                WouldDestroy(w) => ("would destroy", w.clone()),
                Destroyed(w) => ("destroyed", w.clone()),
                Failed(w) => {
                    failed = true;
                    ("FAILED to destroy", w.clone())
                }
            };
            outln!("{} {} (run {}): {verb} {why}", e.provider, e.id, e.run_id);
        }
    }
    Ok(if failed {
        exit_code::INTERNAL
    } else {
        exit_code::SUCCESS
    })
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

/// `rfs doctor`.
fn doctor(provider: Option<String>, image: Option<String>) -> Result<i32, Error> {
    let file = match std::env::current_dir() {
        Ok(d) => {
            crate::repo_config::for_dir(&d).map_err(|e| Error::Usage(format!("refused: {e}")))?
        }
        Err(_) => Default::default(),
    };
    let current = select::choose_with_file(
        provider.as_deref(),
        std::env::var(select::PROVIDER_ENV).ok().as_deref(),
        file.provider.as_deref(),
    )
    .map_err(|e| Error::Usage(e.to_string()))?;
    let image = image
        .filter(|s| !s.trim().is_empty())
        .or_else(crate::provider::docker::image_from_env)
        .or(file.image);
    let rt = tokio::runtime::Runtime::new().map_err(Error::internal)?;
    let all = crate::doctor::check_all(&rt, &settings::state_dir(), image);
    let mut code = exit_code::SUCCESS;
    for h in &all {
        let now = h.provider == current.name;
        outln!(
            "{:<8} {}  {}{}",
            h.provider,
            if h.usable { "ok  " } else { "FAIL" },
            h.detail,
            if now {
                format!("  [what a run would use now: {}]", current.reason)
            } else {
                String::new()
            }
        );
        if now && !h.usable {
            code = exit_code::REFUSED;
        }
    }
    Ok(code)
}
