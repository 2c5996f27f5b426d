//! One page for a suite (issue #36, item 5): `rfs test` writes
//! `index.html` next to `index.md`, and a real browser (headless
//! Chromium) shows what a reader needs: the counts, what failed first
//! with its output and its screen, the refused and flaky proofs, links to
//! every proof's `report.html` that resolve, NOT REPRODUCIBLE after
//! `--allow-dirty`, and a proof's name shown as text, never as markup.

mod common;
use common::*;

use std::path::Path;

fn rfs_test(rfs: &Rfs, repo: &Path, args: &[&str]) -> RunOut {
    let dir = rfs.state.path().join("suites").join(uuid_like());
    let out = rfs
        .cmd(repo)
        .arg("test")
        .arg("--out")
        .arg(&dir)
        .args(args)
        .output()
        .unwrap();
    let out = finish(out, dir);
    rfs.console(&out.stdout);
    rfs.console(&out.stderr);
    out
}

/// Every `href="…"` of the DOM, entities decoded.
fn hrefs(dom: &str) -> Vec<String> {
    dom.match_indices("href=\"")
        .map(|(i, m)| {
            let rest = &dom[i + m.len()..];
            rest[..rest.find('"').unwrap()].replace("&amp;", "&")
        })
        .collect()
}

/// The element that opens at the first `needle` up to its `</close>`.
fn element<'a>(dom: &'a str, needle: &str, close: &str) -> &'a str {
    let at = dom
        .find(needle)
        .unwrap_or_else(|| panic!("no {needle} in {dom}"));
    &dom[at..at + dom[at..].find(close).unwrap()]
}

/// The hostile name, as a file name may hold it: markup and control
/// characters (an escape sequence, a bell).
const HOSTILE: &str = "x<script>alert(1)<img src=x onerror=alert(2)>\u{1b}[31mred\u{7}\nline.rhai";

