//! The console reporter used by the CLI: one consumer of the run's event
//! stream (the journal is the record; this is a view of it). Step output
//! goes to stdout prefixed by the step name, everything about the run to
//! stderr.

use std::io::Write;

use crate::reporter::{text, Progress};
use rfs_evidence::events::{Event, Reporter, Stream};

/// Prints events for a human.
#[derive(Debug, Default)]
pub struct Console {
    /// Only step output, `print`, `debug` and warnings.
    quiet: bool,
    /// A spinner for slow provisioning and syncs (terminals only).
    progress: Option<Progress>,
    /// The run's output directory (from `run.start`), named again at the
    /// end as a path that can be opened.
    out_dir: std::sync::Mutex<Option<String>>,
}

impl Console {
    /// Every event (`quiet`: only step output, prints and warnings).
    pub fn new(quiet: bool) -> Console {
        Console {
            quiet,
            progress: None,
            out_dir: Default::default(),
        }
    }

    /// Also spin on stderr while a phase runs longer than `progress`.
    pub fn with_progress(mut self, progress: Option<Progress>) -> Console {
        self.progress = progress;
        self
    }

    /// Print with the spinner (if any) out of the way.
    fn print(&self, to_stdout: bool, text: &str) {
        let write = || {
            // Terminal write errors (closed pipe) must not fail the run.
            let _ = if to_stdout {
                writeln!(std::io::stdout().lock(), "{text}")
            } else {
                writeln!(std::io::stderr().lock(), "{text}")
            };
        };
        match &self.progress {
            Some(p) => p.suspend(write),
            None => write(),
        }
    }
}

impl Reporter for Console {
    fn output(&self, step: &str, stream: Stream, line: &str) {
        self.print(
            stream == Stream::Stdout,
            &format!(
                "[{}] {}",
                text::inline(step),
                text::inline(line.strip_suffix('\r').unwrap_or(line))
            ),
        );
    }

    fn warning(&self, message: &str) {
        self.print(false, &format!("rfs: warning: {}", text::block(message)));
    }

    fn event(&self, event: &Event) {
        if let Some(p) = &self.progress {
            p.event(event);
        }
        if let Event::RunStart { out_dir, .. } = event {
            *self.out_dir.lock().unwrap_or_else(|p| p.into_inner()) = Some(out_dir.clone());
        }
        let line = match event {
            Event::Print { text } => {
                self.print(true, &text::block(text));
                return;
            }
            Event::Debug { text, .. } => format!("debug: {text}"),
            Event::PlacementWarning { message } => format!("rfs: warning: {message}"),
            Event::SourceResolved { .. } => match source_warning(event) {
                Some(w) => w,
                None => return,
            },
            Event::CleanupFailed {
                sandbox_id, error, ..
            } => format!("rfs: warning: teardown of sandbox {sandbox_id} not verified: {error}"),
            _ if self.quiet => return,
            Event::RunEnd { outcome, .. } => {
                let dir = self
                    .out_dir
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone();
                let evidence = std::path::Path::new(dir.as_deref().unwrap_or("."));
                format!(
                    "rfs: run {outcome}; evidence: {}",
                    evidence.join("EVIDENCE.md").display()
                )
            }
            _ => match progress_line(event) {
                Some(line) => line,
                None => return,
            },
        };
        // Every line about the run holds text from the script, the
        // repository or the sandbox (names, messages).
        self.print(false, &text::block(&line));
    }
}

