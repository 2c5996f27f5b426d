//! `rfs bisect GOOD BAD PROOF`: the first commit at which a proof's
//! result changes. The proof runs in one sandbox per lane, its source
//! moved from commit to commit by incremental re-sync; every tested
//! commit is journaled with its pin and result, and the finding is
//! printed as `git bisect` prints it.
//!
//! - [`answer`]: what a bisect's bundle leads with;
//! - [`range`]: the commits (first-parent path), resolved once;
//! - [`search`]: which commit next, and what the results prove;
//! - [`lane`]: one run testing the commits it is handed;
//! - [`setup`]: `--setup FILE`, run once, every lane a fork of it.

use answer::answer_phrase;
pub(crate) use rfs_evidence::journal::bisect_answer as answer;
pub(crate) mod lane;
pub(crate) mod range;
pub(crate) mod search;
pub(crate) mod setup;

use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::settings::{RunArgs, RunSettings};
use rfs_evidence::error::Error;
use rfs_evidence::events::BisectResult;
use rfs_evidence::exit_code;
use search::Found;

/// The raw inputs of `rfs bisect`.
#[derive(Debug, Default)]
pub(crate) struct BisectArgs {
    pub good: String,
    pub bad: String,
    pub proof: PathBuf,
    /// Commits (ids or prefixes) not to test.
    pub skip: Vec<String>,
    pub jobs: usize,
    /// The proof's run arguments (`out` is the bundle, or with several
    /// lanes the folder of their bundles).
    pub template: RunArgs,
    pub sign_key: Option<PathBuf>,
    /// `--setup FILE`: run once; every lane starts from its checkpoint.
    pub setup: Option<PathBuf>,
    /// `--trust-ends`: do not test the ends again; good passes and bad
    /// fails on the person's word (journaled in `bisect.start`).
    pub trust_ends: bool,
}

/// Run the bisection; the exit code: 0 found, 1 no change or only
/// skipped commits left, 3 an end could not be tested, 130 interrupted.
pub(crate) fn run(a: BisectArgs) -> Result<i32, Error> {
    let (here, commits, probe) = validate(&a)?;
    let lanes = a.jobs.min(commits.len());
    // With a setup, the folder holds `_setup/` and the lanes' bundles.
    let nested = lanes > 1 || a.setup.is_some();
    let folder = match (&a.template.out, nested) {
        (Some(o), _) => std::path::absolute(o).unwrap_or_else(|_| o.clone()),
        (None, false) => probe.state_dir.join("runs").join(&probe.run_id),
        (None, true) => probe.state_dir.join("bisects").join(&probe.run_id),
    };
    let coord = Arc::new(lane::Coordinator::new(
        commits.clone(),
        a.skip.clone(),
        here.clone(),
        a.trust_ends,
    ));
    let key = rfs_evidence::signing::key::for_run(a.sign_key.as_deref())?;
    let interrupt = CancellationToken::new();
    let _signals = crate::lifecycle::cancel_on_signals(
        &interrupt,
        "rfs bisect: stopping; every sandbox is removed and verified gone",
    )?;
    errln!(
        "rfs bisect: {} commits from {} to {} ({}), {lanes} {} on {}",
        commits.len(),
        short(&commits[0]),
        short(&commits[commits.len() - 1]),
        if a.trust_ends {
            "ends not re-tested, taken from your word: --trust-ends"
        } else {
            "both ends included, tested again"
        },
        if lanes == 1 {
            "sandbox"
        } else {
            "sandboxes in parallel"
        },
        probe.provider.name
    );
    let mut setup = match &a.setup {
        None => None,
        Some(f) => match setup::run(f, &folder, &a.template, key.clone(), &interrupt) {
            Ok(s) => Some(s),
            Err(code) => return Ok(code),
        },
    };
    let start_from = setup.as_ref().map(|s| s.1.clone());
    let ended: Result<Vec<crate::runner::RunReport>, Error> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..lanes)
            .map(|n| {
                let out = if !nested {
                    folder.clone()
                } else {
                    folder.join(format!("lane-{}", n + 1))
                };
                let args = RunArgs {
                    script: a.proof.clone(),
                    out: Some(out),
                    ..a.template.clone()
                };
                let (coord, key, token) = (coord.clone(), key.clone(), interrupt.child_token());
                let ends = (commits[0].clone(), commits[commits.len() - 1].clone());
                let from = start_from.clone();
                s.spawn(move || lane_run(args, coord, key, token, ends, from))
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| h.join().ok())
            .collect::<Result<Vec<_>, Error>>()
    });
    let reports = match ended {
        Ok(r) => r,
        Err(e) => {
            // A lane refused before it ran: the setup's checkpoints go too.
            if let Some(s) = setup.as_mut() {
                setup::remove(&mut s.0);
            }
            return Err(e);
        }
    };
    say_lane_errors(&reports);
    let removed = setup.as_mut().is_none_or(|s| setup::remove(&mut s.0));
    let bundles: Vec<String> = reports
        .iter()
        .map(|r| r.out_dir.display().to_string())
        .collect();
    if nested {
        write_index(
            &folder,
            &coord,
            &bundles,
            setup.as_ref().map(|s| &s.0.result),
        );
    }
    if interrupt.is_cancelled()
        || reports
            .iter()
            .any(|r| r.exit_code == exit_code::INTERRUPTED)
    {
        errln!("rfs bisect: interrupted; evidence in {}", folder.display());
        return Ok(exit_code::INTERRUPTED);
    }
    if let Some(r) = reports.iter().find(|r| r.exit_code != exit_code::SUCCESS) {
        return Ok(r.exit_code);
    }
    let code = conclude(&here, &coord, &folder, &a.proof);
    // A checkpoint not verified gone fails a bisection that found its commit.
    Ok(if !removed && code == exit_code::SUCCESS {
        exit_code::INTERNAL
    } else {
        code
    })
}

