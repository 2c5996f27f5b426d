//! The short Markdown summary of a run: its outcome first, what failed
//! with the output that shows why, the pins and the steps' table. CI
//! step summaries (`GITHUB_STEP_SUMMARY`) and `rfs report --format
//! markdown` print it; EVIDENCE.md in the bundle has everything else.

use std::fmt::Write as _;

use super::FinishedRun;
use crate::journal::evidence;
use crate::journal::inert_markdown::code;

/// The most step rows a summary shows.
const MAX_ROWS: usize = 100;

/// The summary of `b`; `evidence` names where the bundle is (a path a
/// reader can open, or an artifact's name).
pub fn summary(b: &FinishedRun, evidence: &str) -> String {
    let r = &b.summary;
    let mut s = String::new();
    let outcome = r.outcome.map_or("running", |o| o.as_str());
    let mark = match r.outcome {
        Some(crate::outcome::RunOutcome::Completed) => "✅",
        _ => "❌",
    };
    let _ = writeln!(
        s,
        "## {mark} rfs run {}: {outcome}\n",
        code(&evidence::script_shown(r))
    );
    evidence::bisect(&mut s, r);
    evidence::facts(&mut s, r);
    evidence::failure(&mut s, r);
    // A CI summary is capped (GitHub: 1 MiB a step): the first rows, the
    // failure above, and the rest in the bundle.
    if r.steps.len() > MAX_ROWS {
        let mut first = r.clone();
        first.steps.truncate(MAX_ROWS);
        evidence::steps_table(&mut s, &first);
        let _ = writeln!(
            s,
            "\n({} more steps: EVIDENCE.md and report.html in the bundle list every one.)",
            r.steps.len() - MAX_ROWS
        );
    } else {
        evidence::steps_table(&mut s, r);
    }
    let asserts = &r.assertions;
    if !asserts.is_empty() {
        let passed = asserts.iter().filter(|a| !a.outcome.is_failure()).count();
        let _ = writeln!(
            s,
            "\nScreen assertions: {passed} of {} passed.",
            asserts.len()
        );
    }
    let _ = writeln!(
        s,
        "\nEvidence: {} (journal head {}; check it with `rfs verify`).",
        code(evidence),
        code(&b.head)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::events::catalog::samples;
    use crate::journal::fold::RunSummary;

    #[test]
    fn a_summary_of_many_steps_keeps_to_its_first_rows() {
        let mut summary = RunSummary::of(&samples());
        // Only the steps' table (the samples hold a bisect's too).
        summary.bisect = None;
        let step = summary.steps[0].clone();
        summary.steps = (0..250).map(|_| step.clone()).collect();
        let b = FinishedRun {
            summary,
            head: "h".into(),
        };
        let md = super::summary(&b, "out");
        assert_eq!(
            md.lines().filter(|l| l.starts_with("| ")).count(),
            MAX_ROWS + 1
        );
        assert!(md.contains("(150 more steps"), "{md}");
    }
}