/// The line that says how the run goes (not said with `--quiet`), if
/// `event` has one.
fn progress_line(event: &Event) -> Option<String> {
    let line = match event {
        Event::RunStart {
            run_id,
            provider,
            provider_reason,
            out_dir,
            ..
        } => format!(
            "rfs: run {run_id} on provider `{provider}` ({provider_reason}); evidence in {out_dir}"
        ),
        Event::Placement {
            sandbox_id,
            provider,
            isolation,
            ..
        } => match isolation
            .as_ref()
            .and_then(|i| i.network_policy.as_ref())
            .filter(|n| n.unfiltered)
        {
            // Said where the person looks, not only in the evidence (#44).
            Some(n) => format!(
                "rfs: sandbox {sandbox_id} ({provider})\nrfs: warning: network {}",
                n.describe()
            ),
            None => format!("rfs: sandbox {sandbox_id} ({provider})"),
        },
        Event::HostMount(m) => format!(
            "rfs: host folder {} at {} read-only ({} files, sha256 {}, digested in {} ms)",
            m.host_dir, m.path, m.files, m.sha256, m.digest_ms
        ),
        Event::SourcePin {
            commit,
            tree_digest,
            files,
            workdir,
            ..
        } => format!(
            "rfs: synced commit {commit} (tree {tree_digest}, {} verified) to {workdir}",
            rfs_evidence::plural::count(*files, "file", "files")
        ),
        Event::SourceResync(rfs_evidence::events::SourceResynced {
            from_commit,
            commit,
            shipped,
            removed,
            kept_untracked,
            sync_ms,
            ..
        }) => format!(
            "rfs: re-synced {from_commit} -> {commit}: {} shipped, {removed} removed, {kept_untracked} untracked kept, verified ({sync_ms} ms)",
            rfs_evidence::plural::count(*shipped, "file", "files")
        ),
        Event::StepStart { .. }
        | Event::StepAttempt { .. }
        | Event::StepProviderError { .. }
        | Event::StepEnd { .. }
        | Event::StepRefused { .. } => return step_line(event),
        Event::CleanupVerified {
            sandbox_id,
            elapsed_ms,
            saw_present_before: true,
            ..
        } => format!("rfs: sandbox {sandbox_id} destroyed, verified gone in {elapsed_ms} ms"),
        Event::CleanupVerified {
            sandbox_id,
            elapsed_ms,
            ..
        } => format!(
            "rfs: sandbox {sandbox_id} was already gone (ended outside rfs; not destroyed by rfs), verified gone in {elapsed_ms} ms"
        ),
        Event::SandboxLost {
            sandbox_id, how, ..
        } => format!("rfs: sandbox {sandbox_id} {how}"),
        Event::ArtifactAbsent(a) if a.optional => format!(
            "rfs: `{}` is absent: nothing collected (optional; the run goes on)",
            a.path
        ),
        Event::ArtifactAbsent(a) if a.step.is_some() => format!(
            "rfs: step `{}` FAILED: it wrote no `{}`, which collect() takes",
            a.step.as_deref().unwrap_or_default(),
            a.path
        ),
        Event::CleanupKept { sandbox_id, reason } => {
            format!("rfs: sandbox {sandbox_id} kept ({reason})")
        }
        _ => return None,
    };
    Some(line)
}

/// The line that says how a step goes, if `event` has one.
fn step_line(event: &Event) -> Option<String> {
    let line = match event {
        Event::StepStart {
            name, cwd_remote, ..
        } => format!(
            "rfs: step `{}` in {}",
            text::inline(name),
            text::inline(cwd_remote)
        ),
        Event::StepAttempt {
            name,
            attempt,
            exit,
            ..
        } if *exit != Some(0) => {
            format!(
                "rfs: step `{}` attempt {attempt} ended with {}",
                text::inline(name),
                rfs_evidence::exit_code::ExitText(*exit)
            )
        }
        Event::StepProviderError {
            name,
            attempt,
            error,
            ..
        } => format!(
            "rfs: step `{}` attempt {attempt}: provider error: {error}",
            text::inline(name)
        ),
        Event::StepEnd {
            name, ok, summary, ..
        } => format!(
            "rfs: step `{}` {} ({})",
            text::inline(name),
            if *ok { "ok" } else { "FAILED" },
            text::inline(summary)
        ),
        // The refusal itself is the run's error, said once at the end
        // with the script line that asked for it.
        Event::StepRefused { name, .. } => {
            format!("rfs: step `{}` REFUSED", text::inline(name))
        }
        _ => return None,
    };
    Some(line)
}

/// What a resolved source warns of: a shipped working tree (not
/// reproducible), or uncommitted paths left out of the committed tree.
fn source_warning(event: &Event) -> Option<String> {
    match event {
        Event::SourceResolved {
            working_tree: Some(w),
            ..
        } => Some(format!("rfs: warning: {}", w.describe())),
        Event::SourceResolved {
            commit,
            dirty_paths_not_shipped: dirty,
            ..
        } if !dirty.is_empty() => Some(format!(
            "rfs: warning: allow_dirty: {} uncommitted/untracked path(s) are NOT shipped; the committed tree {commit} is",
            dirty.len()
        )),
        _ => None,
    }
}
