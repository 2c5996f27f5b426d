//! JUnit XML a project's tests wrote (`collect(path, #{ junit: true })`):
//! read, bounded, into test cases that rfs's own JUnit (`rfs run
//! --junit`, `rfs test --junit`) carries on, each under a test suite named
//! after the proof and the file's suite, with failures, errors and skips
//! and their messages kept. The file read is the copy in the bundle's
//! `artifacts/` (sha256 journaled, checked by `rfs verify`), so the merge
//! is a view of the bundle like the rest of rfs's JUnit.
//!
//! Accepted: `<testsuites>` holding `<testsuite>`s, or one `<testsuite>`,
//! holding `<testcase>`s (nested suites are flattened); a case's
//! `<failure>`, `<error>`, `<skipped>` (their `message`, `type` and
//! text), `<system-out>`, `<system-err>`. Anything else is skipped.

use std::time::Duration;

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};
use quick_xml::events::{BytesStart, Event as Xml};
use quick_xml::Reader;

use crate::events::JunitCounts;

/// The largest JUnit file rfs reads.
pub const MAX_BYTES: usize = 16 << 20;
/// The most test cases rfs reads from one file.
pub const MAX_CASES: usize = 100_000;
/// The most bytes of one message, output or failure text kept.
const MAX_TEXT: usize = 64 << 10;

/// How a case ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CaseOutcome {
    Passed,
    Failure(Detail),
    Error(Detail),
    Skipped(Detail),
}

/// A failure's, error's or skip's words.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Detail {
    pub message: Option<String>,
    pub kind: Option<String>,
    pub text: String,
}

/// One test case of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    pub name: String,
    pub classname: Option<String>,
    pub time: Option<f64>,
    pub outcome: CaseOutcome,
    pub system_out: String,
    pub system_err: String,
}

/// One test suite of the file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Suite {
    pub name: String,
    pub cases: Vec<Case>,
}

/// Why a file is not JUnit rfs can read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum JunitError {
    #[error("it is {0} bytes, more than the {MAX_BYTES} rfs reads")]
    TooLarge(usize),
    #[error("it holds more than {MAX_CASES} test cases")]
    TooManyCases,
    #[error("it is not well-formed XML: {0}")]
    Xml(String),
    #[error("its root element is <{0}>, not <testsuites> or <testsuite>")]
    NotJunit(String),
    #[error("it has no root element")]
    Empty,
}

/// The suites of a JUnit file.
pub fn parse(bytes: &[u8]) -> Result<Vec<Suite>, JunitError> {
    if bytes.len() > MAX_BYTES {
        return Err(JunitError::TooLarge(bytes.len()));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| JunitError::Xml(e.to_string()))?;
    let mut r = Reader::from_str(text);
    let mut p = Parser::default();
    loop {
        let ev = r
            .read_event()
            .map_err(|e| JunitError::Xml(format!("{e} (at byte {})", r.error_position())))?;
        match ev {
            Xml::Eof => break,
            Xml::Start(e) => p.open(&e, false)?,
            Xml::Empty(e) => p.open(&e, true)?,
            Xml::End(_) => p.close(),
            Xml::Text(t) => p.text(&t.xml10_content().map_err(xml_err)?),
            Xml::CData(t) => p.text(&t.decode().map_err(xml_err)?),
            Xml::GeneralRef(g) => {
                let s = match g.resolve_char_ref().map_err(xml_err)? {
                    Some(c) => c.to_string(),
                    None => {
                        let name = g.decode().map_err(xml_err)?;
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .ok_or_else(|| JunitError::Xml(format!("unknown entity &{name};")))?
                            .to_owned()
                    }
                };
                p.text(&s);
            }
            _ => {}
        }
    }
    if !p.stack.is_empty() {
        return Err(JunitError::Xml(format!(
            "<{}> is never closed",
            p.stack[p.stack.len() - 1]
        )));
    }
    if !p.rooted {
        return Err(JunitError::Empty);
    }
    Ok(p.suites)
}

fn xml_err(e: impl std::fmt::Display) -> JunitError {
    JunitError::Xml(e.to_string())
}

/// Where the reader is.
#[derive(Default)]
struct Parser {
    stack: Vec<String>,
    rooted: bool,
    suites: Vec<Suite>,
    /// The suite names open, outermost first.
    suite_names: Vec<String>,
    case: Option<Case>,
    cases: usize,
}

