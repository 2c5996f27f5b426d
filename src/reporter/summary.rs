//! A run's summary as `--json` prints it last: a view of the journal's
//! one fold ([`RunSummary`]).

use serde::Serialize;

use rfs_evidence::exit_code;
use rfs_evidence::journal::fold::{RunSummary, StepOutcome};

/// One step of the run as it ended.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepSummary {
    pub name: String,
    /// `ok`, `failed`, `refused` or `interrupted` (started, never ended).
    pub status: &'static str,
    /// The last attempt's exit code (`null` when it had none).
    pub exit: Option<i32>,
    pub duration_ms: u64,
    pub attempts: u32,
    /// The commit the step ran under (`null` before any sync).
    pub commit: Option<String>,
    /// What the step used (`memory_peak`, `pids_peak`, `disk_used`),
    /// absent where the provider does not say.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<rfs_sandbox::provider::limits::Usage>,
}

/// The run as a whole (the last `--json` line).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Summary {
    /// `null` when the arguments were refused before a run id existed.
    pub run_id: Option<String>,
    /// `completed`, `failed`, `refused`, `interrupted` or `error` (as
    /// `run.end` says), or `usage` when the arguments were refused before
    /// the run began.
    pub outcome: String,
    pub exit_code: i32,
    pub provider: Option<String>,
    pub sandbox_id: Option<String>,
    pub commit: Option<String>,
    pub tree_digest: Option<String>,
    pub steps: Vec<StepSummary>,
    /// EVIDENCE.md of the run (`null` when the run was refused before its
    /// output directory existed).
    pub evidence: Option<String>,
    /// The network policy and what rfs's proxy carried and refused
    /// (`null` when the journal says nothing of the network).
    pub network: Option<NetworkSummary>,
    /// Why the run is NOT REPRODUCIBLE from its commit alone, as
    /// EVIDENCE.md says it at its top: a shipped working tree, a cache it
    /// used, a cache the setup it forked from used (absent: reproducible).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_reproducible: Vec<String>,
    /// Host folders the person mounted read-only (`--mount-ro`), each
    /// with its digest (empty: none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub host_mounts: Vec<rfs_evidence::events::host_mount_facts::HostMounted>,
}

/// The run's network in the `--json` summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NetworkSummary {
    /// `off`, `public`, `allow` or `host` (`null`: not recorded).
    pub policy: Option<String>,
    /// Whether the sandbox had the network unfiltered.
    pub unfiltered: bool,
    pub connections: usize,
    /// Every refused connection attempt, in order.
    pub refused: Vec<RefusedConnection>,
}

/// A connection rfs's egress proxy refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RefusedConnection {
    pub destination: String,
    pub rule: String,
    pub step: Option<String>,
}

impl Summary {
    /// The summary of `run`, which ended with `exit_code`. A run refused
    /// before its journal existed has no `run.end`, so its outcome comes
    /// from the code (and its id, if any, from `run_id`).
    pub(crate) fn view(run: &RunSummary, run_id: Option<&str>, exit_code: i32) -> Summary {
        let started = !run.run_id.is_empty();
        let pin = run.pin();
        Summary {
            run_id: if started {
                Some(run.run_id.clone())
            } else {
                run_id.map(str::to_owned)
            },
            outcome: match run.outcome {
                Some(o) => o.as_str().to_owned(),
                None => outcome_of_code(exit_code).to_owned(),
            },
            exit_code,
            provider: (!run.provider.is_empty()).then(|| run.provider.clone()),
            sandbox_id: run.sandbox_id.clone(),
            commit: pin.map(|p| p.commit.clone()),
            tree_digest: pin.map(|p| p.tree_digest.clone()),
            steps: run
                .steps
                .iter()
                .map(|st| StepSummary {
                    name: st.name.clone(),
                    status: status(&st.outcome),
                    exit: st.exit,
                    duration_ms: st.duration_ms,
                    attempts: st.attempts,
                    commit: st.commit.clone(),
                    usage: st.usage.clone(),
                })
                .collect(),
            evidence: started.then(|| {
                std::path::Path::new(&run.out_dir)
                    .join("EVIDENCE.md")
                    .display()
                    .to_string()
            }),
            network: network(run),
            not_reproducible: run
                .not_reproducible
                .iter()
                .map(|w| w.describe())
                .chain(rfs_evidence::journal::caches::not_reproducible(
                    &run.caches,
                    run.checkpoints.started_from.as_ref(),
                ))
                .collect(),
            host_mounts: run.host_mounts.clone(),
        }
    }
}

fn network(run: &RunSummary) -> Option<NetworkSummary> {
    let n = &run.network;
    if n.policy.is_none() && n.connections.is_empty() {
        return None;
    }
    Some(NetworkSummary {
        policy: n.policy.as_ref().map(|p| p.policy.clone()),
        unfiltered: n.policy.as_ref().is_some_and(|p| p.unfiltered),
        connections: n.connections.len(),
        refused: n
            .refused()
            .map(|c| RefusedConnection {
                destination: c.destination(),
                rule: c.rule.clone(),
                step: c.step.clone(),
            })
            .collect(),
    })
}

/// A step's `status` word.
fn status(o: &StepOutcome) -> &'static str {
    match o {
        StepOutcome::Passed => "ok",
        StepOutcome::Failed { .. } => "failed",
        StepOutcome::Refused { .. } => "refused",
        StepOutcome::Running
        | StepOutcome::Cancelled { .. }
        | StepOutcome::ProviderFailed { .. }
        | StepOutcome::Unfinished { .. } => "interrupted",
    }
}

