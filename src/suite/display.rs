//! The suite for a person, in the style of cargo-nextest: one line per
//! finished proof, a progress bar with counts while proofs run (on a
//! terminal only), then each failure with its error and its last output
//! lines, and one summary line. Everything goes to stderr.

use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::events::{
    plural, summary_text, Counts, ProofResult, SuiteEvent, SuiteReporter, Verdict,
};
use super::files::{INDEX_HTML, INDEX_MD};
use crate::reporter::text;

/// The console view; `bar` only on a terminal.
pub(crate) struct Console {
    bar: Option<ProgressBar>,
    color: bool,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    running: Vec<String>,
    counts: Counts,
    not_passed: Vec<ProofResult>,
    out_dir: String,
}

impl Console {
    pub(crate) fn new(terminal: bool, color: bool) -> Console {
        let bar = terminal.then(|| {
            let b = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            b.set_style(
                ProgressStyle::with_template(
                    "{prefix:>9} [{elapsed_precise}] {bar:25} {pos}/{len}: {msg}",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b.set_prefix("Running");
            b.enable_steady_tick(Duration::from_millis(200));
            b
        });
        Console {
            bar,
            color,
            state: Mutex::default(),
        }
    }

    fn line(&self, text: &str) {
        let print = || {
            let _ = writeln!(std::io::stderr().lock(), "{text}");
        };
        match &self.bar {
            Some(b) => b.suspend(print),
            None => print(),
        }
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }

    fn verdict_word(&self, v: Verdict) -> String {
        let code = match v {
            Verdict::Passed => "1;32",
            Verdict::Flaky => "1;33",
            Verdict::Interrupted => "1;33",
            _ => "1;31",
        };
        self.paint(code, &format!("{:>9}", v.word()))
    }

    fn refresh(&self, st: &State) {
        if let Some(b) = &self.bar {
            let c = &st.counts;
            let mut msg = format!("{} running", st.running.len());
            for (n, what) in [
                (c.failed, "failed"),
                (c.refused, "refused"),
                (c.error, "errors"),
                (c.flaky, "flaky"),
            ] {
                if n > 0 {
                    msg.push_str(&format!(", {n} {what}"));
                }
            }
            if let Some(first) = st.running.first() {
                msg.push_str(&format!(": {}", text::inline(first)));
            }
            b.set_message(msg);
            b.set_position(c.finished() as u64);
        }
    }

    /// A proof ended: its line, and it is kept when it did not pass.
    fn proof_end(&self, st: &mut State, r: &super::events::ProofResult) {
        st.running.retain(|n| n != &r.name);
        st.counts.add(r.verdict);
        let mut text = format!(
            "{} [{:>8.3}s] {}",
            self.verdict_word(r.verdict),
            r.duration_ms as f64 / 1000.0,
            text::inline(&r.name)
        );
        if !r.verdict.passed() {
            text.push_str(&format!("  exit {}", r.exit_code));
        }
        if r.attempts.len() > 1 {
            text.push_str(&format!("  ({} attempts)", r.attempts.len()));
        }
        self.line(&text);
        if !r.verdict.passed() {
            st.not_passed.push(r.clone());
        }
    }

    /// The setup ran: its line, with its checkpoint or why no proof runs.
    fn setup_end(&self, r: &super::setup::SetupResult) {
        let word = if r.passed() { "Setup" } else { "SETUP FAIL" };
        let colour = if r.passed() { "1;32" } else { "1;31" };
        let what = match &r.checkpoint {
            Some(c) if r.passed() => format!("checkpoint {c}; every proof forks it"),
            _ => r.not_run_reason(),
        };
        self.line(&format!(
            "{} [{:>8.3}s] {}  {}",
            self.paint(colour, &format!("{word:>9}")),
            r.duration_ms as f64 / 1000.0,
            text::inline(&r.script),
            text::inline(&what)
        ));
        if !r.output_tail.is_empty() {
            self.line(&format!("  last {} lines of output:", r.output_tail.len()));
            for l in &r.output_tail {
                self.line(&format!("    | {}", text::inline(l)));
            }
        }
    }

    /// A checkpoint of the suite was removed (or not verified so).
    fn checkpoint_removed(&self, r: &rfs_evidence::events::checkpoint_facts::CheckpointRemoved) {
        let what = if r.verified {
            "removed, verified gone"
        } else {
            "NOT verified removed"
        };
        self.line(&format!(
            "{} checkpoint {}: {what} ({})",
            self.paint("1", &format!("{:>9}", "Cleanup")),
            text::inline(&r.checkpoint_id),
            text::inline(&r.detail)
        ));
    }

    /// The suite ended: what did not pass, the summary and its files.
    fn end(
        &self,
        st: &State,
        counts: &super::events::Counts,
        duration_ms: u64,
        stopped: Option<&str>,
    ) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        self.failures(st);
        if let Some(s) = stopped {
            self.line(&format!("  stopped early: {}", text::inline(s)));
        }
        self.line(&format!(
            "{} [{:>8.3}s] {}",
            self.paint("1", &format!("{:>9}", "Summary")),
            duration_ms as f64 / 1000.0,
            summary_text(counts)
        ));
        self.line(&format!(
            "          index: {}/{}",
            text::inline(&st.out_dir),
            INDEX_MD
        ));
        self.line(&format!(
            "           page: {}/{}",
            text::inline(&st.out_dir),
            INDEX_HTML
        ));
    }

    fn failures(&self, st: &State) {
        if st.not_passed.is_empty() {
            return;
        }
        self.line("");
        for r in &st.not_passed {
            let bundle = r.last().map(|a| a.out_dir.as_str()).unwrap_or("");
            self.line(&format!(
                "{} {}{}",
                self.paint("1;31", &format!("--- {}", r.verdict.word())),
                text::inline(&r.name),
                if bundle.is_empty() {
                    String::new()
                } else {
                    format!("  (bundle {})", text::inline(bundle))
                }
            ));
            if let Some(e) = r.last().and_then(|a| a.error.as_deref()) {
                // The name is the file's: a line end in it is shown, not
                // taken as the start of another line of the error.
                let e = e.trim_end().replace(&r.name, &text::inline(&r.name));
                for l in text::block(&e).lines() {
                    self.line(&format!("    {l}"));
                }
            }
            if !r.output_tail.is_empty() {
                self.line(&format!("  last {} lines of output:", r.output_tail.len()));
                for l in &r.output_tail {
                    self.line(&format!("    | {}", text::inline(l)));
                }
            }
            if let Some(w) = r.last().and_then(|a| a.teardown_warning.as_deref()) {
                self.line(&format!("  warning: {}", text::inline(w)));
            }
        }
    }
}

impl SuiteReporter for Console {
    fn event(&self, event: &SuiteEvent) {
        let mut st = self.state.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            SuiteEvent::Start {
                out_dir,
                provider,
                jobs,
                proofs,
                ..
            } => {
                st.out_dir = out_dir.clone();
                if let Some(b) = &self.bar {
                    b.set_length(proofs.len() as u64);
                }
                self.line(&format!(
                    "{} {} {}, {} at a time on {}; bundles in {}",
                    self.paint("1;32", &format!("{:>9}", "Starting")),
                    proofs.len(),
                    plural(proofs.len(), "proof", "proofs"),
                    jobs,
                    text::inline(provider),
                    text::inline(out_dir)
                ));
            }
            SuiteEvent::ProofStart { name, .. } => st.running.push(name.clone()),
            SuiteEvent::ProofRetry {
                name,
                attempt,
                exit_code,
            } => {
                st.running.retain(|n| n != name);
                self.line(&format!(
                    "{} {} (attempt {attempt} ended with exit {exit_code}; running it again)",
                    self.paint("1;33", &format!("{:>9}", "RETRY")),
                    text::inline(name),
                ));
            }
            SuiteEvent::ProofEnd(r) => self.proof_end(&mut st, r),
            SuiteEvent::ProofNotRun { .. } => st.counts.not_run += 1,
            SuiteEvent::SetupEnd(r) => self.setup_end(r),
            SuiteEvent::CheckpointRemoved(r) => self.checkpoint_removed(r),
            SuiteEvent::End {
                counts,
                duration_ms,
                stopped,
                ..
            } => {
                return self.end(&st, counts, *duration_ms, stopped.as_deref());
            }
        }
        self.refresh(&st);
    }
}
