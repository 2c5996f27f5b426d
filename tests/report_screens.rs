//! The screens `report.html` draws (issue #32.1): measured in a real
//! browser (headless Chromium), not read from the markup.

mod common;
use common::*;

/// Measures, after the page's own script (the player) ran, every drawn
/// row that shows `Traceback`: how many characters the browser lays out
/// against how many the row holds, where `Traceback` and `end` start and
/// where the row starts (SVG units).
const MEASURE: &str = r#"
(function () {
  var rows = [];
  document.querySelectorAll("svg.screen text").forEach(function (t) {
    var s = t.textContent;
    if (s.indexOf("Traceback") < 0) return;
    var laid = t.getNumberOfChars();
    var at = function (w) { return laid === s.length ? t.getStartPositionOfChar(s.indexOf(w)).x : -1; };
    rows.push({ chars: s.length, laid: laid, x0: t.querySelector("tspan").x.baseVal[0].value,
                at: s.indexOf("Traceback"),
                traceback: at("Traceback"), end: at("end"), width: t.getComputedTextLength() });
  });
  document.body.setAttribute("data-measure", JSON.stringify(rows));
})();
"#;

/// `report.html` with [`MEASURE`] added, allowed by its hash beside the
/// page's own (the page's style policy is left as it is).
fn with_measure(html: &str) -> String {
    use base64::Engine as _;
    use sha2::Digest as _;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(MEASURE));
    let at = html.find("script-src ").expect("a script policy") + "script-src ".len();
    let mut page = format!("{}'sha256-{hash}' {}", &html[..at], &html[at..]);
    let end = page.rfind("</body>").unwrap();
    page.insert_str(end, &format!("<script>{MEASURE}</script>\n"));
    page
}

#[test]
fn drawn_screens_keep_the_leading_spaces_of_an_indented_row() {
    let Some(browser) = chromium() else { return };
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    // The typed command does not show `Traceback` itself: only the
    // indented row it prints does.
    let out = rfs.run(
        repo.path(),
        r#"sync_source();
        let t = attach("sh");
        t.send("printf '    %s%s   %s\\n' Trace back end\n");
        assert_screen(t, "    Traceback   end");
        t.close();"#,
    );
    out.assert_code(0);
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("measure.html");
    std::fs::write(&page, with_measure(&html)).unwrap();
    let dom = dom_of(&browser, &page);
    let at = dom
        .find("data-measure=\"")
        .expect("the measuring script ran")
        + 14;
    let json = dom[at..at + dom[at..].find('"').unwrap()].replace("&quot;", "\"");
    let rows: Vec<serde_json::Value> = serde_json::from_str(&json).unwrap();
    // The assertion's screen, the last screen and the player's frame.
    assert!(rows.len() >= 3, "{rows:?}");
    for r in &rows {
        let f = |k: &str| r[k].as_f64().unwrap();
        assert_eq!(
            r["laid"], r["chars"],
            "every space of the row is laid out: {r}"
        );
        let cell = f("width") / f("chars");
        assert!(
            (8.0..=9.0).contains(&cell),
            "the row is as wide as its characters: {r}"
        );
        // (A prompt drawn late may stand before the indent.)
        assert!(f("at") >= 4.0, "{r}");
        assert!(
            (f("traceback") - f("x0") - f("at") * cell).abs() < 1.0,
            "Traceback starts after its indent, one cell per space: {r}"
        );
        assert!(
            (f("end") - f("traceback") - 12.0 * cell).abs() < 1.0,
            "the inner spaces are kept: {r}"
        );
    }
}