fn attr(e: &BytesStart, key: &str) -> Option<String> {
    e.try_get_attribute(key)
        .ok()
        .flatten()
        .and_then(|a| a.normalized_value(quick_xml::XmlVersion::Implicit1_0).ok())
        .map(|v| bounded(v.into_owned()))
}

fn bounded(mut s: String) -> String {
    if s.len() > MAX_TEXT {
        let cut = (0..=MAX_TEXT)
            .rev()
            .find(|&i| s.is_char_boundary(i))
            .unwrap_or(0);
        s.truncate(cut);
        s.push_str(" [rfs: cut]");
    }
    s
}

impl Parser {
    fn open(&mut self, e: &BytesStart, empty: bool) -> Result<(), JunitError> {
        let tag = String::from_utf8_lossy(e.local_name().as_ref()).into_owned();
        if !self.rooted {
            if tag != "testsuites" && tag != "testsuite" {
                return Err(JunitError::NotJunit(tag));
            }
            self.rooted = true;
        }
        match tag.as_str() {
            "testsuite" => {
                let name = attr(e, "name").unwrap_or_default();
                self.suite_names.push(name);
                if empty {
                    self.suite_names.pop();
                }
            }
            "testcase" if self.case.is_none() => {
                self.cases += 1;
                if self.cases > MAX_CASES {
                    return Err(JunitError::TooManyCases);
                }
                self.case = Some(Case {
                    name: attr(e, "name").unwrap_or_default(),
                    classname: attr(e, "classname"),
                    time: attr(e, "time").and_then(|t| t.trim().parse::<f64>().ok()),
                    outcome: CaseOutcome::Passed,
                    system_out: String::new(),
                    system_err: String::new(),
                });
                if empty {
                    self.end_case();
                }
            }
            "failure" | "error" | "skipped" => {
                if let Some(c) = self.case.as_mut() {
                    let d = Detail {
                        message: attr(e, "message"),
                        kind: attr(e, "type"),
                        text: String::new(),
                    };
                    // The first failure or error wins over a skip.
                    let keep = matches!(c.outcome, CaseOutcome::Passed | CaseOutcome::Skipped(_));
                    if keep {
                        c.outcome = match tag.as_str() {
                            "failure" => CaseOutcome::Failure(d),
                            "error" => CaseOutcome::Error(d),
                            _ => CaseOutcome::Skipped(d),
                        };
                    }
                }
            }
            _ => {}
        }
        if !empty {
            self.stack.push(tag);
        }
        Ok(())
    }

    fn close(&mut self) {
        match self.stack.pop().as_deref() {
            Some("testcase") => self.end_case(),
            Some("testsuite") => {
                self.suite_names.pop();
            }
            _ => {}
        }
    }

    fn end_case(&mut self) {
        let Some(c) = self.case.take() else { return };
        let name = self
            .suite_names
            .iter()
            .filter(|n| !n.is_empty())
            .cloned()
            .collect::<Vec<_>>()
            .join(" / ");
        match self.suites.iter_mut().find(|s| s.name == name) {
            Some(s) => s.cases.push(c),
            None => self.suites.push(Suite {
                name,
                cases: vec![c],
            }),
        }
    }

    fn text(&mut self, t: &str) {
        let Some(c) = self.case.as_mut() else { return };
        let into = match self.stack.last().map(String::as_str) {
            Some("system-out") => &mut c.system_out,
            Some("system-err") => &mut c.system_err,
            Some("failure" | "error" | "skipped") => match &mut c.outcome {
                CaseOutcome::Failure(d) | CaseOutcome::Error(d) | CaseOutcome::Skipped(d) => {
                    &mut d.text
                }
                CaseOutcome::Passed => return,
            },
            _ => return,
        };
        if into.len() < MAX_TEXT {
            into.push_str(t);
            *into = bounded(std::mem::take(into));
        }
    }
}

/// Counts over `suites`, as the journal carries them.
pub fn counts(suites: &[Suite]) -> JunitCounts {
    let mut n = JunitCounts::default();
    for c in suites.iter().flat_map(|s| &s.cases) {
        n.tests += 1;
        match c.outcome {
            CaseOutcome::Passed => {}
            CaseOutcome::Failure(_) => n.failures += 1,
            CaseOutcome::Error(_) => n.errors += 1,
            CaseOutcome::Skipped(_) => n.skipped += 1,
        }
    }
    n
}

