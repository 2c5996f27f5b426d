//! Entering a sandbox isolated in namespaces: its init in this process,
//! or a fresh one over a kept sandbox of another rfs process whose run has
//! ended.

use std::sync::Arc;

use super::namespace_init::Init;
use super::{io_err, mount_plan, LocalProvider};
use crate::provider::owner::{owner_liveness, Liveness};
use crate::provider::{labels, ProviderError, ProviderResult};

impl LocalProvider {
    /// The namespace init `id` runs in (`None`: not isolated). An isolated
    /// sandbox of another rfs process is entered through a fresh init of
    /// this process over the same directory and mount plan once its run
    /// has ended (a `--keep` one: the run's init died with it); one
    /// whose run is alive, or whose owner cannot be judged, is refused.
    pub(super) fn init_of(&self, id: &str) -> ProviderResult<Option<Arc<Init>>> {
        let mut inits = self.inits.lock().expect("inits lock");
        if let Some(init) = inits.get(id) {
            return Ok(Some(init.clone()));
        }
        let cached = self.infos.lock().expect("infos lock").get(id).cloned();
        let known = match cached {
            Some(k) => Some(k),
            None => self.read_meta(id).ok().flatten(),
        };
        let gvisor = known
            .as_ref()
            .is_some_and(|k| k.isolation.as_deref() == Some(super::gvisor::MODE));
        let Some(known) = known.filter(|k| k.isolation.as_deref() == Some("namespaces") || gvisor)
        else {
            return Ok(None);
        };
        match owner_liveness(&known.info.labels) {
            Liveness::Gone(_) => {}
            Liveness::Alive => {
                return Err(ProviderError::Unsupported(format!(
                    "sandbox {id} is isolated in namespaces owned by another rfs process, its live run (rfs pid {}); \
                     it can be entered once that run has ended, if it keeps it (--keep)",
                    known.info.labels.get(labels::OWNER_PID).map_or("?", String::as_str)
                )))
            }
            Liveness::Unknown(why) => {
                return Err(ProviderError::Unsupported(format!(
                    "sandbox {id} is isolated in namespaces owned by another rfs process ({why}); it cannot be entered from here"
                )))
            }
        }
        let dir = self.dir(id)?;
        let root = mount_plan::root_dir(&dir);
        if let Err(e) = std::fs::create_dir(&root) {
            if e.kind() != std::io::ErrorKind::AlreadyExists {
                return Err(io_err("creating sandbox root", e));
            }
        }
        let cg = self.cgroup_of(id)?;
        let init = Init::for_sandbox(&dir, &known.network)
            .and_then(|init| {
                init.serve_egress(&known.network, self.egress_log(id))?;
                if gvisor {
                    // A fresh gVisor sandbox: the run's ended with it.
                    let state = super::gvisor::state_dir(&self.root);
                    let host = known.network == crate::network::NetworkPolicy::Host;
                    let fds = cg.as_ref().map_or([-1; 3], |c| c.procs_fds());
                    init.attach_gvisor(id, &dir, &state, host, fds, (&[], &[]))?;
                }
                Ok(init)
            })
            .map_err(|e| {
                ProviderError::NotStarted(format!(
                    "cannot re-enter the namespaces of kept sandbox {id}: {e}"
                ))
            })?;
        if let Some(cg) = cg {
            let _ = init.cgroup.set(cg);
        }
        let init = Arc::new(init);
        inits.insert(id.to_owned(), init.clone());
        Ok(Some(init))
    }
}
