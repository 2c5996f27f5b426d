//! `rfs gc`: find sandboxes rfs created whose owning process is gone
//! (same host, pid not running or reused) and destroy them, verified.
//! Sandboxes of live owners and of other hosts are left alone.

use std::time::Duration;

use crate::runtime::teardown::destroy_verified;
use rfs_sandbox::provider::owner::{owner_liveness, Liveness};
use rfs_sandbox::provider::{labels, Provider, ProviderError};

/// What gc decided about one sandbox.
#[derive(Debug, Clone)]
pub(crate) struct GcEntry {
    pub provider: String,
    pub id: String,
    pub run_id: String,
    pub action: GcAction,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum GcAction {
    /// Owner alive: kept.
    KeptAlive,
    /// Owner cannot be judged from here: kept.
    KeptUnknown(String),
    /// Orphan listed (dry run).
    WouldDestroy(String),
    /// Orphan destroyed and verified gone.
    Destroyed(String),
    /// Orphan whose destruction failed or could not be verified.
    Failed(String),
}

/// An `--older-than` value that is not an age.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum AgeError {
    #[error("--older-than `{0}` is not a number with a unit (s, m, h, d)")]
    NotANumber(String),
    #[error("--older-than `{value}`: unknown unit `{unit}` (use s, m, h or d)")]
    UnknownUnit { value: String, unit: String },
    #[error("--older-than `{0}` is too large")]
    TooLarge(String),
}

/// Why gc could not look at a provider's sandboxes at all.
#[derive(Debug, thiserror::Error)]
#[error("listing sandboxes on {provider}: {source}")]
pub(crate) struct ListError {
    pub provider: String,
    #[source]
    pub source: ProviderError,
}

/// Parse an `--older-than` age: a number with a unit `s`, `m`, `h` or `d`
/// (`90m`, `2h`, `1d`); a bare number is seconds.
pub(crate) fn parse_age(s: &str) -> Result<Duration, AgeError> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = num.parse().map_err(|_| AgeError::NotANumber(s.into()))?;
    let mult = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => {
            return Err(AgeError::UnknownUnit {
                value: s.into(),
                unit: unit.into(),
            })
        }
    };
    n.checked_mul(mult)
        .map(Duration::from_secs)
        .ok_or_else(|| AgeError::TooLarge(s.into()))
}

/// How long ago the sandbox's `relayflows/started-at` label says it started.
pub(crate) fn age(l: &labels::Labels) -> Option<Duration> {
    let at = l.get(labels::STARTED_AT)?;
    let t = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()?;
    let secs = (time::OffsetDateTime::now_utc() - t).whole_seconds();
    u64::try_from(secs).ok().map(Duration::from_secs)
}

/// What to do about a sandbox whose owner cannot be judged from here (it
/// ran on another host, or left no usable owner labels): keep it, unless
/// `--older-than` was given and its start label is older than that
/// (`Gone`, with the reason); otherwise it stays `Unknown`, saying why.
fn judge_unknown(why: String, l: &labels::Labels, older_than: Option<Duration>) -> Liveness {
    match (older_than, age(l)) {
        (None, _) => Liveness::Unknown(format!("{why}; not destroyed without --older-than")),
        (Some(limit), Some(a)) if a > limit => Liveness::Gone(format!(
            "{why}, but it started {}s ago, longer than --older-than {}s",
            a.as_secs(),
            limit.as_secs()
        )),
        (Some(limit), Some(a)) => Liveness::Unknown(format!(
            "{why}; it started {}s ago, not longer than --older-than {}s",
            a.as_secs(),
            limit.as_secs()
        )),
        (Some(_), None) => Liveness::Unknown(format!(
            "{why}; it has no readable started-at label, so its age is unknown"
        )),
    }
}