/// `suites` as rfs's JUnit carries them: each named `<proof> / <file's
/// suite>` (`<proof> / <path>` when the file names none).
pub fn test_suites(proof: &str, path: &str, suites: &[Suite]) -> Vec<TestSuite> {
    suites
        .iter()
        .map(|s| {
            let inner = if s.name.is_empty() { path } else { &s.name };
            let mut suite = TestSuite::new(format!("{proof} / {inner}"));
            suite.add_property(("collected_from", path));
            for c in &s.cases {
                suite.add_test_case(test_case(c));
            }
            suite
        })
        .collect()
}

fn test_case(c: &Case) -> TestCase {
    let status = match &c.outcome {
        CaseOutcome::Passed => TestCaseStatus::success(),
        CaseOutcome::Skipped(d) => {
            let mut s = TestCaseStatus::skipped();
            if let Some(m) = &d.message {
                s.set_message(m.as_str());
            }
            if let Some(k) = &d.kind {
                s.set_type(k.as_str());
            }
            if !d.text.trim().is_empty() {
                s.set_description(d.text.as_str());
            }
            s
        }
        CaseOutcome::Failure(d) | CaseOutcome::Error(d) => {
            let kind = match &c.outcome {
                CaseOutcome::Failure(_) => NonSuccessKind::Failure,
                _ => NonSuccessKind::Error,
            };
            let mut s = TestCaseStatus::non_success(kind);
            if let Some(m) = &d.message {
                s.set_message(m.as_str());
            }
            if let Some(k) = &d.kind {
                s.set_type(k.as_str());
            }
            if !d.text.trim().is_empty() {
                s.set_description(d.text.as_str());
            }
            s
        }
    };
    let mut case = TestCase::new(c.name.as_str(), status);
    if let Some(cl) = &c.classname {
        case.set_classname(cl.as_str());
    }
    if let Some(t) = c.time.filter(|t| t.is_finite() && *t >= 0.0) {
        case.set_time(Duration::from_secs_f64(t.min(1e9)));
    }
    if !c.system_out.is_empty() {
        case.set_system_out(c.system_out.as_str());
    }
    if !c.system_err.is_empty() {
        case.set_system_err(c.system_err.as_str());
    }
    case
}

#[cfg(test)]
mod tests {
    use super::*;

    const PYTEST: &str = r#"<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="0" failures="1" skipped="1" tests="3" time="0.05"><testcase classname="tests.test_a" name="test_ok" time="0.001" /><testcase classname="tests.test_a" name="test_bad" time="0.002"><failure message="assert 1 == 2">def test_bad():
&gt;       assert 1 == 2
E       assert 1 == 2</failure></testcase><testcase classname="tests.test_a" name="test_skip" time="0"><skipped type="pytest.skip" message="not here">skip reason</skipped></testcase></testsuite></testsuites>"#;

    #[test]
    fn a_pytest_report_gives_its_cases_with_the_failure_text() {
        let s = parse(PYTEST.as_bytes()).unwrap();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "pytest");
        assert_eq!(s[0].cases.len(), 3);
        let CaseOutcome::Failure(d) = &s[0].cases[1].outcome else {
            panic!("{:?}", s[0].cases[1])
        };
        assert_eq!(d.message.as_deref(), Some("assert 1 == 2"));
        assert!(d.text.contains(">       assert 1 == 2"), "{}", d.text);
        assert_eq!(
            counts(&s),
            JunitCounts {
                tests: 3,
                failures: 1,
                errors: 0,
                skipped: 1
            }
        );
        let mut r = quick_junit::Report::new("x");
        r.add_test_suites(test_suites("proof", "report.xml", &s));
        let x = r.to_string().unwrap();
        assert!(x.contains("name=\"proof / pytest\""), "{x}");
        assert!(x.contains("<failure message=\"assert 1 == 2\""), "{x}");
        assert!(x.contains("<skipped message=\"not here\""), "{x}");
    }

    #[test]
    fn malformed_or_foreign_files_are_errors_not_panics() {
        for bad in [
            "",
            "<testsuites><testsuite>",
            "<html><body/></html>",
            "<testsuite><testcase name='a'></testsuite>",
            "not xml at all",
            "<testsuite>&bogus;</testsuite>",
        ] {
            assert!(parse(bad.as_bytes()).is_err(), "{bad:?} parsed");
        }
        assert!(parse(&[0xff, 0xfe]).is_err());
        let big = vec![b' '; MAX_BYTES + 1];
        assert_eq!(parse(&big), Err(JunitError::TooLarge(MAX_BYTES + 1)));
    }
}