/// The repository, the range's commits and the proof's settings (the
/// provider validated once: a misspelt one is one usage error).
fn validate(a: &BisectArgs) -> Result<(PathBuf, Vec<String>, RunSettings), Error> {
    let here = std::env::current_dir()
        .map_err(|e| Error::Usage(format!("cannot read the current directory: {e}")))?;
    if a.jobs == 0 {
        return Err(Error::Usage("--jobs must be at least 1".into()));
    }
    let range = range::resolve(&here, &a.good, &a.bad)
        .map_err(|e| Error::Usage(format!("rfs bisect: {e}")))?;
    let commits: Vec<String> = range.commits.iter().map(|c| c.to_string()).collect();
    let probe = RunSettings::from_args(RunArgs {
        script: a.proof.clone(),
        out: None,
        ..a.template.clone()
    })?;
    let max = crate::suite::max_jobs(probe.provider.kind());
    if a.jobs > max {
        return Err(Error::Usage(format!(
            "refused: --jobs asks for {} lanes at once; at most {max} run here",
            a.jobs
        )));
    }
    Ok((here, commits, probe))
}

/// Say how each lane that failed ended (an interrupt is said once, after).
fn say_lane_errors(reports: &[crate::runner::RunReport]) {
    for r in reports {
        if let Some(e) = &r.error {
            if !matches!(e, Error::Interrupted) {
                errln!(
                    "rfs bisect: {} ended: {}",
                    r.out_dir.display(),
                    crate::reporter::text::block(&e.to_string())
                );
            }
        }
    }
}

fn lane_run(
    args: RunArgs,
    coord: Arc<lane::Coordinator>,
    key: Option<Arc<rfs_evidence::signing::SigningKey>>,
    interrupt: CancellationToken,
    ends: (String, String),
    start_from: Option<Arc<crate::runtime::checkpoint::StartFrom>>,
) -> Result<crate::runner::RunReport, Error> {
    let settings = RunSettings::from_args(args)?;
    let watch = Arc::new(lane::Watch::default());
    let hooks = crate::runner::Hooks {
        reporter: watch.clone(),
        interrupt,
        signing_key: key,
        ..Default::default()
    };
    let body = lane::body(coord, watch, settings.vars.clone(), ends);
    let link = crate::lifecycle::SetupLink {
        start_from,
        ..Default::default()
    };
    Ok(crate::runner::run_linked(settings, hooks, body, link))
}

