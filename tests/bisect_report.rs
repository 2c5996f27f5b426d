//! What `rfs bisect` leads with (issue #32.2): its report, EVIDENCE.md
//! and the console's last lines give the answer — the first commit where
//! the result changes, its subject, author and date in the author's time
//! zone, the commits tested with their results (oldest first, with
//! `--jobs` too), and for a merge the range to bisect inside it — and a
//! failing step at the bad end is a result, not "What failed".

mod common;
use common::*;

/// `n` commits, the i-th setting `v` to `i`, authored at 10:00 on day
/// i+1 of March 2026 in India's time zone (+05:30).
fn counting_repo(n: usize) -> (Repo, Vec<String>) {
    let repo = Repo::new();
    let ids = (0..n)
        .map(|i| {
            repo.write("v", &format!("{i}\n"));
            repo.git(&["add", "-A"]);
            repo.git(&[
                "commit",
                "-q",
                "-m",
                &format!("set v to {i}"),
                "--date",
                &format!("2026-03-{:02} 10:00:00 +0530", i + 1),
            ]);
            repo.head()
        })
        .collect();
    (repo, ids)
}

/// The console's `Commits tested, oldest first:` lines: (short id, result).
fn console_tested(stdout: &str) -> Vec<(String, String)> {
    let at = stdout
        .find("Commits tested, oldest first:\n")
        .unwrap_or_else(|| panic!("no list of commits tested: {stdout}"));
    stdout[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let mut w = l.split_whitespace();
            (w.next().unwrap().to_owned(), w.next().unwrap().to_owned())
        })
        .collect()
}

#[test]
fn a_bisects_report_leads_with_the_commit_it_found_not_with_the_bad_ends_failure() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(9);
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 5");"#);
    let out = bisect(&rfs, repo.path(), &[&ids[0], "HEAD", p.to_str().unwrap()]);
    out.assert_code(0);
    let date = "Fri, 06 Mar 2026 10:00:00 +0530";

    // The console: the answer, the commit in its author's time zone, then
    // every commit tested, oldest first.
    assert!(
        out.stdout
            .starts_with(&format!("{} is the first bad commit\n", ids[5])),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(&format!("Date:   {date}\n")),
        "{}",
        out.stdout
    );
    let tested = console_tested(&out.stdout);
    let order: Vec<usize> = tested
        .iter()
        .map(|(c, _)| ids.iter().position(|i| i.starts_with(c.as_str())).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{tested:?}");
    assert_eq!(tested[0], (ids[0][..12].to_owned(), "passed".to_owned()));
    assert!(tested.contains(&(ids[5][..12].to_owned(), "failed".to_owned())));

    // report.html: the answer first, no "What failed".
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    assert!(!html.contains("id=\"failure\""), "{html}");
    assert!(!html.contains("What failed"), "{html}");
    let answer = html.find("id=\"bisect-answer\"").expect("the answer");
    assert!(answer < html.find("id=\"steps\"").unwrap());
    assert!(answer < html.find("<dl class=\"facts\">").unwrap());
    let section = &html[answer..html[answer..].find("</section>").unwrap() + answer];
    assert!(
        section.contains(&format!(
            "<code>{}</code> is the first bad commit: set v to 5",
            ids[5]
        )),
        "{section}"
    );
    assert!(section.contains(date), "{section}");
    assert!(
        section.contains("rfs test &lt;test@rfs.invalid&gt;"),
        "{section}"
    );
    let rows: Vec<usize> = section
        .match_indices("<tr class=")
        .map(|(at, _)| {
            let c = &section[section[at..].find("<code>").unwrap() + at + 6..][..40];
            ids.iter().position(|i| i == c).unwrap()
        })
        .collect();
    assert_eq!(rows.len(), tested.len());
    assert!(rows.windows(2).all(|w| w[0] < w[1]), "{rows:?}");
    assert!(
        html.contains("id=\"bisect-verdict\">found<"),
        "the badge is the answer"
    );
    assert!(
        !html.contains("<details id=\"step-2\" open>"),
        "the bad end's failing step is a result, not opened as a failure"
    );

    // EVIDENCE.md: the Bisect section comes first, with the same answer.
    let ev = out.evidence();
    let first = ev.find("\n## ").unwrap();
    assert!(ev[first..].starts_with("\n## Bisect\n"), "{ev}");
    assert!(
        ev.contains(&format!(
            "**`{}` is the first bad commit: set v to 5**",
            ids[5]
        )),
        "{ev}"
    );
    assert!(ev.contains(&format!("- date: {date}")), "{ev}");
    assert!(!ev.contains("## What failed"), "{ev}");
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);
    rfs.assert_no_leftovers();
}

