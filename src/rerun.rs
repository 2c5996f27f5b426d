//! `rfs run --watch`: the inner loop. One run, one sandbox; the proof
//! runs, then again on each change: a new commit (the committed tree
//! ships; uncommitted edits are journaled as not shipped), or with
//! `--allow-dirty` any change of the working tree; also an edit of the
//! proof itself, whose new text is bundled for that pass. The source
//! moves by incremental re-sync. Ctrl-C ends it (the sandbox is removed
//! and verified gone, as for every run).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::Run;
use crate::script::{self, Script};
use rfs_evidence::error::Error;
use rfs_evidence::outcome::RunOutcome;

/// How often the repository and the proof are looked at.
const POLL: Duration = Duration::from_millis(300);

/// The body of a watching run.
pub(crate) fn body(vars: std::collections::BTreeMap<String, String>) -> crate::runner::Body {
    Box::new(move |run, script, engine, ast| {
        let mut pass = 1;
        let mut seen = fingerprint(run, &script.path);
        let mut current: Option<(Script, rhai::AST)> = None;
        let mut engine = Some(engine);
        loop {
            let outcome = run.follow_head().and_then(|()| {
                let e = match engine.take() {
                    Some(e) => e,
                    None => script::run_engine(run, script, vars.clone())?,
                };
                match &current {
                    Some((s, a)) => script::execute(run, s, e, a),
                    None => script::execute(run, script, e, ast),
                }
            });
            let word = match outcome {
                Ok(()) => "passed",
                Err(e) => match e.outcome() {
                    RunOutcome::Interrupted | RunOutcome::Error => return Err(e),
                    o => {
                        errln!("{:?}", miette::Report::new(e));
                        o.as_str()
                    }
                },
            };
            errln!(
                "rfs: watch pass {pass} {word}; watching {} and {} for changes (Ctrl-C ends)",
                if run.cfg.allow_dirty {
                    "the working tree"
                } else {
                    "the commits"
                },
                script.path.display()
            );
            // Wait for a change, then for it to settle.
            loop {
                sleep(run, POLL)?;
                let now = fingerprint(run, &script.path);
                if now != seen {
                    sleep(run, POLL)?;
                    seen = fingerprint(run, &script.path);
                    break;
                }
            }
            pass += 1;
            current = match reload(run, &script.path, pass) {
                Ok(Some(next)) => Some(next),
                Ok(None) => current,
                Err(e) => {
                    errln!("{:?}", miette::Report::new(e));
                    errln!("rfs: the proof does not compile; watching for the next change");
                    continue;
                }
            };
        }
    })
}

/// The script's text again, when it changed: compiled, and bundled for
/// this pass (`bundle/watch/pass-N/…`) so the journal holds what ran.
fn reload(run: &Arc<Run>, path: &Path, pass: u32) -> Result<Option<(Script, rhai::AST)>, Error> {
    if path == Path::new(script::STDIN) {
        return Ok(None);
    }
    let s = Script::load(path)?;
    let bundled = run
        .cfg
        .bundle
        .as_ref()
        .is_some_and(|b| b.script.sha256 == sha256(s.source.text.as_bytes()));
    let ast = script::compile(&script::base_engine(&s.dir)?, &s)?;
    if !bundled {
        let name = path
            .file_name()
            .map_or("script.rhai".into(), |n| n.to_string_lossy().into_owned());
        run.bundle_text(
            &format!("watch/pass-{pass}/{name}"),
            &format!("<watch pass {pass}>"),
            &s.source.text,
        )
        .map_err(Error::Internal)?;
    }
    Ok(Some((s, ast)))
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    hex::encode(sha2::Sha256::digest(bytes))
}

/// What a change is: HEAD, the working tree's changed paths (with their
/// size and time) when it ships, and the script's text.
fn fingerprint(run: &Run, script: &Path) -> String {
    let mut f = std::fs::read(script)
        .map(|b| sha256(&b))
        .unwrap_or_default();
    let dir: PathBuf = run.cfg.invocation_dir.clone();
    let Ok(repo) = git2::Repository::discover(&dir) else {
        return f;
    };
    if let Ok(h) = repo.head().and_then(|h| h.peel_to_commit()) {
        f.push_str(&h.id().to_string());
    }
    if run.cfg.allow_dirty {
        let mut so = git2::StatusOptions::new();
        so.include_untracked(true).recurse_untracked_dirs(true);
        if let (Ok(st), Some(root)) = (repo.statuses(Some(&mut so)), repo.workdir()) {
            for e in st.iter() {
                let p = String::from_utf8_lossy(e.path_bytes()).into_owned();
                let m = std::fs::symlink_metadata(root.join(&p)).ok();
                let stamp = m.map(|m| (m.len(), m.modified().ok())).unwrap_or_default();
                f.push_str(&format!("|{p}:{:?}:{stamp:?}", e.status()));
            }
        }
    }
    f
}

fn sleep(run: &Run, d: Duration) -> Result<(), Error> {
    std::thread::sleep(d);
    if run.is_cancelled() {
        return Err(Error::Interrupted);
    }
    Ok(())
}