#[test]
fn the_suite_page_shows_what_failed_first_and_every_link_resolves() {
    let Some(browser) = chromium() else { return };
    let rfs = Rfs::new(Prov::Local);
    let marker = rfs.state.path().join("marker");
    let repo = Repo::new();
    repo.write(
        "proofs/a-fails.rhai",
        r#"step("unit", "echo 'FAIL wordcount: expected 4, got 2 <b>&'; exit 1");"#,
    );
    repo.write(
        "proofs/b-screen.rhai",
        r#"let t = attach("sh");
        t.send("echo shown-on-screen\n");
        assert_screen(t, #{ text: "never-there", timeout: 1 });"#,
    );
    repo.write(
        "proofs/c-flaky.rhai",
        r#"step("x", "if [ -e \"$M\" ]; then echo second; else touch \"$M\"; echo first; exit 1; fi", #{ env: #{ M: arg("marker") } });"#,
    );
    repo.write(
        "proofs/d-refused.rhai",
        r#"step("x", "true", #{ cwd: "../.." });"#,
    );
    repo.write("proofs/e-passes.rhai", r#"step("x", "cat edit.txt");"#);
    repo.write(&format!("proofs/{HOSTILE}"), r#"step("x", "true");"#);
    repo.write("edit.txt", "committed\n");
    repo.commit("proofs");
    repo.write("edit.txt", "edited\n");
    let var = format!("marker={}", marker.display());
    let out = rfs_test(
        &rfs,
        repo.path(),
        &[
            "--allow-dirty",
            "--retries",
            "1",
            "--isolation",
            "none",
            "--var",
            &var,
        ],
    );
    // A refusal is the worst verdict: the suite exits 3.
    out.assert_code(3);
    let suite = &out.out_dir;
    let page = suite.join("index.html");
    assert!(
        out.stderr.contains(&format!("page: {}", page.display())),
        "the console names the page: {}",
        out.stderr
    );
    let html = std::fs::read_to_string(&page).unwrap();

    // Self-contained, and only its own style applies: the policy allows
    // that one style by its hash, no script, nothing fetched.
    let style = element(&html, "<style>", "</style>")["<style>".len()..].to_owned();
    let hash = {
        use base64::Engine as _;
        use sha2::Digest as _;
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(style.as_bytes()))
    };
    let csp = element(&html, "Content-Security-Policy", ">");
    assert!(
        csp.contains(&format!("default-src 'none'; style-src 'sha256-{hash}';")),
        "{csp}"
    );
    assert!(
        !csp.contains("script-src") && !csp.contains("unsafe"),
        "{csp}"
    );
    for needle in ["src=\"http", "href=\"http", "@import", "url(", "<script"] {
        assert!(!html.contains(needle), "{needle} in the page");
    }

    let dom = dom_of(&browser, &page);

    // The counts at the top, and NOT REPRODUCIBLE (--allow-dirty shipped
    // an edited tree).
    let header = element(&dom, "<header", "</header>");
    for (what, n) in [
        ("passed", 2),
        ("flaky", 1),
        ("failed", 2),
        ("refused", 1),
        ("not-run", 0),
    ] {
        assert!(
            header.contains(&format!("id=\"count-{what}\">{n}<")),
            "{what}: {n} in {header}"
        );
    }
    let banner = element(&dom, "id=\"not-reproducible\"", "</p>");
    assert!(banner.contains("NOT REPRODUCIBLE"), "{banner}");
    assert!(banner.contains("proofs/e-passes.rhai"), "{banner}");

    // What failed comes first: the first proof on the page is a failed
    // one, with its output tail; then the refused, then the flaky.
    let first = element(&dom, "<article", "</article>");
    assert!(first.contains("data-verdict=\"failed\""), "{first}");
    assert!(first.contains("proofs/a-fails.rhai"), "{first}");
    let tail = element(first, "class=\"tail\"", "</pre>");
    assert!(
        tail.contains("FAIL wordcount: expected 4, got 2 &lt;b&gt;&amp;"),
        "{tail}"
    );
    let order: Vec<usize> = [
        "id=\"failed\"",
        "id=\"refused\"",
        "id=\"flaky\"",
        "id=\"proofs\"",
    ]
    .iter()
    .map(|id| dom.find(id).unwrap_or_else(|| panic!("no {id} in {dom}")))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{order:?}");
    let failed = element(&dom, "id=\"failed\"", "</section>");
    assert!(failed.contains("proofs/b-screen.rhai"), "{failed}");
    let refused = element(&dom, "id=\"refused\"", "</section>");
    assert!(refused.contains("proofs/d-refused.rhai"), "{refused}");
    assert!(refused.contains("class=\"error\""), "{refused}");
    let flaky = element(&dom, "id=\"flaky\"", "</section>");
    assert!(flaky.contains("proofs/c-flaky.rhai"), "{flaky}");
    assert!(
        flaky.contains("c-flaky/report.html") && flaky.contains("c-flaky.attempt-2/report.html"),
        "each attempt's report: {flaky}"
    );

    // The failed screen: drawn, with the link to it in the proof's report.
    let screen = element(
        &dom[dom.find("b-screen").unwrap()..],
        "<figure",
        "</figure>",
    );
    assert!(screen.contains("<svg"), "the screen is drawn: {screen}");
    assert!(screen.contains("shown-on-screen"), "{screen}");
    assert!(
        screen.contains("b-screen.attempt-2/report.html#failed-session-1-assert-1"),
        "the last attempt's screen: {screen}"
    );
    assert!(screen.contains("shown-on-screen"), "{screen}");

    // Every link is relative to the suite's folder and resolves, anchors
    // included.
    let links = hrefs(&dom);
    assert!(links.len() >= 10, "{links:?}");
    for l in &links {
        assert!(!l.contains(':') && !l.starts_with('/'), "{l} is relative");
        let (file, anchor) = l.split_once('#').unwrap_or((l, ""));
        let target = suite.join(file);
        assert!(target.is_file(), "{l} resolves: {}", target.display());
        if !anchor.is_empty() {
            let t = std::fs::read_to_string(&target).unwrap();
            assert!(t.contains(&format!("id=\"{anchor}\"")), "{l}: no #{anchor}");
        }
    }

    // The hostile name is text: no element came of it, its control
    // characters are shown as symbols.
    assert!(!dom.contains("<img") && !dom.contains("<script"), "{dom}");
    let shown =
        "x&lt;script&gt;alert(1)&lt;img src=x onerror=alert(2)&gt;\u{241b}[31mred\u{2407}\u{240a}line.rhai";
    assert!(dom.contains(shown), "{shown} in {dom}");
    assert!(!dom.contains('\u{1b}') && !dom.contains('\u{7}'));

    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(suite.join("index.json")).unwrap()).unwrap();
    assert_eq!(index["reproducible"], false, "{index}");
    rfs.assert_no_leftovers();
}

/// A suite of a clean tree says nothing of reproducibility, and a page
/// of passed proofs says passed.
#[test]
fn a_clean_suites_page_says_passed_and_no_not_reproducible() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write("proofs/ok.rhai", r#"step("x", "true");"#);
    repo.commit("proofs");
    let out = rfs_test(&rfs, repo.path(), &["--allow-dirty"]);
    out.assert_code(0);
    let html = std::fs::read_to_string(out.out_dir.join("index.html")).unwrap();
    assert!(html.contains("id=\"verdict\">passed<"), "{html}");
    assert!(!html.contains("NOT REPRODUCIBLE"), "{html}");
    assert!(!html.contains("id=\"failed\""), "{html}");
    assert!(html.contains("href=\"proofs-ok/report.html\""), "{html}");
    rfs.assert_no_leftovers();
}

/// A refused proof's row on `index.html` showed only the refusal, not
/// the output that explains it (#46 item 3): it shows the last lines the
/// proof printed, as a failed proof's row does.
#[test]
fn a_refused_proofs_row_on_the_suite_page_shows_the_output_that_explains_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    repo.write(
        "proofs/refused.rhai",
        r#"step("probe", "echo the-workdir-is-the-parent-now");
print("moving up two folders");
step("up", "true", #{ cwd: "../.." });"#,
    );
    repo.commit("proofs");
    let out = rfs_test(&rfs, repo.path(), &[]);
    out.assert_code(3);
    let html = std::fs::read_to_string(out.out_dir.join("index.html")).unwrap();
    let refused = element(&html, "id=\"refused\"", "</section>");
    assert!(refused.contains("class=\"error\""), "{refused}");
    let tail = element(refused, "class=\"tail\"", "</pre>");
    assert!(
        tail.contains("[probe] the-workdir-is-the-parent-now"),
        "{tail}"
    );
    assert!(tail.contains("print: moving up two folders"), "{tail}");
    rfs.assert_no_leftovers();
}

/// `index.html`, `index.md` and `index.json` gave no project test counts
/// (the JUnit reports the proofs collected), no commit and no network
/// (#46 item 7): each gives all three, summed over the proofs.
#[test]
fn the_suite_index_gives_the_projects_test_counts_the_commit_and_the_network() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let proof =
        format!("{JUNIT_3_CASES_STEP}\ncollect(\"reports/junit.xml\", #{{ junit: true }});\n");
    repo.write("proofs/a.rhai", &proof);
    repo.write("proofs/b.rhai", &proof);
    repo.write("proofs/c.rhai", r#"step("x", "true");"#);
    repo.commit("proofs");
    let head = repo.head();
    let out = rfs_test(&rfs, repo.path(), &[]);
    out.assert_code(0);
    let ix: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.out_dir.join("index.json")).unwrap())
            .unwrap();
    assert_eq!(ix["commits"][&head], 3, "{ix}");
    assert_eq!(
        ix["tests"],
        serde_json::json!({ "reports": 2, "tests": 6, "failures": 2, "errors": 0, "skipped": 0 }),
        "{ix}"
    );
    let net = &ix["network"];
    assert_eq!(net["connections"], 0, "{ix}");
    let policies: u64 = net["policies"]
        .as_object()
        .unwrap_or_else(|| panic!("a network summary: {ix}"))
        .values()
        .map(|n| n.as_u64().unwrap())
        .sum();
    assert_eq!(policies, 3, "each proof's policy: {ix}");

    let tests = "6 test case(s) in 2 JUnit report(s): 2 failed, 0 error(s), 0 skipped";
    let html = std::fs::read_to_string(out.out_dir.join("index.html")).unwrap();
    let header = element(&html, "<header", "</header>");
    assert!(
        element(header, "id=\"suite-commit\"", "</dd>").contains(&head),
        "{header}"
    );
    assert!(
        element(header, "id=\"suite-project-tests\"", "</dd>").contains(tests),
        "{header}"
    );
    assert!(
        element(header, "id=\"suite-network\"", "</dd>")
            .contains("0 connection(s) through rfs&#39;s proxy, 0 refused; policy: "),
        "{header}"
    );
    let md = std::fs::read_to_string(out.out_dir.join("index.md")).unwrap();
    assert!(md.contains(&format!("- Commit: {head}\n")), "{md}");
    // Markdown escapes the text's punctuation.
    assert!(
        md.contains("- Project tests (JUnit, every proof): 6 test case"),
        "{md}"
    );
    assert!(md.contains("- Network: 0 connection"), "{md}");
    rfs.assert_no_leftovers();
}
