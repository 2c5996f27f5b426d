//! `attestation.intoto.json`: an in-toto Statement v1 about a run, in a
//! DSSE envelope ([`dsse`]).
//!
//! The subject is the synced source (`gitCommit` and `gitTree` digests);
//! the predicate is an in-toto test result (`test-result/v0.1`: result,
//! configuration = the script and its modules with sha256, passed/warned/
//! failed step names) plus a `run` object with each step's exit and
//! duration, the outcome, provider, sandbox id, rfs version, script digest,
//! the journal's sha256 and, on docker, the image by id as a resolved
//! dependency (`resolvedDependencies`). The statement is derived from the journal
//! alone ([`statement`]), so `rfs verify` re-derives it and compares.

pub mod dsse;
mod error;

pub use error::AttestationError;

use std::path::Path;

use serde_json::{json, Value};
use sha2::{Digest, Sha256};

use crate::events::Event;
use crate::journal::fold::{RunOutcome, RunSummary, StepOutcome};
use crate::signing::SigningKey;

/// The attestation file in a run's output directory.
pub const FILE: &str = "attestation.intoto.json";
pub const STATEMENT_TYPE: &str = "https://in-toto.io/Statement/v1";
pub const PREDICATE_TYPE: &str = "https://in-toto.io/attestation/test-result/v0.1";

/// The journal's events, in order (`text` is `journal.jsonl`).
pub fn events(text: &str) -> Result<Vec<Event>, AttestationError> {
    let last = text.split_terminator('\n').count();
    let cut = !text.is_empty() && !text.ends_with('\n');
    text.split_terminator('\n')
        .enumerate()
        .map(|(i, l)| {
            let line: crate::journal::Line = serde_json::from_str(l).map_err(|source| {
                if cut && i + 1 == last && source.is_eof() {
                    AttestationError::Incomplete { line: i + 1 }
                } else {
                    AttestationError::NotAnEntry {
                        line: i + 1,
                        source,
                    }
                }
            })?;
            Event::from_kind_payload(&line.kind, &line.payload).map_err(|source| {
                AttestationError::UnknownEntry {
                    line: i + 1,
                    kind: line.kind.clone(),
                    source,
                }
            })
        })
        .collect()
}

/// The in-toto Statement for the journal `journal` (its exact bytes).
pub fn statement(journal: &[u8]) -> Result<Value, AttestationError> {
    let text = std::str::from_utf8(journal).map_err(|_| AttestationError::JournalNotUtf8)?;
    let evs = events(text)?;
    let Some(Event::RunStart {
        run_id,
        script,
        provider,
        rfs_version,
        ..
    }) = evs.first()
    else {
        return Err(AttestationError::NoRunStart);
    };
    let run = RunSummary::of(&evs);
    let TestResults {
        steps,
        passed,
        warned,
        failed,
    } = test_results(&run);
    let outcome = run.outcome.map_or(Value::Null, |o| json!(o.as_str()));
    let script_digest = run.script_sha256.as_ref().map(|d| json!({ "sha256": d }));
    let configuration: Vec<Value> = run
        .bundle
        .iter()
        .map(|f| json!({ "name": f.path, "digest": { "sha256": f.sha256 } }))
        .collect();
    let result = if run.outcome != Some(RunOutcome::Completed) || !failed.is_empty() {
        "FAILED"
    } else if !warned.is_empty() {
        "WARNED"
    } else {
        "PASSED"
    };
    let subject = subject(&run, script, script_digest.clone());
    let sandbox_id = run.sandbox_id;
    let lines = text.split_terminator('\n').collect::<Vec<_>>();
    let head = lines
        .last()
        .map(|l| crate::journal::line_hash(l))
        .unwrap_or_default();
    let mut st = json!({
        "_type": STATEMENT_TYPE,
        "subject": [subject],
        "predicateType": PREDICATE_TYPE,
        "predicate": {
            "result": result,
            "configuration": configuration,
            "passedTests": passed,
            "warnedTests": warned,
            "failedTests": failed,
            "run": {
                "id": run_id,
                "outcome": outcome,
                "provider": provider,
                "sandboxId": sandbox_id,
                "rfsVersion": rfs_version,
                "scriptDigest": script_digest,
                "journal": { "sha256": hex::encode(Sha256::digest(journal)), "lines": lines.len(), "head": head },
                "steps": steps,
            },
        },
    });
    // The image the sandbox ran, by content (absent before rfs pinned
    // images, so older bundles re-derive as they were).
    if let (Some(deps), Some(r)) = (
        resolved_dependencies(&evs),
        st.pointer_mut("/predicate/run"),
    ) {
        r["resolvedDependencies"] = deps;
    }
    // `--allow-dirty`: said in the signed statement itself.
    if let (Some(w), Some(r)) = (&run.not_reproducible, st.pointer_mut("/predicate/run")) {
        r["reproducible"] = json!(false);
        r["workingTreeOf"] =
            json!({ "gitCommit": w.base_commit, "uncommittedPaths": w.uncommitted_paths });
    }
    Ok(st)
}

