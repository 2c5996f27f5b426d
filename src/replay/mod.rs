//! `rfs replay OUT`: re-run a bundle's script against the commit it pinned,
//! in a fresh sandbox, and compare each step with the original.
//!
//! The bundle is checked first (journal chain, bundled files' digests);
//! the pinned commit must be in the local repository (the one `rfs replay`
//! starts in) and is bound whatever HEAD is. The new journal's first fact
//! records what is replayed (`replay_of`: original run id, journal head
//! and sha256). Steps are compared in order by name and exit code (and the
//! stdout log's sha256 with `--strict`).

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use rfs_evidence::attestation::events;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::{Event, ReplayOf};
use rfs_evidence::exit_code;

/// One step as a run journaled it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepFact {
    pub name: String,
    pub exit: Option<i32>,
    /// `false` when the step was refused (nothing ran).
    pub ran: bool,
    /// sha256 of the final attempt's stdout log (silent: of nothing).
    pub stdout_sha256: String,
}

/// What a bundle says about its run.
#[derive(Debug, Clone)]
pub(crate) struct Original {
    /// `None` when the run never bound a source.
    pub origin: Option<ReplayOf>,
    pub run_id: String,
    pub script: PathBuf,
    pub vars: Vec<(String, String)>,
    /// Where the original run started, relative to its repository root.
    pub invocation_rel: Option<PathBuf>,
    pub steps: Vec<StepFact>,
}

/// Read a bundle, refusing one that does not pass `rfs verify` (chain,
/// EVIDENCE.md, files, bundled script and modules, signature, attestation).
pub(crate) fn read_bundle(out: &Path) -> Result<Original> {
    if let Err(f) = rfs_evidence::verify::verify(out) {
        return Err(Error::NotVerified {
            out: out.display().to_string(),
            check: f.check,
            reason: f.reason.to_string(),
        });
    }
    let bad = |why: String| Error::Internal(format!("reading {}: {why}", out.display()));
    let jpath = out.join("journal.jsonl");
    let bytes = std::fs::read(&jpath).map_err(|e| bad(e.to_string()))?;
    let evs = events(&String::from_utf8_lossy(&bytes)).map_err(|e| bad(e.to_string()))?;
    let head = bytes
        .split(|b| *b == b'\n')
        .rfind(|l| !l.is_empty())
        .map(|l| rfs_evidence::journal::line_hash(&String::from_utf8_lossy(l)))
        .unwrap_or_default();
    let Some(Event::RunStart {
        run_id,
        invocation_dir,
        vars,
        bundle,
        ..
    }) = evs.first()
    else {
        return Err(bad("the journal does not start with run.start".into()));
    };
    let manifest = bundle.as_ref().ok_or_else(|| {
        Error::Usage(format!(
            "{} has no bundled script (written by the REPL or an rfs without bundles); nothing to replay",
            out.display()
        ))
    })?;
    if let Some(path) = evs.iter().find_map(|e| match e {
        Event::BundleRedacted { path, .. } => Some(path),
        _ => None,
    }) {
        return Err(Error::Refused(format!(
            "{path} held a secret and was redacted in the bundle, so it cannot replay as it ran; run the original script instead"
        )));
    }
    if let Some(f) = evs.iter().find_map(|e| match e {
        Event::PlacementForked(f) => Some(f),
        _ => None,
    }) {
        return Err(Error::Refused(format!(
            "this run's sandbox started from checkpoint {} of setup run {} (a suite's setup), which a replay of the proof alone cannot recreate; run the suite again with its setup (`rfs test --setup`) at the pinned commit",
            f.checkpoint_id, f.setup_run_id
        )));
    }
    let mut commit = None;
    let mut invocation_rel = None;
    let environment = evs.iter().find_map(|e| match e {
        Event::Placement { environment, .. } => environment.as_deref().cloned(),
        _ => None,
    });
    for e in &evs {
        match e {
            Event::SourceResolved { repo, .. } if invocation_rel.is_none() => {
                invocation_rel = Path::new(invocation_dir)
                    .strip_prefix(repo)
                    .ok()
                    .map(Path::to_path_buf);
            }
            Event::SourcePin { commit: c, .. } if commit.is_none() => commit = Some(c.clone()),
            _ => {}
        }
    }
    Ok(Original {
        origin: commit.map(|commit| ReplayOf {
            run_id: run_id.clone(),
            out_dir: out.display().to_string(),
            journal_head: head,
            journal_sha256: hex::encode(Sha256::digest(&bytes)),
            commit,
            environment,
            allow_other_image: false,
            services: evs
                .iter()
                .filter_map(|e| match e {
                    Event::ServiceStart {
                        name, image_pin, ..
                    } => Some((name.clone(), image_pin.clone())),
                    _ => None,
                })
                .collect(),
        }),
        run_id: run_id.clone(),
        script: out.join(&manifest.script.path),
        vars: vars.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        invocation_rel,
        steps: steps(&evs),
    })
}

