//! Creating and destroying a `local` sandbox: its directory (on a capped
//! tmpfs), its cgroups, its namespace init and `meta.json`; and, at the
//! end, all of them gone again.

use std::path::Path;
use std::sync::Arc;

use super::inventory::{make_dir, remove_dir, Meta};
use super::limits::limits_decision;
use super::namespace_init::Init;
use super::processes::kill_processes_under;
use super::{cgroup, disk, io_err, mount_plan, probe, LocalProvider, SetupError};
use super::{SandboxInfo, CACHES_NEED_NAMESPACES};
use crate::provider::limits::{LimitKind, Limits, LimitsFact};
use crate::provider::{CreateSpec, ProviderError, ProviderResult};

/// The size of the own disk a sandbox with `limits` gets (`None`: none).
pub(super) fn disk_cap(limits: &LimitsFact) -> Option<u64> {
    limit_values(limits).1
}

/// The cgroup limits and the disk cap of what `local` enforces.
fn limit_values(limits: &LimitsFact) -> (Limits, Option<u64>) {
    let mut values = Limits::default();
    let mut disk_cap = None;
    for l in &limits.enforced {
        match l.kind {
            LimitKind::Pids => values.pids = Some(l.value),
            LimitKind::Memory => values.memory = Some(l.value),
            LimitKind::Cpus => values.cpus = Some(l.value),
            LimitKind::Disk => disk_cap = Some(l.value),
        }
    }
    (values, disk_cap)
}

impl LocalProvider {
    pub(super) async fn create_sandbox(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        self.create_sandbox_from(spec, None)
            .await
            .map(|(info, _)| info)
    }

    /// A new sandbox; with `from` (a checkpoint's folder) its home and
    /// /tmp start as the checkpoint's (see [`super::fork`]), and how is
    /// returned.
    pub(super) async fn create_sandbox_from(
        &self,
        spec: &CreateSpec,
        from: Option<&Path>,
    ) -> ProviderResult<(SandboxInfo, Option<String>)> {
        self.ensure_inventory()?;
        let id = format!("local-{}", uuid::Uuid::new_v4().simple());
        let dir = self.dir(&id)?;
        let in_force =
            probe::decide(&spec.isolation).map_err(|e| ProviderError::Provision(e.to_string()))?;
        let gvisor = in_force.mode == super::gvisor::MODE;
        let isolated = in_force.mode == "namespaces" || gvisor;
        if !isolated && !spec.caches.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(ProviderError::Unsupported(CACHES_NEED_NAMESPACES.into()));
        }
        let limits = limits_decision(&spec.isolation.limits)
            .map_err(|e| ProviderError::Provision(e.to_string()))?;
        let (values, disk_cap) = limit_values(&limits);
        if gvisor {
            super::gvisor::check_pids(values.pids).map_err(ProviderError::Provision)?;
        }
        make_dir(&dir, disk_cap)?;
        let how = match from {
            Some(lower) => match super::fork::layer(&dir, lower) {
                Ok(how) => Some(how),
                Err(e) => {
                    remove_dir(&dir);
                    return Err(e);
                }
            },
            None => None,
        };
        let meta = |cgroups| Meta {
            id: id.clone(),
            labels: spec.labels.clone(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            isolation: Some(in_force.mode.clone()),
            network: isolated
                .then_some(spec.isolation.network == crate::network::NetworkPolicy::Host),
            network_policy: isolated.then(|| in_force.network.clone()),
            cgroups,
            disk: disk_cap,
            home: isolated.then(|| super::HOME_INSIDE.to_owned()),
        };
        // Written before anything else of it exists, naming the cgroups
        // it is about to get: a sandbox whose rfs is killed while creating
        // it is listed (with its owner), `rfs gc` removes it and them, and
        // one entered meanwhile is refused if they are not all there
        // (never run without its limits).
        if let Err(e) = meta(cgroup::Cgroup::planned(&id, &values)).write(&dir) {
            remove_dir(&dir);
            return Err(e);
        }
        let cg = self.make_cgroup(&id, &dir, &values)?;
        if isolated {
            if let Err(e) = self.isolate(&id, &dir, spec, cg.as_ref(), gvisor).await {
                self.cache_layers
                    .lock()
                    .expect("cache layers lock")
                    .remove(&id);
                if let Some(cg) = self.cgroups.lock().expect("cgroups lock").remove(&id) {
                    let _ = cg.remove();
                }
                remove_dir(&dir);
                return Err(e);
            }
        }
        let meta = meta(cg.as_ref().map(|c| c.parts()).unwrap_or_default());
        if let Err(e) = meta.write(&dir) {
            // Its init, cgroups, disk and layers go as a sandbox's do.
            let _ = self.destroy_sandbox(&id).await;
            return Err(e);
        }
        let info = self.read(&id)?.ok_or_else(|| {
            ProviderError::Provision(format!("sandbox {id} vanished after create"))
        })?;
        Ok((info, how))
    }

