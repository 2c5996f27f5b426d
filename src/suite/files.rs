//! What a suite leaves in its folder, besides one bundle per proof:
//! `suite.jsonl` (every event, written as it happens, so a suite that
//! dies still leaves what it did), and at the end `index.json` (the
//! results, for tools), `index.md` (for people: each proof with its
//! verdict and its `EVIDENCE.md`), `index.html` (the same in a browser,
//! with what failed first: see [`super::page`]) and, with `--junit`, JUnit XML with a
//! test suite per proof and a case per step.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::events::{summary_text, ProofResult, SuiteEvent, SuiteReporter, Verdict};
use super::index::Index;
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

pub(crate) const EVENTS: &str = "suite.jsonl";
pub(crate) const INDEX_JSON: &str = "index.json";
pub(crate) const INDEX_MD: &str = "index.md";
/// The suite's page (see [`super::page`]).
pub(crate) const INDEX_HTML: &str = "index.html";

/// The files consumer.
pub(crate) struct Files {
    dir: PathBuf,
    junit: Option<PathBuf>,
    events: Mutex<Option<std::fs::File>>,
    index: Mutex<Index>,
    /// What could not be written (the suite then fails).
    pub(crate) errors: Mutex<Vec<String>>,
}

impl Files {
    /// Create the suite's folder and its event log.
    pub(crate) fn create(dir: &Path, junit: Option<PathBuf>) -> std::io::Result<Files> {
        std::fs::create_dir_all(dir)?;
        let events = std::fs::OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(dir.join(EVENTS))?;
        Ok(Files {
            dir: dir.to_path_buf(),
            junit,
            events: Mutex::new(Some(events)),
            index: Mutex::default(),
            errors: Mutex::default(),
        })
    }

    fn failed(&self, what: &str, e: impl std::fmt::Display) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("cannot write {what}: {e}"));
    }

    fn finish(&self, ix: &Index) {
        let json = serde_json::to_string_pretty(ix).unwrap_or_default();
        if let Err(e) = std::fs::write(self.dir.join(INDEX_JSON), json + "\n") {
            self.failed(INDEX_JSON, e);
        }
        if let Err(e) = std::fs::write(self.dir.join(INDEX_MD), markdown(ix)) {
            self.failed(INDEX_MD, e);
        }
        let html = super::page::page(ix, &self.dir);
        if let Err(e) = std::fs::write(self.dir.join(INDEX_HTML), html) {
            self.failed(INDEX_HTML, e);
        }
        if let Some(path) = &self.junit {
            if let Err(e) = std::fs::write(path, junit(ix)) {
                self.failed(&path.display().to_string(), e);
            }
        }
    }
}

impl SuiteReporter for Files {
    fn event(&self, event: &SuiteEvent) {
        if let Some(f) = self
            .events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_mut()
        {
            let line = serde_json::to_string(event).unwrap_or_default();
            if let Err(e) = writeln!(f, "{line}").and_then(|_| f.flush()) {
                self.failed(EVENTS, e);
            }
        }
        let mut ix = self.index.lock().unwrap_or_else(|p| p.into_inner());
        match event {
            SuiteEvent::Start {
                suite_id,
                provider,
                jobs,
                ..
            } => {
                ix.suite_id = suite_id.clone();
                ix.provider = provider.clone();
                ix.jobs = *jobs;
                ix.rfs_version = env!("CARGO_PKG_VERSION");
            }
            SuiteEvent::ProofEnd(r) => ix.proofs.push(r.clone()),
            SuiteEvent::ProofNotRun { name, .. } => ix.not_run.push(name.clone()),
            SuiteEvent::End {
                counts,
                exit_code,
                duration_ms,
                stopped,
            } => {
                ix.counts = *counts;
                ix.exit_code = *exit_code;
                ix.duration_ms = *duration_ms;
                ix.stopped = stopped.clone();
                ix.proofs.sort_by(|a, b| a.name.cmp(&b.name));
                ix.not_reproducible = ix
                    .proofs
                    .iter()
                    .filter(|p| p.attempts.iter().any(|a| a.not_reproducible))
                    .map(|p| p.name.clone())
                    .collect();
                ix.reproducible = ix.not_reproducible.is_empty();
                ix.totals = super::totals::Totals::of(&ix.proofs);
                self.finish(&ix);
            }
            SuiteEvent::SetupEnd(r) => ix.setup = Some(r.clone()),
            SuiteEvent::CheckpointRemoved(r) => {
                if let Some(s) = ix.setup.as_mut() {
                    s.removed.push(r.clone());
                }
            }
            SuiteEvent::ProofStart { .. } | SuiteEvent::ProofRetry { .. } => {}
        }
    }
}