/// The steps of a journal that ended or were refused, in order, with
/// their final stdout digests (a view of the journal's one fold).
pub(crate) fn steps(evs: &[Event]) -> Vec<StepFact> {
    use rfs_evidence::outcome::StepOutcome;
    let empty = || rfs_evidence::journal::fold::EMPTY_SHA256.to_owned();
    rfs_evidence::journal::fold::RunSummary::of(evs)
        .steps
        .into_iter()
        .filter_map(|st| {
            let ran = match st.outcome {
                StepOutcome::Passed | StepOutcome::Failed { .. } => true,
                StepOutcome::Refused { .. } => false,
                _ => return None,
            };
            Some(StepFact {
                name: st.name,
                exit: if ran { st.exit } else { None },
                ran,
                stdout_sha256: match (ran, st.stdout_sha256) {
                    (true, Some(d)) => d,
                    _ => empty(),
                },
            })
        })
        .collect()
}

/// One row of the comparison.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub name: String,
    pub original: Option<StepFact>,
    pub replay: Option<StepFact>,
    pub matches: bool,
}

/// Compare step lists in order.
pub(crate) fn compare(original: &[StepFact], replay: &[StepFact], strict: bool) -> Vec<Row> {
    let n = original.len().max(replay.len());
    (0..n)
        .map(|i| {
            let (a, b) = (original.get(i).cloned(), replay.get(i).cloned());
            let matches = match (&a, &b) {
                (Some(a), Some(b)) => {
                    a.name == b.name
                        && a.ran == b.ran
                        && a.exit == b.exit
                        && (!strict || a.stdout_sha256 == b.stdout_sha256)
                }
                _ => false,
            };
            let name = match (&a, &b) {
                (Some(a), Some(b)) if a.name != b.name => format!("{} / {}", a.name, b.name),
                (Some(s), _) | (_, Some(s)) => s.name.clone(),
                _ => unreachable!("one side exists"),
            };
            Row {
                name,
                original: a,
                replay: b,
                matches,
            }
        })
        .collect()
}

