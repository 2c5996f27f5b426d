//! What `local` enforces of a sandbox's resource limits (cgroups and a
//! size-capped tmpfs), and reading them back: limits reached, a full disk.

use std::sync::Arc;

use super::{cgroup, disk, LocalProvider};
use crate::provider::{ProviderError, ProviderResult};

impl LocalProvider {
    /// The cgroups of sandbox `id` (`None`: it has none); those of a
    /// sandbox of another rfs process are opened from its `meta.json`,
    /// and refused when they are gone (its limits would not hold).
    pub(super) fn cgroup_of(&self, id: &str) -> ProviderResult<Option<Arc<cgroup::Cgroup>>> {
        if let Some(cg) = self.cgroups.lock().expect("cgroups lock").get(id) {
            return Ok(Some(cg.clone()));
        }
        let Some(known) = self.read_meta(id)? else {
            return Ok(None);
        };
        if known.cgroups.is_empty() {
            return Ok(None);
        }
        let cg = cgroup::Cgroup::open(&known.cgroups).map_err(|e| {
            ProviderError::NotStarted(format!(
                "sandbox {id}'s resource limits cannot be enforced: {e}"
            ))
        })?;
        let cg = Arc::new(cg);
        self.cgroups
            .lock()
            .expect("cgroups lock")
            .insert(id.to_owned(), cg.clone());
        Ok(Some(cg))
    }

    /// The size of sandbox `id`'s own disk (`None`: it has none).
    pub(super) fn disk_cap(&self, id: &str) -> Option<u64> {
        match self.infos.lock().expect("infos lock").get(id) {
            Some(k) => k.disk,
            None => self.read_meta(id).ok().flatten().and_then(|k| k.disk),
        }
    }

    /// The disk limit of sandbox `id` when its disk is full.
    pub(super) fn disk_full(&self, id: &str) -> Option<crate::provider::limits::LimitHit> {
        let cap = self.disk_cap(id)?;
        let (_, full) = disk::usage(&self.dir(id).ok()?)?;
        full.then_some(crate::provider::limits::LimitHit {
            kind: crate::provider::limits::LimitKind::Disk,
            value: cap,
        })
    }
}

/// What `local` enforces of `req`: every limit where rfs may create
/// cgroups; elsewhere a limit someone asked for is refused, and rfs's
/// default process cap is said to be not enforced (and why).
pub(super) fn limits_decision(
    req: &crate::provider::limits::LimitsRequest,
) -> Result<crate::provider::limits::LimitsFact, crate::provider::limits::LimitsError> {
    use crate::provider::limits::{Limits, LimitsError, LimitsFact};
    let mut fact = LimitsFact {
        by: "cgroup v1".into(),
        ..LimitsFact::default()
    };
    for l in &req.limits {
        let mut one = Limits::default();
        match l.kind {
            crate::provider::limits::LimitKind::Pids => one.pids = Some(l.value),
            crate::provider::limits::LimitKind::Memory => one.memory = Some(l.value),
            crate::provider::limits::LimitKind::Cpus => one.cpus = Some(l.value),
            crate::provider::limits::LimitKind::Disk => {}
        }
        let available = match l.kind {
            crate::provider::limits::LimitKind::Disk => disk::available(),
            _ => cgroup::available(&one),
        };
        match available {
            Ok(()) => fact.enforced.push(l.clone()),
            Err(why) if l.is_default() => {
                fact.not_enforced.push(format!("{} ({why})", l.describe()))
            }
            Err(why) => {
                return Err(LimitsError::Unenforceable {
                    provider: "local".into(),
                    kind: l.kind,
                    value: l.kind.show(l.value),
                    by: l.by.clone(),
                    why,
                })
            }
        }
    }
    if fact.enforced.is_empty() {
        fact.by.clear();
    } else if fact
        .enforced
        .iter()
        .any(|l| l.kind == crate::provider::limits::LimitKind::Disk)
    {
        fact.by.push_str(" and a tmpfs");
    }
    Ok(fact)
}