/// A merge found on the first-parent path: the answer says it is one and
/// gives the range to bisect inside it — which, bisected, finds the
/// commit on the merged branch.
#[test]
fn a_merge_found_by_bisect_says_the_range_to_bisect_inside_it() {
    let rfs = Rfs::new(Prov::Local);
    let repo = Repo::new();
    let base = repo.head();
    repo.write("a", "1\n");
    let c1 = repo.commit("main: a");
    repo.git(&["checkout", "-q", "-b", "feature"]);
    repo.write("f1", "\n");
    repo.commit("feature: harmless");
    repo.write("broken", "\n");
    let f2 = repo.commit("feature: breaks it");
    repo.write("f3", "\n");
    let f3 = repo.commit("feature: after");
    repo.git(&["checkout", "-q", "main"]);
    repo.write("b", "1\n");
    repo.commit("main: b");
    repo.git(&["merge", "-q", "--no-ff", "-m", "merge feature", "feature"]);
    let merge = repo.head();
    repo.write("c", "1\n");
    repo.commit("main: c");
    let p = proof(&rfs, r#"step("check", "test ! -e broken");"#);
    let out = bisect(&rfs, repo.path(), &[&base, "HEAD", p.to_str().unwrap()]);
    out.assert_code(0);
    assert!(
        out.stdout
            .starts_with(&format!("{merge} is the first bad commit\n")),
        "{}",
        out.stdout
    );
    let next = format!("rfs bisect {c1} {f3} {}", p.display());
    assert!(out.stdout.contains("This is a merge"), "{}", out.stdout);
    assert!(out.stdout.contains(&next), "{}", out.stdout);
    assert!(
        out.stdout.contains(&format!("git bisect start {f3} {c1}")),
        "{}",
        out.stdout
    );
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    let m = html
        .find("id=\"bisect-merge\"")
        .expect("the merge is named");
    assert!(html[m..].contains(&format!("{c1} {f3}")), "{html}");
    assert!(
        out.evidence().contains("This is a merge"),
        "{}",
        out.evidence()
    );
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);

    // The range it gives finds the commit inside the merge.
    let out = bisect(&rfs, repo.path(), &[&c1, &f3, p.to_str().unwrap()]);
    out.assert_code(0);
    assert!(
        out.stdout
            .starts_with(&format!("{f2} is the first bad commit\n")),
        "{}",
        out.stdout
    );
    assert!(!out.stdout.contains("This is a merge"), "{}", out.stdout);
    rfs.assert_no_leftovers();
}