/// The outcome of a run that never wrote `run.end`, from its exit code.
fn outcome_of_code(code: i32) -> &'static str {
    match code {
        exit_code::SUCCESS => "completed",
        exit_code::REFUSED => "refused",
        exit_code::USAGE => "usage",
        exit_code::INTERRUPTED => "interrupted",
        exit_code::SCRIPT_FAILED => "failed",
        _ => "error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rfs_evidence::events::Event;

    fn start(name: &str) -> Event {
        Event::StepStart {
            name: name.into(),
            seq: 1,
            command: "true".into(),
            sandbox_id: "sb".into(),
            cwd: String::new(),
            cwd_remote: "/w".into(),
            env: vec![],
            timeout_s: None,
            retries: 1,
            allow_failure: false,
            commit: Some("c0ffee".into()),
            tree_digest: Some("7ree".into()),
        }
    }

    fn attempt(name: &str, attempt: u32, exit: i32, ms: u64) -> Event {
        Event::StepAttempt {
            name: name.into(),
            attempt,
            sandbox_id: "sb".into(),
            exit: Some(exit),
            signal: None,
            timed_out: false,
            cancelled: false,
            duration_ms: ms,
            stdout_log: None,
            stderr_log: None,
            output_tail: None,
            output_cut: None,
        }
    }

    fn fold(events: &[Event]) -> RunSummary {
        RunSummary::of(events)
    }

    #[test]
    fn a_step_that_never_ended_is_reported_interrupted_with_its_attempts() {
        let run = fold(&[
            start("build"),
            attempt("build", 1, 1, 5),
            attempt("build", 2, 1, 7),
        ]);
        let s = Summary::view(&run, Some("r1"), rfs_evidence::exit_code::INTERRUPTED);
        assert_eq!(
            s.steps,
            vec![StepSummary {
                name: "build".into(),
                status: "interrupted",
                exit: Some(1),
                duration_ms: 12,
                attempts: 2,
                commit: Some("c0ffee".into()),
                usage: None,
            }]
        );
        assert_eq!(s.outcome, "interrupted");
        assert_eq!(s.run_id.as_deref(), Some("r1"));
    }

    #[test]
    fn two_steps_of_one_name_are_two_entries() {
        let mut events = vec![];
        for _ in 0..2 {
            events.push(start("t"));
            events.push(Event::StepEnd {
                name: "t".into(),
                ok: true,
                exit: Some(0),
                timed_out: false,
                attempts: 1,
                duration_ms: 3,
                sandbox_id: "sb".into(),
                summary: "exit 0".into(),
                limit: None,
                usage: None,
            });
        }
        let s = Summary::view(&fold(&events), None, 0);
        assert_eq!(s.steps.len(), 2);
        assert!(s.steps.iter().all(|x| x.status == "ok"));
    }

    #[test]
    fn a_refusal_before_the_journal_is_a_refused_outcome() {
        let s = Summary::view(
            &RunSummary::default(),
            None,
            rfs_evidence::exit_code::REFUSED,
        );
        assert_eq!(s.outcome, "refused");
        assert_eq!((s.run_id, s.evidence), (None, None));
    }

    /// `--json` said nothing of reproducibility: a run forked from a setup
    /// that used a cache inherits what the cache did, so its summary says
    /// NOT REPRODUCIBLE, naming the setup's cache (#46 item 7), as its
    /// EVIDENCE.md does.
    #[test]
    fn a_proof_forked_from_a_setup_that_used_a_cache_says_not_reproducible_in_its_json_summary() {
        use rfs_evidence::events::checkpoint_facts::{Forked, SetupCache};
        let forked = |caches: Vec<SetupCache>| {
            rfs_evidence::events::Event::PlacementForked(Forked {
                sandbox_id: "local-2".into(),
                checkpoint_id: "cp-1".into(),
                checkpoint_name: "deps".into(),
                provider: "local".into(),
                setup_run_id: "r0".into(),
                setup_journal_head: "4ead".into(),
                setup_journal: rfs_evidence::events::FileDigest {
                    path: "setup/journal.jsonl".into(),
                    sha256: "0".repeat(64),
                    bytes: 1,
                },
                how: "overlayfs".into(),
                fork_ms: 1,
                setup_caches: caches,
            })
        };
        let clean = RunSummary::of(&[forked(vec![])]);
        assert!(Summary::view(&clean, Some("r1"), 0)
            .not_reproducible
            .is_empty());
        let cached = RunSummary::of(&[forked(vec![SetupCache {
            name: "pip".into(),
            path: "~/.cache/pip".into(),
            sha256: "1".repeat(64),
        }])]);
        let s = Summary::view(&cached, Some("r1"), 0);
        assert_eq!(s.not_reproducible.len(), 1, "{s:?}");
        assert!(
            s.not_reproducible[0].starts_with("NOT REPRODUCIBLE from the commit alone")
                && s.not_reproducible[0].contains("setup run r0")
                && s.not_reproducible[0].contains("the cache pip at ~/.cache/pip"),
            "{s:?}"
        );
        let json = serde_json::to_value(&s).unwrap();
        assert_eq!(json["not_reproducible"][0], s.not_reproducible[0].as_str());
    }
}