fn markdown(ix: &Index) -> String {
    use rfs_evidence::journal::inert_markdown::{code, esc};
    let warning = if ix.not_reproducible.is_empty() {
        String::new()
    } else {
        format!(
            "> **NOT REPRODUCIBLE**: {} shipped the working tree as it was (`--allow-dirty`), not a commit, or used a cache kept between runs (its own or its setup's); each one's `EVIDENCE.md` says which.\n\n",
            ix.not_reproducible
                .iter()
                .map(|n| code(n))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    let mut s = format!(
        "# rfs test {}\n\n{warning}{}{}\n\nProvider {}, {} at a time, {:.1} s, exit {}.{}\n{}\n| proof | verdict | attempts | time | evidence |\n|---|---|---|---|---|\n",
        esc(&ix.suite_id),
        super::setup_view::markdown(ix.setup.as_ref()),
        summary_text(&ix.counts),
        code(&ix.provider),
        ix.jobs,
        ix.duration_ms as f64 / 1000.0,
        ix.exit_code,
        ix.stopped
            .as_deref()
            .map(|s| format!(" Stopped early: {}.", esc(s)))
            .unwrap_or_default(),
        totals_markdown(&ix.totals)
    );
    for p in &ix.proofs {
        let evidence = p
            .last()
            .filter(|a| !a.out_dir.is_empty())
            .and_then(|a| Path::new(&a.out_dir).file_name())
            .map(|f| format!("[EVIDENCE.md]({}/EVIDENCE.md)", f.to_string_lossy()))
            .unwrap_or_else(|| "none (refused before it ran)".into());
        s.push_str(&format!(
            "| {} | {} | {} | {:.2} s | {} |\n",
            code(&p.name),
            p.verdict.word(),
            p.attempts.len(),
            p.duration_ms as f64 / 1000.0,
            evidence
        ));
    }
    for n in &ix.not_run {
        s.push_str(&format!("| {} | NOT RUN | 0 | | |\n", code(n)));
    }
    s
}

/// The commit, the project's tests and the network, one line each.
fn totals_markdown(t: &super::totals::Totals) -> String {
    use rfs_evidence::journal::inert_markdown::esc;
    let mut s = String::new();
    for (what, text) in [
        ("Commit", t.commit_text()),
        ("Project tests (JUnit, every proof)", t.tests_text()),
        ("Network", t.network_text()),
    ] {
        if let Some(text) = text {
            if s.is_empty() {
                s.push('\n');
            }
            s.push_str(&format!("- {what}: {}\n", esc(&text)));
        }
    }
    s
}

/// JUnit XML: a test suite per proof (its steps and assertions as cases,
/// from its bundle), or one failing case where no bundle says more.
fn junit(ix: &Index) -> String {
    let mut report = Report::new(format!("rfs test {}", ix.suite_id));
    for p in &ix.proofs {
        let out = p
            .last()
            .filter(|a| !a.out_dir.is_empty())
            .map(|a| Path::new(&a.out_dir));
        let bundle = out.and_then(|o| {
            rfs_evidence::report::FinishedRun::read(o)
                .ok()
                .map(|b| (o, b))
        });
        let mut collected = vec![];
        let mut suite = match bundle {
            Some((o, b)) => {
                collected = rfs_evidence::report::junit::collected_suites(o, &b, &p.name);
                rfs_evidence::report::junit::test_suite(&b, p.name.clone())
            }
            None => {
                let mut s = TestSuite::new(p.name.clone());
                s.add_test_case(proof_case(p));
                s
            }
        };
        suite.add_property(("verdict", p.verdict.word()));
        suite.add_property(("attempts", p.attempts.len().to_string().as_str()));
        report.add_test_suite(suite);
        report.add_test_suites(collected);
    }
    for n in &ix.not_run {
        let mut s = TestSuite::new(n.clone());
        s.add_test_case(TestCase::new("run", TestCaseStatus::skipped()));
        report.add_test_suite(s);
    }
    rfs_evidence::report::junit::to_xml(&report)
}

fn proof_case(p: &ProofResult) -> TestCase {
    let status = if p.verdict.passed() {
        TestCaseStatus::success()
    } else {
        let kind = match p.verdict {
            Verdict::Failed => NonSuccessKind::Failure,
            _ => NonSuccessKind::Error,
        };
        let mut s = TestCaseStatus::non_success(kind);
        let msg = p.last().and_then(|a| a.error.clone()).unwrap_or_default();
        s.set_message(rfs_evidence::journal::inert_markdown::strip_ansi(&msg));
        s
    };
    let mut c = TestCase::new("run", status);
    c.set_time(std::time::Duration::from_millis(p.duration_ms));
    c
}
