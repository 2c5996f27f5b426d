//! The short Markdown summary of a run: its outcome first, what failed
//! with the output that shows why, the pins and the steps' table. CI
//! step summaries (`GITHUB_STEP_SUMMARY`) and `rfs report --format
//! markdown` print it; EVIDENCE.md in the bundle has everything else.

use std::fmt::Write as _;

use super::Bundle;
use crate::journal::evidence;
use crate::journal::markdown::code;

/// The summary of `b`; `evidence` names where the bundle is (a path a
/// reader can open, or an artifact's name).
pub(crate) fn summary(b: &Bundle, evidence: &str) -> String {
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
    evidence::facts(&mut s, r);
    evidence::failure(&mut s, r);
    evidence::steps_table(&mut s, r);
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
