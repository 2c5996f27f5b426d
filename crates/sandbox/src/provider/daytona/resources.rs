//! Resource limits on Daytona: a sandbox's `cpu`, `memory` and `disk`.
//!
//! Daytona reserves each sandbox whole cpus and whole GiB of memory and
//! disk, and enforces them (its runner's cgroup and disk quota). A sandbox
//! created from a snapshot — the only way rfs creates one — gets the
//! snapshot's resources: the API refuses `cpu`, `memory` or `disk` on a
//! create request that names a snapshot ("Cannot specify Sandbox resources
//! when using a snapshot"; they are only accepted when building from an
//! image). So rfs holds a limit by checking what the created sandbox has
//! (its `Sandbox` object's `cpu`, `memory`, `disk`), before any step runs:
//! more than the limit, and the sandbox is destroyed (verified) and the run
//! refused, naming both. `pids` has no Daytona field and stays refused.

use super::dto::SandboxDto;
use crate::provider::limits::{Limit, LimitKind, Limits, LimitsError, LimitsFact, LimitsRequest};

const GIB: u64 = 1 << 30;

/// How the limits are held, as the placement fact says.
pub const BY: &str = "the Daytona sandbox's resources (checked after create)";

/// Why a default cap is not Daytona's to hold.
fn default_not_enforced(l: &Limit) -> String {
    let why = match l.kind {
        LimitKind::Pids => "Daytona has no process limit",
        _ => "a Daytona sandbox has its snapshot's own disk size; rfs holds a disk limit only when one is asked for",
    };
    format!("{} ({why})", l.describe())
}

/// Why `l` cannot be held on Daytona, or `None` when it can.
fn unholdable(l: &Limit) -> Option<String> {
    match l.kind {
        LimitKind::Pids => Some("the Daytona API has no process limit (a sandbox's resources are cpu, memory and disk)".into()),
        LimitKind::Cpus if !l.value.is_multiple_of(1000) => Some(format!(
            "Daytona gives a sandbox whole cpus; ask for a whole number (e.g. `cpus: {}`), rfs never rounds a limit",
            (l.value / 1000).max(1)
        )),
        LimitKind::Memory | LimitKind::Disk if l.value < GIB || !l.value.is_multiple_of(GIB) => {
            let whole = (l.value / GIB).max(1);
            Some(format!(
                "Daytona gives a sandbox whole GiB of {} (at least 1 GiB); ask for a whole number of GiB (e.g. `{}: \"{whole}G\"`), rfs never rounds a limit",
                l.kind.key(),
                l.kind.key()
            ))
        }
        _ => None,
    }
}

/// What Daytona holds of `req`: `cpus`, `memory` and `disk` in whole
/// units; a `pids` limit or a value in other units that someone asked
/// for is refused; rfs's default caps are journaled as not enforced.
pub fn decide(req: &LimitsRequest) -> Result<LimitsFact, LimitsError> {
    let mut fact = LimitsFact {
        enforced: vec![],
        by: BY.into(),
        not_enforced: vec![],
        ceilings: vec![],
    };
    for l in &req.limits {
        if l.is_default() {
            fact.not_enforced.push(default_not_enforced(l));
            continue;
        }
        if let Some(why) = unholdable(l) {
            return Err(LimitsError::Unenforceable {
                provider: "daytona".into(),
                kind: l.kind,
                value: l.kind.show(l.value),
                by: l.by.clone(),
                why,
            });
        }
        fact.enforced.push(l.clone());
    }
    if fact.enforced.is_empty() {
        fact.by.clear();
    }
    Ok(fact)
}

/// The limits asked for (not rfs's defaults) that Daytona holds.
pub fn asked(req: &LimitsRequest) -> Limits {
    let mut l = Limits::default();
    for x in req.limits.iter().filter(|x| !x.is_default()) {
        match x.kind {
            LimitKind::Cpus => l.cpus = Some(x.value),
            LimitKind::Memory => l.memory = Some(x.value),
            LimitKind::Disk => l.disk = Some(x.value),
            LimitKind::Pids => {}
        }
    }
    l
}