    /// The sandbox's cgroups (`None`: no limit needs one), kept by id.
    fn make_cgroup(
        &self,
        id: &str,
        dir: &Path,
        values: &Limits,
    ) -> ProviderResult<Option<Arc<cgroup::Cgroup>>> {
        if values.is_empty() {
            return Ok(None);
        }
        let cg = match cgroup::Cgroup::create(id, values) {
            Ok(cg) => Arc::new(cg),
            Err(e) => {
                remove_dir(dir);
                return Err(ProviderError::Provision(format!(
                    "cannot set the resource limits of sandbox {id}: {e}"
                )));
            }
        };
        self.cgroups
            .lock()
            .expect("cgroups lock")
            .insert(id.to_owned(), cg.clone());
        Ok(Some(cg))
    }

    /// Start the namespace init that owns the sandbox's namespaces (its
    /// root, caches and proxy), in its cgroups; with `gvisor`, the gVisor
    /// sandbox in them.
    async fn isolate(
        &self,
        id: &str,
        dir: &Path,
        spec: &CreateSpec,
        cg: Option<&Arc<cgroup::Cgroup>>,
        gvisor: bool,
    ) -> ProviderResult<()> {
        std::fs::create_dir(mount_plan::root_dir(dir))
            .map_err(|e| io_err("creating sandbox root", e))?;
        let (d, network) = (dir.to_path_buf(), spec.isolation.network.clone());
        let caches = spec.caches.clone();
        let host_mounts = spec.isolation.host_mounts.clone();
        let (layers, id_owned) = (self.cache_layers.clone(), id.to_owned());
        let log = self.egress_log(id);
        let gv = gvisor.then(|| (id.to_owned(), super::gvisor::state_dir(&self.root)));
        let cg_fds = cg.map_or([-1; 3], |c| c.procs_fds());
        let init = tokio::task::spawn_blocking(move || {
            // Held by the sandbox's disk (see [`super::cache_layers`]).
            let (caches, layered) = super::cache_layers::mount(&d, &caches)?;
            layers
                .lock()
                .expect("cache layers lock")
                .insert(id_owned, layered);
            let init = Init::for_sandbox_with_caches(&d, &network, &caches, &host_mounts)?;
            init.serve_egress(&network, log)?;
            if let Some((id, state)) = gv {
                let host = network == crate::network::NetworkPolicy::Host;
                let binds = (&caches[..], &host_mounts[..]);
                init.attach_gvisor(&id, &d, &state, host, cg_fds, binds)?;
            }
            Ok::<_, SetupError>(init)
        })
        .await
        .map_err(|e| ProviderError::Io(e.to_string()))?
        .map_err(|e| {
            let how = if gvisor {
                "under gVisor"
            } else {
                "in namespaces"
            };
            ProviderError::Provision(format!("cannot isolate sandbox {id} {how}: {e}"))
        })?;
        if let Some(cg) = cg {
            let _ = init.cgroup.set(cg.clone());
        }
        self.inits
            .lock()
            .expect("inits lock")
            .insert(id.to_owned(), Arc::new(init));
        Ok(())
    }