/// Each ended step as the statement lists it, and the names of those
/// that passed, failed but were allowed to, and failed.
struct TestResults {
    steps: Vec<Value>,
    passed: Vec<String>,
    warned: Vec<String>,
    failed: Vec<String>,
}

fn test_results(run: &RunSummary) -> TestResults {
    let mut steps = vec![];
    let (mut passed, mut warned, mut failed) = (vec![], vec![], vec![]);
    for st in &run.steps {
        let result = match &st.outcome {
            StepOutcome::Passed => {
                passed.push(st.name.clone());
                "passed"
            }
            StepOutcome::Failed { allowed: true, .. } => {
                warned.push(st.name.clone());
                "failed-allowed"
            }
            StepOutcome::Failed { .. } => {
                failed.push(st.name.clone());
                "failed"
            }
            StepOutcome::Refused { .. } => {
                failed.push(st.name.clone());
                steps.push(json!({ "name": st.name, "result": "refused", "exit": null }));
                continue;
            }
            // Never ended: not a test result (the run's outcome says why).
            _ => continue,
        };
        steps.push(json!({
            "name": st.name, "result": result, "exit": st.exit, "timedOut": st.timed_out,
            "attempts": st.attempts, "durationMs": st.duration_ms,
        }));
    }
    TestResults {
        steps,
        passed,
        warned,
        failed,
    }
}

/// What the run is about: the pinned source's commit and tree, or the
/// script when no source was bound.
fn subject(run: &RunSummary, script: &str, script_digest: Option<Value>) -> Value {
    match run.pins.first() {
        Some(pin) => {
            let name = run
                .repo
                .as_deref()
                .and_then(|r| Path::new(r).file_name())
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_else(|| "source".into());
            json!({ "name": name, "digest": { "gitCommit": pin.commit, "gitTree": pin.tree_digest } })
        }
        // No source was bound: the script is what the run is about.
        None => json!({ "name": script, "digest": script_digest.unwrap_or(json!({})) }),
    }
}

/// The docker images the run used, as in-toto resource descriptors: the
/// placement's (the sandbox's) first, then each service's (`service.start`,
/// annotated with the service's name) — the name asked for, the id's
/// sha256 and, where the daemon knows any, its repository digests.
fn resolved_dependencies(evs: &[Event]) -> Option<Value> {
    let placement = evs.iter().find_map(|e| match e {
        Event::Placement {
            image, environment, ..
        } => Some(image_dependency(
            image.clone(),
            environment.as_ref()?.image.as_ref()?,
        )),
        _ => None,
    });
    let services = evs.iter().filter_map(|e| match e {
        Event::ServiceStart {
            name,
            image,
            image_pin,
            ..
        } => {
            let mut dep = image_dependency(Some(image.clone()), image_pin);
            dep["annotations"]["service"] = json!(name);
            Some(dep)
        }
        _ => None,
    });
    let deps: Vec<Value> = placement.into_iter().chain(services).collect();
    (!deps.is_empty()).then(|| json!(deps))
}

/// One docker image as an in-toto resource descriptor.
fn image_dependency(name: Option<String>, pin: &crate::events::ImagePin) -> Value {
    let hex = pin.id.strip_prefix("sha256:").unwrap_or(&pin.id);
    let mut dep = json!({
        "name": name.unwrap_or_else(|| pin.id.clone()),
        "uri": format!("docker-image:{}", pin.id),
        "digest": { "sha256": hex },
    });
    if !pin.repo_digests.is_empty() {
        dep["annotations"] = json!({ "repoDigests": pin.repo_digests });
    }
    dep
}

