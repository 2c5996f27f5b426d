//! The console reporter used by the CLI: step output prefixed by step name
//! on stdout, everything about the run on stderr.

use std::io::Write;

use crate::events::{Event, Reporter, Stream};

/// Prints events for a human.
#[derive(Debug, Default)]
pub struct Console {
    pub quiet: bool,
}

impl Reporter for Console {
    fn report(&self, event: &Event) {
        let out = std::io::stdout();
        let err = std::io::stderr();
        // Terminal write errors (closed pipe) must not fail the run.
        let _ = match event {
            Event::StepOutput { name, stream, line } => match stream {
                Stream::Stdout => writeln!(out.lock(), "[{name}] {line}"),
                Stream::Stderr => writeln!(err.lock(), "[{name}] {line}"),
            },
            Event::Print(t) => writeln!(out.lock(), "{t}"),
            Event::Debug(t) => writeln!(err.lock(), "debug: {t}"),
            _ if self.quiet => Ok(()),
            Event::RunStarted {
                run_id,
                provider,
                reason,
                out_dir,
            } => writeln!(
                err.lock(),
                "rfs: run {run_id} on provider `{provider}` ({reason}); evidence in {out_dir}"
            ),
            Event::SandboxPlaced { id, provider } => {
                writeln!(err.lock(), "rfs: sandbox {id} ({provider})")
            }
            Event::SourcePinned {
                commit,
                tree_digest,
                files,
                workdir,
            } => writeln!(
                err.lock(),
                "rfs: synced commit {commit} (tree {tree_digest}, {files} files verified) to {workdir}"
            ),
            Event::StepStarted { name, attempt, cwd } => {
                if *attempt > 1 {
                    writeln!(err.lock(), "rfs: step `{name}` attempt {attempt} in {cwd}")
                } else {
                    writeln!(err.lock(), "rfs: step `{name}` in {cwd}")
                }
            }
            Event::StepFinished { name, ok, summary } => writeln!(
                err.lock(),
                "rfs: step `{name}` {} ({summary})",
                if *ok { "ok" } else { "FAILED" }
            ),
            Event::Warning(w) => writeln!(err.lock(), "rfs: warning: {w}"),
            Event::CleanupVerified { id, elapsed_ms } => writeln!(
                err.lock(),
                "rfs: sandbox {id} destroyed, verified gone in {elapsed_ms} ms"
            ),
            Event::RunFinished { outcome, out_dir } => {
                writeln!(err.lock(), "rfs: run {outcome}; evidence: {out_dir}/EVIDENCE.md")
            }
        };
    }
}
