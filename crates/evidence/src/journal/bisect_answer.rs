//! What a bisect's bundle leads with (EVIDENCE.md and report.html alike):
//! the answer — the first commit where the result changes, described —
//! then, for a merge, the range to bisect inside it, then every commit
//! tested, oldest first. A pure function of the journal's summary.

use crate::events::{BisectFoundCommit, BisectResult};
use crate::journal::fold::{Bisect, RunSummary};

/// The answer, in plain text (each view escapes it its own way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// The commit found, when the search found one.
    pub commit: Option<String>,
    /// One line: what the search found.
    pub headline: String,
    /// Whether the search ended with an answer (a commit, or the
    /// candidates hiding it).
    pub found: bool,
    /// Label and value: subject, author, date, parents.
    pub details: Vec<(&'static str, String)>,
    /// For a merge: why and how to look inside it.
    pub merge: Option<Merge>,
    /// Every commit tested: commit, result, which end it is, why.
    pub rows: Vec<Row>,
    /// The range: commits from good to bad.
    pub range: String,
    /// How the ends are known: tested again (and why), or taken from the
    /// person's word (`--trust-ends`).
    pub ends: String,
    /// What the run tested, in place of a single source commit: the
    /// good end, the bad end and the commit found (label, value).
    pub tested_facts: Vec<(&'static str, String)>,
}

/// A merge found: the range to bisect inside it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Merge {
    pub why: String,
    pub rfs: String,
    pub git: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub commit: String,
    pub result: BisectResult,
    pub end: &'static str,
    pub why: String,
}

impl Answer {
    /// The answer of `r`, if it is a bisect.
    pub fn of(r: &RunSummary, script: &str) -> Option<Answer> {
        let b = r.bisect.as_ref()?;
        let (headline, found) = headline(b);
        let found_commit = b.found.as_ref().filter(|_| b.first_changed.is_some());
        let details = found_commit.map(details).unwrap_or_default();
        let merge = found_commit.and_then(|f| merge(f, script));
        Some(Answer {
            commit: b.first_changed.clone(),
            headline,
            found,
            details,
            merge,
            rows: rows(b),
            range: format!(
                "{} commits after {} (good) up to {} (bad)",
                b.commits, b.good, b.bad
            ),
            ends: ends_note(b),
            tested_facts: tested_facts(b),
        })
    }
}

/// Whether the ends were tested again, and why that matters.
fn ends_note(b: &Bisect) -> String {
    if b.ends_trusted {
        format!(
            "Ends not re-tested, taken from the person's word (--trust-ends): {} passes (good) and {} fails (bad). If an end does not behave as claimed, this answer is meaningless.",
            b.good, b.bad
        )
    } else {
        "Both ends were tested again before the search: an end that does not behave as claimed (a good that fails, a bad that passes) makes the bisect meaningless. --trust-ends skips this, taking the ends from the person's word.".to_owned()
    }
}

/// The commits the run is about, each with how it is known: the two
/// ends (tested, or the person's word) and the commit found.
fn tested_facts(b: &Bisect) -> Vec<(&'static str, String)> {
    let result = |c: &str, claimed: &str| {
        if b.ends_trusted {
            return format!("{c} ({claimed}: not re-tested, the person's word)");
        }
        let r = b
            .results
            .iter()
            .find(|t| t.commit == c)
            .map(|t| t.result)
            .or_else(|| b.tested.iter().find(|t| t.0 == c).map(|t| t.1));
        match r {
            Some(r) => format!("{c} ({}, tested)", r.as_str()),
            None => format!("{c} (not yet tested)"),
        }
    };
    let mut f = vec![
        ("good end", result(&b.good, "passes")),
        ("bad end", result(&b.bad, "fails")),
    ];
    match (&b.first_changed, b.candidates.len()) {
        (Some(c), _) => f.push(("first changed commit", c.clone())),
        (None, n) if n > 1 => f.push((
            "first changed commit",
            format!("one of {n} (skipped commits hide it)"),
        )),
        _ => f.push(("first changed commit", "none found".to_owned())),
    }
    f
}

fn headline(b: &Bisect) -> (String, bool) {
    match (&b.first_changed, b.ended, b.ends) {
        (Some(c), _, ends) => {
            let phrase = answer_phrase(ends.map(|e| e.0), ends.map(|e| e.1));
            let subject = b
                .found
                .as_ref()
                .map(|f| format!(": {}", f.subject))
                .unwrap_or_default();
            (format!("{c} is {phrase}{subject}"), true)
        }
        (None, true, _) if !b.candidates.is_empty() => (
            format!(
                "Skipped commits hide the change: the first changed commit is one of {}",
                b.candidates.join(", ")
            ),
            true,
        ),
        (None, true, Some((g, bad))) if g == BisectResult::Skipped || bad == BisectResult::Skipped => (
            "No answer: the proof cannot be tested at an end of the range".into(),
            false,
        ),
        (None, true, Some((g, _))) => (
            format!(
                "No change: the proof {} at both ends, so no commit in the range changes its result",
                g.as_str()
            ),
            false,
        ),
        (None, true, None) => ("No change found in the range".into(), false),
        (None, false, _) => (
            "Did not finish: this lane's part of the search is incomplete".into(),
            false,
        ),
    }
}

fn details(f: &BisectFoundCommit) -> Vec<(&'static str, String)> {
    let mut d = vec![
        ("subject", f.subject.clone()),
        ("author", f.author.clone()),
        ("date", f.date.clone()),
    ];
    if f.parents.len() > 1 {
        d.push(("parents", f.parents.join(" ")));
    }
    d
}

/// The range to bisect inside a merge `f` (`None`: not a merge).
pub fn merge(f: &BisectFoundCommit, script: &str) -> Option<Merge> {
    let [_, merged, ..] = f.parents.as_slice() else {
        return None;
    };
    let base = f.merge_base.as_deref()?;
    Some(Merge {
        why: format!(
            "This is a merge: the result changed with the history it merged (its parent {merged}), \
             not on the first-parent path. To look inside it, bisect that history:"
        ),
        rfs: format!("rfs bisect {base} {merged} {script}"),
        git: format!("git bisect start {merged} {base}"),
    })
}

/// Every commit with a result, oldest first (all lanes', from the end of
/// the search); before the end, this lane's in the order tested.
fn rows(b: &Bisect) -> Vec<Row> {
    let why = |c: &str| {
        b.tested
            .iter()
            .rev()
            .find(|(t, _, _)| t == c)
            .and_then(|(_, _, w)| w.as_deref())
            .map(|w| w.lines().next().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    let end = |c: &str| match c {
        c if c == b.good => "good",
        c if c == b.bad => "bad",
        _ => "",
    };
    if b.results.is_empty() {
        return b
            .tested
            .iter()
            .map(|(c, r, _)| Row {
                commit: c.clone(),
                result: *r,
                end: end(c),
                why: why(c),
            })
            .collect();
    }
    b.results
        .iter()
        .map(|t| Row {
            commit: t.commit.clone(),
            result: t.result,
            end: end(&t.commit),
            why: why(&t.commit),
        })
        .collect()
}
/// How the answer is named: `git bisect`'s "the first bad commit" when
/// the proof passes at good and fails at bad, else (finding a fix) the
/// first commit where it passes.
pub fn answer_phrase(good: Option<BisectResult>, bad: Option<BisectResult>) -> &'static str {
    match (good, bad) {
        (Some(BisectResult::Passed), Some(BisectResult::Failed)) => "the first bad commit",
        _ => "the first commit where the proof passes",
    }
}
