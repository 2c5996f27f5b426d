//! The suite's setup as `index.md` and `index.html` show it: the setup
//! run (its bundle in `_setup/`), the checkpoint the proofs started
//! from, and its removal at the end; or why no proof ran.

use std::fmt::Write as _;

use super::setup::{SetupResult, FOLDER};

/// `index.md`'s setup paragraph (empty without a setup).
pub(super) fn markdown(setup: Option<&SetupResult>) -> String {
    use rfs_evidence::journal::inert_markdown::{code, esc};
    let Some(r) = setup else {
        return String::new();
    };
    let evidence = if r.out_dir.is_empty() {
        "no bundle (refused before it ran)".to_owned()
    } else {
        format!("[EVIDENCE.md]({FOLDER}/EVIDENCE.md)")
    };
    let mut s = format!(
        "Setup {}: run {}, {} in {:.2} s, {evidence}.",
        code(&r.script),
        code(&r.run_id),
        if r.passed() { "passed" } else { "**FAILED**" },
        r.duration_ms as f64 / 1000.0
    );
    match &r.checkpoint {
        Some(c) if r.passed() => {
            let _ = write!(
                s,
                " Every proof started from a fork of its checkpoint {}.",
                code(c)
            );
        }
        _ => {
            let _ = write!(s, " No proof ran: {}.", esc(&r.not_run_reason()));
        }
    }
    for rm in &r.removed {
        let _ = write!(
            s,
            " Checkpoint {} {}: {}.",
            code(&rm.checkpoint_id),
            if rm.verified {
                "removed, verified gone"
            } else {
                "NOT verified removed"
            },
            esc(&rm.detail)
        );
    }
    s + "\n\n"
}

/// `index.html`'s setup section (nothing without a setup).
pub(super) fn html(s: &mut String, setup: Option<&SetupResult>) {
    use rfs_evidence::report::html_text::h_inline as h;
    let Some(r) = setup else { return };
    let (class, word) = if r.passed() {
        ("ok", "passed")
    } else {
        ("bad", "failed")
    };
    let _ = writeln!(
        s,
        "<section id=\"setup\">\n<h2>Setup <code>{}</code> <span class=\"badge {class}\">{word}</span></h2>",
        h(&r.script)
    );
    let link = if r.out_dir.is_empty() {
        String::new()
    } else {
        format!(" (<a href=\"{FOLDER}/report.html\">report</a>, <a href=\"{FOLDER}/EVIDENCE.md\">EVIDENCE.md</a>)")
    };
    let _ = writeln!(
        s,
        "<p>Run <code id=\"setup-run\">{}</code>, exit {}, {:.2} s{link}.</p>",
        h(&r.run_id),
        r.exit_code,
        r.duration_ms as f64 / 1000.0
    );
    match &r.checkpoint {
        Some(c) if r.passed() => {
            let _ = writeln!(
                s,
                "<p>Every proof started from a fork of checkpoint <code id=\"setup-checkpoint\">{}</code>.</p>",
                h(c)
            );
        }
        _ => {
            let _ = writeln!(s, "<p id=\"setup-failed\">{}</p>", h(&r.not_run_reason()));
        }
    }
    for rm in &r.removed {
        let _ = writeln!(
            s,
            "<p>Checkpoint <code>{}</code> {}: {}</p>",
            h(&rm.checkpoint_id),
            if rm.verified {
                "removed, verified gone"
            } else {
                "NOT verified removed"
            },
            h(&rm.detail)
        );
    }
    s.push_str("</section>\n");
}
