//! The book names the tests that hold its claims ("held by `a_test_name`").
//! A renamed or removed test would leave a claim pointing at nothing, so
//! every backticked name in `book/src/*.md` that looks like a test name
//! must be a function (`fn NAME`) somewhere under `tests/`, `crates/` or
//! `src/`. Tests made by `provider_tests!` are written `fn NAME(rfs: &Rfs)`,
//! which is still `fn NAME`.
//!
//! A test name here is a code span holding one lower-case snake_case
//! identifier with at least [`MIN_UNDERSCORES`] underscores, optionally
//! after a module path (`trust_views::a_report_html_…`: the last part is
//! the name). Environment variables (upper case), flags (`--max-pids`),
//! hostile-input case names (`trust-script-…`) and dotted settings
//! (`kernel.unprivileged_userns_clone`) are not test names.

use super::{book_src, chapters};
use std::collections::BTreeSet;
use std::path::Path;

/// Fewer underscores than this and a span is a field, a setting or a short
/// function name (`memory_peak`, `open_tree`), not a test's sentence.
const MIN_UNDERSCORES: usize = 4;

/// The markdown outside fenced code blocks (``` or ~~~, up to three spaces
/// of indentation, closed by a fence at least as long): a journal line or a
/// shell session in a fence names no test.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut open: Option<(char, usize)> = None;
    for raw in text.lines() {
        let indent = raw.len() - raw.trim_start_matches(' ').len();
        let line = raw.trim_start_matches(' ');
        let fence = |c: char| line.chars().take_while(|&x| x == c).count();
        match open {
            None if indent <= 3 => {
                if let Some(c) = ['`', '~'].into_iter().find(|&c| fence(c) >= 3) {
                    open = Some((c, fence(c)));
                    continue;
                }
            }
            None => {}
            Some((c, n)) => {
                let closing = fence(c);
                if indent <= 3 && closing >= n && line[closing..].trim().is_empty() {
                    open = None;
                }
                continue;
            }
        }
        out.push_str(raw);
        out.push('\n');
    }
    out
}

/// The test names a chapter's prose names in code spans.
fn test_names_in(markdown: &str) -> BTreeSet<String> {
    let span = regex::Regex::new(r"`([^`]+)`").unwrap();
    let name = regex::Regex::new(r"^(?:[a-z0-9_]+::)*([a-z][a-z0-9_]*)$").unwrap();
    span.captures_iter(&prose(markdown))
        .filter_map(|c| {
            let inner = c[1].trim();
            let last = name.captures(inner)?.get(1)?.as_str();
            (last.matches('_').count() >= MIN_UNDERSCORES).then(|| last.to_string())
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "target") {
                continue;
            }
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Every `fn NAME` under `tests/`, `crates/` and `src/`.
fn defined_functions(root: &Path) -> BTreeSet<String> {
    let def = regex::Regex::new(r"\bfn\s+([a-z_][a-z0-9_]*)").unwrap();
    let mut files = Vec::new();
    for dir in ["tests", "crates", "src"] {
        rust_files(&root.join(dir), &mut files);
    }
    assert!(files.len() > 100, "found only {} Rust files", files.len());
    files
        .iter()
        .flat_map(|f| {
            let text = std::fs::read_to_string(f)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
            def.captures_iter(&text)
                .map(|c| c[1].to_string())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// `chapter: name` for every test name the chapters give that no `fn`
/// defines.
fn missing_test_names(chapters: &[(String, String)], defined: &BTreeSet<String>) -> Vec<String> {
    chapters
        .iter()
        .flat_map(|(file, text)| {
            test_names_in(text)
                .into_iter()
                .filter(|n| !defined.contains(n))
                .map(move |n| format!("{file}: {n}"))
        })
        .collect()
}

#[test]
fn every_test_the_book_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let defined = defined_functions(root);
    let chapters: Vec<(String, String)> = chapters()
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            let name = p
                .strip_prefix(book_src())
                .unwrap_or(p)
                .display()
                .to_string();
            (name, text)
        })
        .collect();
    let named: usize = chapters.iter().map(|(_, t)| test_names_in(t).len()).sum();
    // The check must be looking at something: the book names hundreds.
    assert!(
        named > 100,
        "the book names only {named} tests: is the scan broken?"
    );
    let missing = missing_test_names(&chapters, &defined);
    assert!(
        missing.is_empty(),
        "the book names {} test(s) that no `fn` under tests/, crates/ or src/ defines \
         (renamed? removed?):\n  {}",
        missing.len(),
        missing.join("\n  ")
    );
}

#[test]
fn the_test_name_check_finds_a_name_no_fn_defines_and_ignores_what_is_not_a_test_name() {
    let chapter = "\
| a step … | held by |
|---|---|
| cannot read it | `a_test_that_was_renamed_long_ago`, `trust_views::a_report_it_does_define_here` |

Not names: `RFS_MAX_PIDS_AND_MORE_HERE`, `--max-pids`, `trust-script-raises-the-process-cap`,
`kernel.apparmor_restrict_unprivileged_userns`, `memory_peak`, `fn a_b_c_d_e`.

```text
`inside_a_fence_is_not_prose_at_all`
```
";
    let names = test_names_in(chapter);
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [
            "a_report_it_does_define_here",
            "a_test_that_was_renamed_long_ago"
        ]
    );
    let defined: BTreeSet<String> = ["a_report_it_does_define_here".to_string()].into();
    assert_eq!(
        missing_test_names(&[("x.md".into(), chapter.into())], &defined),
        ["x.md: a_test_that_was_renamed_long_ago"]
    );
}