    pub(super) async fn destroy_sandbox(&self, id: &str) -> ProviderResult<()> {
        let dir = self.dir(id)?;
        // An isolated sandbox's whole PID namespace dies with its init
        // (setsid daemons included); waits until it is gone.
        self.infos.lock().expect("infos lock").remove(id);
        let init = self.inits.lock().expect("inits lock").remove(id);
        self.egress_logs.lock().expect("egress lock").remove(id);
        let mut gvisor_left = Ok(());
        if let Some(init) = init {
            gvisor_left = tokio::task::spawn_blocking(move || {
                let gone = init.gvisor.get().map_or(Ok(()), |g| g.destroy());
                init.kill();
                gone
            })
            .await
            .map_err(|e| ProviderError::Io(e.to_string()))?;
        }
        // A gVisor sandbox of an rfs that ended without destroying it.
        let state = super::gvisor::state_dir(&self.root);
        let id_owned = id.to_owned();
        let leftover =
            tokio::task::spawn_blocking(move || super::gvisor::remove_leftover(&state, &id_owned))
                .await
                .map_err(|e| ProviderError::Io(e.to_string()))?;
        gvisor_left = gvisor_left.and(leftover);
        // Processes left running in the sandbox (an rfs killed with SIGKILL
        // could not end its step) die with it.
        kill_processes_under(&dir);
        self.remove_cgroups(id).await?;
        // What it wrote into its caches reaches them now that nothing of
        // it runs.
        self.write_back_caches(id).await;
        // Its disk goes with it (nothing is left to remove inside), the
        // overlays of its caches and a fork's first.
        super::cache_layers::unmount(&dir);
        super::fork::unlayer(&dir);
        disk::unmount(&dir)
            .map_err(|e| ProviderError::Io(format!("destroying sandbox {id}: {e}")))?;
        let trash = self.root.join("trash");
        std::fs::create_dir_all(&trash).map_err(|e| io_err("creating trash", e))?;
        let gone = trash.join(format!("{id}-{}", uuid::Uuid::new_v4().simple()));
        match std::fs::rename(&dir, &gone) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(io_err(&format!("destroying sandbox {id}"), e)),
        }
        let res = tokio::task::spawn_blocking(move || crate::untrusted_tree::remove(&gone))
            .await
            .map_err(|e| ProviderError::Io(e.to_string()))?;
        res.map_err(|e| io_err(&format!("removing sandbox {id}"), e))?;
        gvisor_left.map_err(|e| ProviderError::Io(format!("destroying sandbox {id}: {e}")))
    }

    /// Write the changes sandbox `id` made to its caches into them (see
    /// [`super::cache_layers`]); a cache whose changes could not all be
    /// written was emptied (its `cache.end` says it holds nothing), and
    /// the log says why.
    async fn write_back_caches(&self, id: &str) {
        let Some(layers) = self
            .cache_layers
            .lock()
            .expect("cache layers lock")
            .remove(id)
        else {
            return;
        };
        let emptied =
            tokio::task::spawn_blocking(move || super::cache_layers::write_back(&layers)).await;
        for (name, why) in emptied.unwrap_or_default() {
            tracing::warn!(sandbox = id, "cache `{name}` emptied: {why}");
        }
    }

    /// Its cgroups go with it (what is left in them is killed), and are
    /// verified gone.
    async fn remove_cgroups(&self, id: &str) -> ProviderResult<()> {
        let cg = self.cgroups.lock().expect("cgroups lock").remove(id);
        let removed = match cg {
            Some(cg) => tokio::task::spawn_blocking(move || cg.remove()).await,
            None => {
                let parts = self
                    .read_meta(id)
                    .ok()
                    .flatten()
                    .map(|k| k.cgroups)
                    .unwrap_or_default();
                let id = id.to_owned();
                // By name too: a sandbox whose rfs was killed before its
                // meta.json named them left them otherwise.
                tokio::task::spawn_blocking(move || {
                    cgroup::Cgroup::remove_parts(&parts)
                        .and_then(|()| cgroup::Cgroup::remove_named(&id))
                })
                .await
            }
        };
        removed
            .map_err(|e| ProviderError::Io(e.to_string()))?
            .map_err(|e| ProviderError::Io(format!("destroying sandbox {id}: {e}")))
    }
}