/// The table `rfs replay` prints.
pub(crate) fn table(rows: &[Row], strict: bool) -> String {
    let cell = |s: &Option<StepFact>| match s {
        None => "(no step)".to_owned(),
        Some(s) => {
            let exit = match (s.ran, s.exit) {
                (false, _) => "refused".to_owned(),
                (true, Some(e)) => format!("exit {e}"),
                (true, None) => "no exit".to_owned(),
            };
            if strict {
                format!(
                    "{exit}, stdout {}",
                    &s.stdout_sha256[..s.stdout_sha256.len().min(12)]
                )
            } else {
                exit
            }
        }
    };
    let body: Vec<[String; 4]> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            [
                format!("{} {}", i + 1, r.name),
                cell(&r.original),
                cell(&r.replay),
                if r.matches { "same" } else { "DIFFERS" }.to_owned(),
            ]
        })
        .collect();
    let head = ["step", "original", "replay", "result"].map(str::to_owned);
    let mut w = [0usize; 4];
    for r in std::iter::once(&head).chain(&body) {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(&head).chain(&body) {
        let line: Vec<String> = r
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// What `rfs replay` is asked to do.
#[derive(Debug, Clone, Default)]
pub(crate) struct ReplayArgs {
    pub bundle: PathBuf,
    pub provider: Option<String>,
    pub out: Option<PathBuf>,
    pub strict: bool,
    /// Values for variables the original journal redacted.
    pub vars: Vec<String>,
    pub image: Option<String>,
    /// `--allow-other-image`: another image than the original's (said, in `replay_of`).
    pub allow_other_image: bool,
    /// The person's resource ceilings and `--network` (never the original run's).
    pub ceilings: crate::limit_ceilings::CeilingArgs,
    pub network: Option<String>,
}

/// Run a replay; returns the process exit code (0 all steps match, 1 some
/// differ; a replay that could not run returns its run's code).
pub(crate) fn replay(
    a: ReplayArgs,
    reporter: std::sync::Arc<dyn rfs_evidence::events::Reporter>,
) -> Result<i32> {
    let original = read_bundle(&a.bundle)?;
    let repo =
        rfs_sandbox::source::repo::discover(&std::env::current_dir().map_err(Error::internal)?)
            .map_err(|e| {
                Error::Refused(format!("replay needs the repository the run pinned: {e}"))
            })?;
    let root = rfs_sandbox::source::repo::root_of(&repo);
    if let Some(o) = &original.origin {
        let present = git2::Oid::from_str(&o.commit)
            .ok()
            .and_then(|id| repo.find_commit(id).ok())
            .is_some();
        if !present {
            return Err(Error::Refused(format!(
                "commit {} (pinned by run {}) is not in the local repository {}; fetch it (e.g. `git fetch origin {}`) and replay again",
                o.commit,
                o.run_id,
                root.display(),
                o.commit
            )));
        }
    }
    let invocation_dir = match &original.invocation_rel {
        Some(rel) if !rel.as_os_str().is_empty() => {
            // A bundle is data: the repository is the one the person runs
            // `rfs replay` in, and the folder of it the original run
            // started in must be inside it — plain names only, and no
            // link leading out (a sibling clone sharing the commit, a
            // `git worktree`, would otherwise be read by `put()`).
            let plain = rel
                .components()
                .all(|c| matches!(c, std::path::Component::Normal(_)));
            let d = root.join(rel);
            let inside = plain
                && std::fs::canonicalize(&d)
                    .ok()
                    .zip(std::fs::canonicalize(&root).ok())
                    .is_some_and(|(d, r)| d.starts_with(r));
            if d.exists() && !inside || !plain {
                return Err(Error::Refused(format!(
                    "the bundle says the original run started in `{}`, outside the repository {} that rfs replay runs in; a bundle cannot choose another repository",
                    rel.display(),
                    root.display()
                )));
            }
            if !d.is_dir() {
                return Err(Error::Refused(format!(
                    "the original run started in `{}` of its repository, which does not exist in {}",
                    rel.display(),
                    root.display()
                )));
            }
            d
        }
        _ => root.clone(),
    };
    let vars = replay_vars(&original.vars, &a.vars)?;
    let signing_key = rfs_evidence::signing::key::for_run(None)?;
    let mut settings = crate::settings::RunSettings::from_args(crate::settings::RunArgs {
        script: original.script.clone(),
        provider: a.provider.clone(),
        out: a.out.clone(),
        vars,
        image: a.image.clone(),
        ceilings: a.ceilings.clone(),
        network: a.network.clone(),
        ..Default::default()
    })?;
    settings.invocation_dir = invocation_dir;
    let report = crate::runner::run(
        settings,
        crate::runner::Hooks {
            reporter,
            handle_signals: true,
            signing_key,
            replay_of: original.origin.clone().map(|o| ReplayOf {
                allow_other_image: a.allow_other_image,
                ..o
            }),
            ..Default::default()
        },
    );
    if let Some(e) = &report.error {
        errln!("{:?}", miette::Report::new(ReplayRunError(e.to_string())));
    }
    if !matches!(
        report.exit_code,
        exit_code::SUCCESS | exit_code::SCRIPT_FAILED
    ) {
        errln!(
            "rfs replay: the replay could not run to the end (exit {}); nothing compared",
            report.exit_code
        );
        return Ok(report.exit_code);
    }
    let new_journal = std::fs::read_to_string(report.out_dir.join("journal.jsonl"))
        .map_err(|e| Error::Internal(format!("cannot read the replay's journal: {e}")))?;
    let new_steps = steps(&events(&new_journal).map_err(Error::internal)?);
    let rows = compare(&original.steps, &new_steps, a.strict);
    outln!(
        "replay of run {} ({}), evidence in {}",
        original.run_id,
        a.bundle.display(),
        report.out_dir.display()
    );
    out!("{}", table(&rows, a.strict));
    let differ: Vec<_> = rows
        .iter()
        .filter(|r| !r.matches)
        .map(|r| r.name.clone())
        .collect();
    if differ.is_empty() {
        outln!("all {} steps match", rows.len());
        Ok(exit_code::SUCCESS)
    } else {
        outln!("steps that differ: {}", differ.join(", "));
        Ok(exit_code::SCRIPT_FAILED)
    }
}

/// The replay's `--var`s: the original values, except redacted ones,
/// which must be `given` again, and any new variable `given`.
fn replay_vars(original: &[(String, String)], given: &[String]) -> Result<Vec<String>> {
    let given = crate::settings::parse_vars(given)?;
    let mut vars = Vec::new();
    for (k, v) in original {
        match given.get(k) {
            Some(g) => vars.push(format!("{k}={g}")),
            None if v == rfs_evidence::secrets::REDACTED => {
                return Err(Error::Usage(format!(
                    "the original run's variable `{k}` was redacted in its journal; give it with --var {k}=VALUE"
                )))
            }
            None => vars.push(format!("{k}={v}")),
        }
    }
    for (k, v) in &given {
        if !original.iter().any(|(o, _)| o == k) {
            vars.push(format!("{k}={v}"));
        }
    }
    Ok(vars)
}

/// The replayed run's own error, shown before the comparison.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("the replayed run: {0}")]
#[diagnostic(code(rfs::replay))]
struct ReplayRunError(String);

#[cfg(test)]
mod tests;