/// `--jobs 3`: lanes finish in any order, but the console and every
/// lane's report list the commits tested oldest first (a lane's report,
/// those tested by the time it ended).
#[test]
fn with_jobs_the_commits_tested_are_listed_oldest_first() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(17);
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 9");"#);
    let out = bisect(
        &rfs,
        repo.path(),
        &[&ids[0], "HEAD", p.to_str().unwrap(), "--jobs", "3"],
    );
    out.assert_code(0);
    let tested = console_tested(&out.stdout);
    let order: Vec<usize> = tested
        .iter()
        .map(|(c, _)| ids.iter().position(|i| i.starts_with(c.as_str())).unwrap())
        .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{tested:?}");
    assert_eq!(order.first(), Some(&0));
    assert_eq!(order.last(), Some(&16));
    // Each lane's EVIDENCE.md leads with the same answer, every lane's
    // results in it.
    for lane in 1..=3 {
        let dir = out.out_dir.join(format!("lane-{lane}"));
        let ev = std::fs::read_to_string(dir.join("EVIDENCE.md")).unwrap();
        if !ev.contains("is the first bad commit") {
            // A lane that stopped before the end says so.
            assert!(ev.contains("Did not finish"), "{ev}");
            continue;
        }
        assert!(
            ev.contains(&format!("**`{}` is the first bad commit", ids[9])),
            "{ev}"
        );
        let rows: Vec<usize> = ev
            .lines()
            .filter(|l| l.starts_with("| `"))
            .map(|l| {
                ids.iter()
                    .position(|i| l[3..].starts_with(i.as_str()))
                    .unwrap()
            })
            .collect();
        // Oldest first, and what every lane had tested when this one
        // ended (a lane that ends first cannot list a later lane's
        // commits): a subset of the console's list, with both ends and
        // the answer.
        assert!(rows.windows(2).all(|w| w[0] < w[1]), "lane {lane}: {ev}");
        assert!(rows.iter().all(|r| order.contains(r)), "lane {lane}: {ev}");
        for must in [0, 9, 16] {
            assert!(rows.contains(&must), "lane {lane} lacks {must}: {ev}");
        }
        assert_bundle_verifies(&rfs, repo.path(), &dir);
    }
    rfs.assert_no_leftovers();
}

/// The header of a bisect's report named a commit as the run's "source
/// commit" that the bisect never tested (#46 item 8). It now names what
/// was tested: the good and bad ends with their results and the first
/// changed commit; every sync of the source folds away below, one not
/// tested marked so.
#[test]
fn a_bisects_header_names_the_ends_and_the_commit_found_not_an_untested_source_commit() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(9);
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 5");"#);
    // HEAD is ids[8], past the bad end: never tested.
    let out = bisect(&rfs, repo.path(), &[&ids[0], &ids[6], p.to_str().unwrap()]);
    out.assert_code(0);
    let html = std::fs::read_to_string(out.out_dir.join("report.html")).unwrap();
    let header = &html[..html.find("</header>").unwrap()];
    let facts = &header[header.find("<dl class=\"facts\">\n<dt>run</dt>").unwrap()..];
    let facts = &facts[..facts.find("</dl>").unwrap()];
    assert!(!facts.contains("source commit"), "{facts}");
    for (what, value) in [
        ("good end", format!("{} (passed, tested)", ids[0])),
        ("bad end", format!("{} (failed, tested)", ids[6])),
        ("first changed commit", ids[5].clone()),
    ] {
        assert!(
            facts.contains(&format!("<dt>{what}</dt><dd><code>{value}</code></dd>")),
            "{what}: {value} in {facts}"
        );
    }
    assert!(!html.contains(&ids[8]), "HEAD was not tested: {html}");
    let ev = out.evidence();
    assert!(!ev.contains("- source commit:"), "{ev}");
    assert!(
        ev.contains(&format!("- good end: {} (passed, tested)\n", ids[0])),
        "{ev}"
    );
    assert!(
        ev.contains(&format!("- first changed commit: {}\n", ids[5])),
        "{ev}"
    );
    assert_bundle_verifies(&rfs, repo.path(), &out.out_dir);

    // With a setup, the lane's first pin is the setup's HEAD, which the
    // bisect never tests: the header named it as the source commit. It
    // is a sync marked not tested now.
    let setup = rfs.state.path().join("setup.rhai");
    std::fs::write(&setup, r#"step("prep", "echo prepared > $HOME/prep");"#).unwrap();
    let out = bisect(
        &rfs,
        repo.path(),
        &[
            &ids[0],
            &ids[6],
            p.to_str().unwrap(),
            "--setup",
            setup.to_str().unwrap(),
        ],
    );
    out.assert_code(0);
    let lane = out.out_dir.join("lane-1");
    let html = std::fs::read_to_string(lane.join("report.html")).unwrap();
    let header = &html[..html.find("</header>").unwrap()];
    assert!(!header.contains("source commit"), "{header}");
    assert!(
        header.contains(&format!(
            "<dt>synced to</dt><dd><code>{} (not tested)</code></dd>",
            ids[8]
        )),
        "HEAD, bound by the setup, marked not tested: {header}"
    );
    assert!(
        header.contains(&format!(
            "<dt>first changed commit</dt><dd><code>{}</code></dd>",
            ids[5]
        )),
        "{header}"
    );
    let ev = std::fs::read_to_string(lane.join("EVIDENCE.md")).unwrap();
    assert!(
        ev.contains(&format!("- first synced: `{}` (not tested", ids[8])),
        "{ev}"
    );
    assert_bundle_verifies(&rfs, repo.path(), &lane);
    rfs.assert_no_leftovers();
}

