//! The crate's layers (issue #21, item 7): lower modules never name the
//! ones built on them, so there is no circle to untangle when a provider,
//! a view or a primitive is added. Read from the source, as a newcomer
//! would check it.

mod common;

use std::path::Path;

/// Every `crate::<module>` a file under `src/<dir>` (or the file
/// `src/<dir>.rs`) names.
fn named(dir: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![];
    let file = root.join(format!("{dir}.rs"));
    if file.exists() {
        files.push(file);
    }
    files.extend(
        common::files_under(&root.join(dir))
            .into_iter()
            .filter(|p| p.extension().is_some_and(|x| x == "rs")),
    );
    let mut out = vec![];
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("crate::") {
            let rest = &text[i + "crate::".len()..];
            let m: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            out.push((f.display().to_string(), m));
        }
    }
    out
}

#[test]
fn lower_layers_never_name_the_layers_above_them() {
    let above = |m: &str| {
        matches!(
            m,
            "cli"
                | "runner"
                | "runtime"
                | "script"
                | "repl"
                | "replay"
                | "report"
                | "ci"
                | "settings"
        )
    };
    let mut bad = vec![];
    for dir in [
        "provider", "journal", "source", "terminal", "bundle", "events", "outcome",
    ] {
        for (file, m) in named(dir) {
            if above(&m) {
                bad.push(format!("{file} names crate::{m}"));
            }
        }
    }
    for (file, m) in named("error") {
        if above(&m) || m == "verify" || m == "journal" {
            bad.push(format!("{file} names crate::{m}"));
        }
    }
    for (file, m) in named("bundle") {
        if m == "script" {
            bad.push(format!("{file} names crate::{m}"));
        }
    }
    assert!(bad.is_empty(), "{bad:#?}");
}
