//! JUnit XML of a run (`--junit FILE`): one test case per step and per
//! screen assertion, so CI systems that read JUnit show rfs's proof next
//! to the project's own tests. A run that ended badly with nothing else
//! failing (a refused sync, an interrupt) adds a failing `run` case, so
//! the XML never reads green for a run that was not.

use std::path::Path;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::FinishedRun;
use crate::journal::evidence::{script_shown, step_outcome_text};
use crate::journal::fold::{ArtifactRow, RunOutcome, StepOutcome, StepRecord};

/// The XML text for `b`.
pub fn xml(b: &FinishedRun) -> String {
    let script = script_shown(&b.summary);
    let mut report = Report::new("rfs");
    report.add_test_suite(test_suite(b, format!("rfs {script}")));
    to_xml(&report)
}

/// The XML text for the bundle `b` in `out`: its own suite and, after
/// it, the test cases of every JUnit report it collected.
pub fn xml_of(out: &Path, b: &FinishedRun) -> String {
    let script = script_shown(&b.summary);
    let name = format!("rfs {script}");
    let mut report = Report::new("rfs");
    report.add_test_suite(test_suite(b, name.clone()));
    report.add_test_suites(collected_suites(out, b, &name));
    to_xml(&report)
}

/// The suites of the JUnit reports the bundle in `out` collected
/// (`collect(path, #{ junit: true })`), each named `<proof> / <its
/// suite>`, read from the bundle's copies; one that cannot be read any
/// more is a suite with one error case saying why (never green).
pub fn collected_suites(out: &Path, b: &FinishedRun, proof: &str) -> Vec<TestSuite> {
    let mut all = vec![];
    for a in &b.summary.artifacts {
        let ArtifactRow::Collected {
            path,
            files,
            junit: Some(_),
            ..
        } = a
        else {
            continue;
        };
        for f in files {
            let read =
                crate::out_dir::read_regular(out, &f.path, super::junit_in::MAX_BYTES as u64)
                    .map_err(|e| e.to_string())
                    .and_then(|bytes| super::junit_in::parse(&bytes).map_err(|e| e.to_string()));
            match read {
                Ok(suites) => all.extend(super::junit_in::test_suites(proof, path, &suites)),
                Err(why) => {
                    let mut s = TestSuite::new(format!("{proof} / {path}"));
                    let mut st = TestCaseStatus::non_success(NonSuccessKind::Error);
                    st.set_message(format!(
                        "the collected JUnit report {} cannot be read: {why}",
                        f.path
                    ));
                    s.add_test_case(TestCase::new("junit", st));
                    all.push(s);
                }
            }
        }
    }
    all
}

/// The report's XML (a comment saying why when it cannot be made).
pub fn to_xml(report: &Report) -> String {
    report
        .to_string()
        .unwrap_or_else(|e| format!("<!-- rfs: cannot serialize the JUnit report: {e} -->\n"))
}

/// `b` as one test suite named `name`: a case per step and per screen
/// assertion, and a failing `run` case when the run ended badly with
/// nothing else failing.
pub fn test_suite(b: &FinishedRun, name: String) -> TestSuite {
    let r = &b.summary;
    let mut suite = TestSuite::new(name);
    let mut any_failed = false;
    for st in &r.steps {
        let case = step_case(st);
        any_failed |= !matches!(case.status, TestCaseStatus::Success { .. });
        suite.add_test_case(case);
    }
    for a in &r.assertions {
        let status = if a.outcome.is_failure() {
            any_failed = true;
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("expected {}: {}", a.pattern, a.outcome.describe()));
            s
        } else {
            TestCaseStatus::success()
        };
        let mut case = TestCase::new(format!("assert {}: {}", a.assert, a.pattern), status);
        case.set_classname(format!("session {}", a.session));
        case.set_time(Duration::from_millis(a.elapsed_ms));
        suite.add_test_case(case);
    }
    let ended_badly = r.outcome != Some(RunOutcome::Completed);
    if ended_badly && !any_failed {
        let mut status = TestCaseStatus::non_success(NonSuccessKind::Error);
        status.set_message(format!(
            "the run ended {}: {}",
            r.outcome.map_or("running", |o| o.as_str()),
            r.reason.as_deref().unwrap_or("(no reason given)")
        ));
        let mut case = TestCase::new("run", status);
        case.set_classname("rfs");
        suite.add_test_case(case);
    }
    suite.add_property(("run_id", r.run_id.as_str()));
    if let Some(p) = r.pin() {
        suite.add_property(("source_commit", p.commit.as_str()));
        suite.add_property(("tree_digest", p.tree_digest.as_str()));
    }
    if let Some(id) = &r.sandbox_id {
        suite.add_property(("sandbox_id", id.as_str()));
    }
    network_properties(&mut suite, r);
    suite
}

/// The network policy and every connection rfs's proxy refused (a
/// refusal does not fail a step by itself: it is said here).
fn network_properties(suite: &mut TestSuite, r: &crate::journal::fold::RunSummary) {
    let n = &r.network;
    if let Some(p) = &n.policy {
        suite.add_property(("network_policy", p.describe().as_str()));
    }
    if n.policy.is_none() && n.connections.is_empty() {
        return;
    }
    let refused: Vec<_> = n.refused().collect();
    suite.add_property(("network_refused", refused.len().to_string().as_str()));
    for (i, c) in refused.iter().enumerate() {
        let step = c
            .step
            .as_deref()
            .map(|s| format!(" (step {s})"))
            .unwrap_or_default();
        suite.add_property((
            format!("network_refused_{}", i + 1).as_str(),
            format!("{}: {}{step}", c.destination(), c.rule).as_str(),
        ));
    }
}

/// A step as a test case: a failure the script allowed passes (its
/// output says so), anything else that is not a pass fails.
fn step_case(st: &StepRecord) -> TestCase {
    let status = match &st.outcome {
        StepOutcome::Passed | StepOutcome::Failed { allowed: true, .. } => {
            TestCaseStatus::success()
        }
        o => {
            let kind = match o {
                StepOutcome::Failed { .. } => NonSuccessKind::Failure,
                _ => NonSuccessKind::Error,
            };
            let mut s = TestCaseStatus::non_success(kind);
            s.set_message(step_outcome_text(o));
            s.set_description(st.command.as_str());
            s
        }
    };
    let mut case = TestCase::new(st.name.as_str(), status);
    case.set_classname("step");
    case.set_time(Duration::from_millis(st.duration_ms));
    if let Some(t) = &st.output_tail {
        let clean = |t: &str| crate::journal::inert_markdown::strip_ansi(t);
        if !t.stdout.is_empty() {
            case.set_system_out(clean(&t.stdout));
        }
        if !t.stderr.is_empty() {
            case.set_system_err(clean(&t.stderr));
        }
    }
    if let StepOutcome::Failed { allowed: true, .. } = st.outcome {
        case.add_property(("allowed_failure", "true"));
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::catalog::samples;

    #[test]
    fn every_step_and_assertion_is_a_case_and_a_failed_run_never_reads_green() {
        let s = RunSummary::of(&samples());
        let b = FinishedRun {
            summary: s,
            head: "h".into(),
        };
        let x = xml(&b);
        assert!(x.starts_with("<?xml"), "{x}");
        assert!(x.contains("<testcase name=\"build\""), "{x}");
        assert!(x.contains("classname=\"session 1\""), "{x}");
        assert!(x.contains("<failure") || x.contains("<error"), "{x}");
    }

    use crate::journal::fold::RunSummary;
}