/// A bisect tested both ends again, 2 commits more than `git bisect run`
/// and nothing said why (#46 item 8). By default it still does, and its
/// report says why (an end that does not behave as claimed makes the
/// bisect meaningless); `--trust-ends` takes the ends on the person's
/// word, tests neither, and is journaled and reported as such.
#[test]
fn a_bisect_retests_its_ends_and_says_why_unless_trust_ends_takes_them_on_the_persons_word() {
    let rfs = Rfs::new(Prov::Local);
    let (repo, ids) = counting_repo(17);
    let p = proof(&rfs, r#"step("check", "test $(cat v) -lt 5");"#);
    let p = p.to_str().unwrap();
    let checked = bisect(&rfs, repo.path(), &[&ids[0], "HEAD", p]);
    checked.assert_code(0);
    assert!(
        checked
            .stderr
            .contains("(both ends included, tested again)"),
        "{}",
        checked.stderr
    );
    let html = std::fs::read_to_string(checked.out_dir.join("report.html")).unwrap();
    assert!(
        html.contains(
            "Both ends were tested again before the search: an end that does not behave as claimed"
        ),
        "{html}"
    );
    let tested_checked = checked.entries("bisect.commit").len();

    let trusted = bisect(&rfs, repo.path(), &[&ids[0], "HEAD", p, "--trust-ends"]);
    trusted.assert_code(0);
    assert!(
        trusted
            .stdout
            .starts_with(&format!("{} is the first bad commit\n", ids[5])),
        "{}",
        trusted.stdout
    );
    assert_eq!(trusted.entries("bisect.start")[0]["ends_trusted"], true);
    let commits: Vec<String> = trusted
        .entries("bisect.commit")
        .iter()
        .map(|c| c["commit"].as_str().unwrap().to_owned())
        .collect();
    assert!(
        !commits.contains(&ids[0]) && !commits.contains(&ids[16]),
        "the ends are not tested: {commits:?}"
    );
    assert_eq!(commits.len() + 2, tested_checked, "{commits:?}");
    assert!(commits.len() <= 4, "16 commits take 4 probes: {commits:?}");
    assert!(
        trusted
            .stdout
            .contains("Ends not re-tested, taken from your word (--trust-ends)"),
        "{}",
        trusted.stdout
    );
    let said = "Ends not re-tested, taken from the person&#39;s word (--trust-ends)";
    let html = std::fs::read_to_string(trusted.out_dir.join("report.html")).unwrap();
    assert!(html.contains(said), "{html}");
    assert!(
        html.contains(&format!(
            "<dt>good end</dt><dd><code>{} (passes: not re-tested, the person&#39;s word)</code></dd>",
            ids[0]
        )),
        "{html}"
    );
    let ev = trusted.evidence();
    assert!(
        ev.contains("Ends not re-tested, taken from the person's word"),
        "{ev}"
    );
    assert_bundle_verifies(&rfs, repo.path(), &trusted.out_dir);
    rfs.assert_no_leftovers();
}