/// Print the finding as `git bisect` does, then (for a merge) how to
/// look inside it and every commit tested, oldest first; the exit code.
fn conclude(
    repo: &std::path::Path,
    coord: &lane::Coordinator,
    folder: &std::path::Path,
    proof: &std::path::Path,
) -> i32 {
    let n = coord.commits.len();
    let (g, b) = (coord.result(0), coord.result(n - 1));
    let word = |r: Option<BisectResult>| r.map_or("untested", |r| r.as_str());
    let code = match coord.found() {
        Some(Found::FirstChanged(i)) => {
            let c = &coord.commits[i];
            outln!("{c} is {}", answer_phrase(g, b));
            // The commit's author and message are the repository's text.
            out!(
                "{}",
                crate::reporter::text::block(&range::describe(repo, c))
            );
            let proof = proof.display().to_string();
            if let Some(m) = range::found_commit(repo, c)
                .as_ref()
                .and_then(|f| answer::merge(f, &proof))
            {
                outln!("");
                // Commit ids and the proof's path: shown inert.
                out!(
                    "{}",
                    crate::reporter::text::block(&format!(
                        "{}\n    {}\n(with git: {})\n",
                        m.why, m.rfs, m.git
                    ))
                );
            }
            exit_code::SUCCESS
        }
        Some(Found::OneOf(v)) => {
            outln!("There are only 'skip'ped commits left to test.");
            outln!(
                "The first commit whose result is {} could be any of:",
                word(b)
            );
            for &i in &v {
                outln!("{}", coord.commits[i]);
            }
            outln!("We cannot bisect more!");
            exit_code::SCRIPT_FAILED
        }
        Some(Found::NoChange(r)) => {
            errln!(
                "rfs bisect: the proof {} at both ends ({} and {}): its result does not change in this range",
                r.as_str(),
                short(&coord.commits[0]),
                short(&coord.commits[n - 1])
            );
            exit_code::SCRIPT_FAILED
        }
        Some(Found::Untestable(i)) => {
            errln!(
                "rfs bisect: refused: the proof cannot be tested at {} ({}), so the range has no known result at that end",
                coord.commits[i],
                if i == 0 { "good" } else { "bad" }
            );
            exit_code::REFUSED
        }
        None => exit_code::INTERNAL,
    };
    let results = coord.results();
    if coord.ends_trusted() {
        outln!("");
        outln!(
            "Ends not re-tested, taken from your word (--trust-ends): {} passes, {} fails.",
            short(&coord.commits[0]),
            short(&coord.commits[n - 1])
        );
    }
    if !results.is_empty() {
        outln!("");
        outln!("Commits tested, oldest first:");
        for (i, r) in results {
            let end = match i {
                0 => " (good)",
                i if i == n - 1 => " (bad)",
                _ => "",
            };
            outln!("  {} {}{end}", short(&coord.commits[i]), r.as_str());
        }
    }
    errln!(
        "rfs bisect: {} of {} commits tested; evidence: {}",
        coord.tested(),
        n,
        folder.display()
    );
    code
}

/// With several lanes: `bisect.json` beside their bundles.
fn write_index(
    folder: &std::path::Path,
    coord: &lane::Coordinator,
    bundles: &[String],
    setup: Option<&crate::suite::setup::SetupResult>,
) {
    let tested: Vec<_> = (0..coord.commits.len())
        .filter_map(|i| {
            coord
                .result(i)
                .map(|r| serde_json::json!({ "commit": coord.commits[i], "result": r }))
        })
        .collect();
    let found = match coord.found() {
        Some(Found::FirstChanged(i)) => serde_json::json!({ "first_changed": coord.commits[i] }),
        Some(Found::OneOf(v)) => {
            serde_json::json!({ "one_of": v.iter().map(|&i| &coord.commits[i]).collect::<Vec<_>>() })
        }
        Some(Found::NoChange(r)) => serde_json::json!({ "no_change": r }),
        Some(Found::Untestable(i)) => serde_json::json!({ "untestable": coord.commits[i] }),
        None => serde_json::Value::Null,
    };
    let mut ix = serde_json::json!({ "found": found, "tested": tested, "lanes": bundles });
    if coord.ends_trusted() {
        ix["ends_trusted"] = true.into();
    }
    if let Some(s) = setup {
        ix["setup"] = serde_json::to_value(s).unwrap_or_default();
    }
    if let Err(e) = std::fs::write(
        folder.join("bisect.json"),
        serde_json::to_string_pretty(&ix).unwrap_or_default() + "\n",
    ) {
        errln!("rfs: warning: cannot write bisect.json: {e}");
    }
}

fn short(c: &str) -> &str {
    &c[..12.min(c.len())]
}