/// Build the attestation for `journal` (the exact bytes of `out_dir`'s
/// journal, read once by the caller) and write it there, signed with `key`
/// when given.
pub fn write(
    out_dir: &Path,
    journal: &[u8],
    key: Option<&SigningKey>,
) -> Result<(), AttestationError> {
    let st = statement(journal)?;
    let payload = serde_json::to_vec(&st).map_err(AttestationError::Encoding)?;
    let env = dsse::seal(dsse::INTOTO_PAYLOAD_TYPE, &payload, key)?;
    let mut text = serde_json::to_string_pretty(&env).map_err(AttestationError::Encoding)?;
    text.push('\n');
    write_atomic(&out_dir.join(FILE), text.as_bytes())
}

/// The bytes of `out_dir`'s journal.
pub fn read_journal(out_dir: &Path) -> Result<Vec<u8>, AttestationError> {
    crate::out_dir::read_regular(out_dir, "journal.jsonl", crate::out_dir::MAX_RECORD_BYTES)
        .map_err(|source| AttestationError::Unreadable {
            what: "the journal".into(),
            source,
        })
}

/// Write through a temporary file and rename.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), AttestationError> {
    let tmp = path.with_extension("tmp");
    crate::out_dir::replace(path, &tmp, bytes).map_err(|source| AttestationError::Unwritable {
        path: path.display().to_string(),
        source,
    })
}

/// What [`check`] found.
#[derive(Debug)]
pub struct Checked {
    pub signed: bool,
    pub steps: usize,
}

/// Check `out_dir`'s attestation: it must be a DSSE envelope of an in-toto
/// Statement equal to the one `journal` (the bytes `rfs verify` checked) gives, and signed by `key` when
/// one is given (unsigned attestations are accepted only without a key).
pub fn check(
    out_dir: &Path,
    journal: &[u8],
    key: Option<&ssh_key::PublicKey>,
) -> Result<Checked, AttestationError> {
    let text = crate::out_dir::read_regular(out_dir, FILE, crate::out_dir::MAX_RECORD_BYTES)
        .and_then(|b| {
            String::from_utf8(b)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .map_err(|source| AttestationError::Unreadable {
            what: FILE.into(),
            source,
        })?;
    let env: dsse::Envelope = serde_json::from_str(&text)
        .map_err(|source| AttestationError::NotAnEnvelope { file: FILE, source })?;
    if env.payload_type != dsse::INTOTO_PAYLOAD_TYPE {
        return Err(AttestationError::PayloadType {
            file: FILE,
            found: env.payload_type,
            expected: dsse::INTOTO_PAYLOAD_TYPE,
        });
    }
    let payload = match key {
        Some(k) => env.verify(k)?,
        None => env.payload_bytes()?,
    };
    let claimed: Value = serde_json::from_slice(&payload)
        .map_err(|source| AttestationError::PayloadNotJson { file: FILE, source })?;
    let expected = statement(journal)?;
    if claimed != expected {
        return Err(AttestationError::Differs {
            file: FILE,
            difference: first_difference(&expected, &claimed, "statement"),
        });
    }
    let steps = expected["predicate"]["run"]["steps"]
        .as_array()
        .map_or(0, Vec::len);
    Ok(Checked {
        signed: key.is_some(),
        steps,
    })
}

/// The first path where two JSON values differ, for a readable error.
fn first_difference(want: &Value, got: &Value, at: &str) -> String {
    match (want, got) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, v) in a {
                match b.get(k) {
                    None => return format!("{at}.{k} is missing"),
                    Some(w) if w != v => return first_difference(v, w, &format!("{at}.{k}")),
                    _ => {}
                }
            }
            match b.keys().find(|k| !a.contains_key(*k)) {
                Some(k) => format!("{at}.{k} is not in the journal"),
                None => format!("{at} differs"),
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => a
            .iter()
            .zip(b)
            .enumerate()
            .find(|(_, (x, y))| x != y)
            .map(|(i, (x, y))| first_difference(x, y, &format!("{at}[{i}]")))
            .unwrap_or_else(|| format!("{at} differs")),
        _ => format!("{at} is {got}, the journal says {want}"),
    }
}