/// Why sandbox `dto` breaks a limit of `want`, or `None` when it has at
/// most what each limit allows. A resource the server does not report
/// counts as broken (fail closed).
pub fn exceeded(dto: &SandboxDto, want: &Limits) -> Option<String> {
    let mut over = vec![];
    for (kind, limit, have, unit) in [
        (LimitKind::Cpus, want.cpus, &dto.cpu, 1000),
        (LimitKind::Memory, want.memory, &dto.memory, GIB),
        (LimitKind::Disk, want.disk, &dto.disk, GIB),
    ] {
        let Some(limit) = limit else { continue };
        // In the limit's unit; a value that is not a non-negative number
        // counts as not reported.
        let have = have
            .as_ref()
            .and_then(serde_json::Value::as_f64)
            .filter(|h| h.is_finite() && *h >= 0.0)
            .map(|h| (h * unit as f64).ceil() as u64);
        match have {
            None => over.push(format!(
                "the server did not report its `{}`, so the {} cannot be checked",
                api_field(kind),
                kind.noun()
            )),
            Some(h) if h > limit => over.push(format!(
                "it has {} {}, above the {} {}",
                kind.key(),
                kind.show(h),
                kind.noun(),
                kind.show(limit)
            )),
            Some(_) => {}
        }
    }
    (!over.is_empty()).then(|| over.join("; "))
}

fn api_field(kind: LimitKind) -> &'static str {
    match kind {
        LimitKind::Cpus => "cpu",
        LimitKind::Memory => "memory",
        _ => "disk",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(kind: LimitKind, value: u64) -> LimitsRequest {
        LimitsRequest {
            limits: vec![Limit {
                kind,
                value,
                by: "the script".into(),
            }],
            ceilings: vec![],
        }
    }

    #[test]
    fn whole_units_are_held_and_others_refused_never_rounded() {
        assert!(decide(&req(LimitKind::Cpus, 2000)).is_ok());
        assert!(decide(&req(LimitKind::Memory, 4 * GIB)).is_ok());
        for (k, v) in [
            (LimitKind::Cpus, 1500),
            (LimitKind::Cpus, 500),
            (LimitKind::Memory, 512 << 20),
            (LimitKind::Disk, GIB + (1 << 20)),
            (LimitKind::Pids, 64),
        ] {
            assert!(decide(&req(k, v)).is_err(), "{k} {v}");
        }
        let d = decide(&LimitsRequest::default()).unwrap();
        assert!(d.enforced.is_empty() && d.not_enforced.len() == 2, "{d:?}");
    }

    #[test]
    fn a_sandbox_with_more_than_a_limit_breaks_it() {
        let dto: SandboxDto = serde_json::from_value(
            serde_json::json!({"id": "x", "cpu": 1, "memory": 1, "disk": 3}),
        )
        .unwrap();
        let fits = Limits {
            cpus: Some(2000),
            memory: Some(GIB),
            disk: Some(10 * GIB),
            pids: None,
        };
        assert_eq!(exceeded(&dto, &fits), None);
        let small = Limits {
            disk: Some(2 * GIB),
            ..fits
        };
        let why = exceeded(&dto, &small).unwrap();
        assert!(
            why.contains("disk 3 GiB, above the disk limit 2 GiB"),
            "{why}"
        );
        let unreported: SandboxDto =
            serde_json::from_value(serde_json::json!({"id": "x", "cpu": "two"})).unwrap();
        assert!(exceeded(&unreported, &fits).is_some());
        let fractional: SandboxDto = serde_json::from_value(
            serde_json::json!({"id": "x", "cpu": 2.5, "memory": 0.5, "disk": 3}),
        )
        .unwrap();
        let why = exceeded(&fractional, &fits).unwrap();
        assert!(
            why.contains("cpus 2.5 cpus, above the cpu limit 2 cpus"),
            "{why}"
        );
    }
}