/// [`collect`], destroying sandboxes of owners that cannot be judged when
/// they are older than `older_than`; the sandboxes first, then the
/// checkpoints (which a sandbox forked from one may be using).
pub(crate) async fn collect_older_than(
    p: &dyn Provider,
    dry_run: bool,
    older_than: Option<Duration>,
) -> Result<Vec<GcEntry>, ListError> {
    let list = p
        .list(&labels::rfs_selector())
        .await
        .map_err(|source| ListError {
            provider: p.name().to_owned(),
            source,
        })?;
    let mut out = vec![];
    for s in list {
        let liveness = match owner_liveness(&s.labels) {
            Liveness::Unknown(why) => judge_unknown(why, &s.labels, older_than),
            l => l,
        };
        let action = match liveness {
            Liveness::Alive => GcAction::KeptAlive,
            Liveness::Unknown(why) => GcAction::KeptUnknown(why),
            Liveness::Gone(why) if dry_run => GcAction::WouldDestroy(why),
            Liveness::Gone(why) => {
                match destroy_verified(p, &s.id, Duration::from_secs(60)).await {
                    Ok(proof) => GcAction::Destroyed(format!(
                        "{why}; verified gone after {}, {} ms",
                        rfs_evidence::plural::count(proof.polls, "poll", "polls"),
                        proof.elapsed_ms
                    )),
                    Err(e) => GcAction::Failed(e.to_string()),
                }
            }
        };
        out.push(GcEntry {
            provider: p.name().to_owned(),
            run_id: s.labels.get(labels::RUN_ID).cloned().unwrap_or_default(),
            id: s.id,
            action,
        });
    }
    // Checkpoints after the sandboxes: a fork still running from one (a
    // docker container of a committed image) keeps it in use, and its
    // removal would fail until a second gc.
    out.extend(collect_checkpoints(p, dry_run, older_than).await?);
    Ok(out)
}

/// The checkpoints (#36) a provider keeps apart from its sandboxes
/// (a local folder, a docker image), judged by their owner as sandboxes
/// are, removed and verified gone.
async fn collect_checkpoints(
    p: &dyn Provider,
    dry_run: bool,
    older_than: Option<Duration>,
) -> Result<Vec<GcEntry>, ListError> {
    let Some(fork) = p.forking() else {
        return Ok(vec![]);
    };
    let list = fork.list_checkpoints().await.map_err(|source| ListError {
        provider: p.name().to_owned(),
        source,
    })?;
    let mut out = vec![];
    for (id, l) in list {
        let liveness = match owner_liveness(&l) {
            Liveness::Unknown(why) => judge_unknown(why, &l, older_than),
            other => other,
        };
        let action = match liveness {
            Liveness::Alive => GcAction::KeptAlive,
            Liveness::Unknown(why) => GcAction::KeptUnknown(why),
            Liveness::Gone(why) if dry_run => GcAction::WouldDestroy(format!("checkpoint: {why}")),
            Liveness::Gone(why) => {
                let r =
                    crate::runtime::checkpoint::remove_verified(p, &id, Duration::from_secs(60))
                        .await;
                if r.verified {
                    GcAction::Destroyed(format!("checkpoint: {why}; {}", r.detail))
                } else {
                    GcAction::Failed(format!("checkpoint {id}: {}", r.detail))
                }
            }
        };
        out.push(GcEntry {
            provider: p.name().to_owned(),
            run_id: l.get(labels::RUN_ID).cloned().unwrap_or_default(),
            id,
            action,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod older_than_tests {
    use super::*;

    #[test]
    fn ages_parse_with_units() {
        assert_eq!(parse_age("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_age("2h").unwrap(), Duration::from_secs(7200));
        assert_eq!(parse_age("1d").unwrap(), Duration::from_secs(86400));
        assert!(parse_age("h").is_err());
        assert!(matches!(
            parse_age("5w"),
            Err(AgeError::UnknownUnit { unit, .. }) if unit == "w"
        ));
    }

    #[test]
    fn another_hosts_sandbox_is_kept_unless_older_than_asked() {
        let mut l = labels::Labels::new();
        l.insert(labels::STARTED_AT.into(), "2020-01-01T00:00:00.000Z".into());
        let Liveness::Unknown(kept) = judge_unknown("owned by host h2".into(), &l, None) else {
            panic!("an unknown owner without --older-than must be kept")
        };
        assert!(
            kept.contains("not destroyed without --older-than"),
            "{kept}"
        );
        let Liveness::Gone(gone) =
            judge_unknown("owned by host h2".into(), &l, Some(Duration::from_secs(60)))
        else {
            panic!("a sandbox older than --older-than must be judged gone")
        };
        assert!(gone.contains("longer than --older-than 60s"), "{gone}");
        l.insert(
            labels::STARTED_AT.into(),
            rfs_evidence::journal::now_rfc3339(),
        );
        let Liveness::Unknown(young) = judge_unknown(
            "owned by host h2".into(),
            &l,
            Some(Duration::from_secs(3600)),
        ) else {
            panic!("a young sandbox must be kept")
        };
        assert!(young.contains("not longer than"), "{young}");
    }
}
