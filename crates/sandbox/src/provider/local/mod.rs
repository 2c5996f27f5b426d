//! Local provider: a sandbox is a fresh directory under the state directory.
//!
//! Layout: `<state>/local/sandboxes/<id>/meta.json` (labels, created) and
//! `<state>/local/sandboxes/<id>/home/` (the sandbox user's HOME). The
//! inventory is the set of those directories. Destroy first renames the
//! directory out of the inventory (atomic), then deletes it.
//!
//! ## Isolation
//!
//! Namespaces for `local` sandboxes (Linux, unprivileged user namespaces;
//! no root, no setuid helper).
//!
//! Each isolated sandbox has one init process that owns its namespaces:
//! rfs forks a child that unshares user, mount, PID, IPC, UTS (and, with
//! `network: false`, network) namespaces and maps only its own uid/gid;
//! that child forks the init (PID 1 of the new PID namespace), which builds
//! the sandbox's root and then only reaps orphans and waits for rfs to go
//! away (a lifeline pipe: when rfs exits, even by SIGKILL, the init exits
//! and the kernel kills every process of its PID namespace).
//!
//! The root (a read-only tmpfs, `pivot_root`ed into): the system
//! directories (`/usr`, `/bin`, `/lib*`, `/sbin`, `/opt`, ...)
//! read-only (id-mapped where rfs runs as root, [`idmap`]), a private
//! `/etc` rfs composes ([`private_etc`]), the sandbox home read-write at the same absolute path as on
//! the host (so paths agree with the provider's), the sandbox's own `tmp`
//! as `/tmp`, a minimal `/dev` with a private devpts, and a `/proc` of its
//! own PID namespace. Nothing else of the host exists inside.
//!
//! Commands enter without a `fork` of rfs: the calling thread starts a
//! child with `clone(CLONE_VM | CLONE_VFORK)` (it shares rfs's memory, so
//! nothing is copied, like `posix_spawn`), which joins the sandbox with
//! `setns` (user, mount, PID, IPC, network) and starts the command the
//! same way with `CLONE_PARENT` (joining a PID namespace only applies to
//! children): the command is rfs's own child, in the sandbox's PID
//! namespace, leader of its own process group (or session, for a
//! terminal), with no capabilities and `no_new_privs`. rfs waits for it
//! through a pidfd; the group kills of the runtime reach it directly.
//!
//! Code between `fork`/`clone` and `exec`/`_exit` only makes raw system
//! calls on data prepared before (no allocation, no locks): the spawn
//! children share rfs's memory while rfs's other threads keep running.
//!
//! One file a concern: [`probe`] (can namespaces be used here, and the
//! decision), [`mount_plan`] (the root), [`namespace_init`] (the init
//! that owns the namespaces), [`launch`] (starting a command inside),
//! [`child`] (waiting for and killing it), [`pty`] (terminals), with
//! [`errors`] and the raw system calls of [`sys`].

mod cache_mounts;
mod cgroup;
mod child;
mod commands;
mod disk;
mod egress;
mod env;
mod errors;
mod fingerprint;
mod idmap;
mod input_feed;
mod launch;
mod mount_plan;
mod namespace_init;
mod private_etc;
mod probe;
mod processes;
pub mod pty;
mod sys;

pub use errors::{SetupError, SpawnError};
pub use mount_plan::HOSTNAME;
pub use namespace_init::reaper_main;
pub use probe::{availability, doctor_line, DoctorRefusal};

use std::collections::HashMap;
use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncReadExt;

use self::child::LocalChild;
use self::commands::*;
use self::env::*;
use self::input_feed::*;
use self::namespace_init::Init;
use self::processes::*;
use crate::provider::isolation::{IsolationInForce, IsolationRequest};
use crate::provider::owner::{owner_liveness, Liveness};
use crate::provider::supervisor::Supervisor;
use crate::provider::{
    labels, CreateSpec, ExecOutcome, ExecRequest, InputStream, Labels, NativeVerifier, OutputSink,
    Profile, Provider, ProviderError, ProviderResult, PtyChannel, PtyRequest, SandboxInfo,
    StreamInput,
};

/// The `local` provider.
#[derive(Debug, Clone)]
pub struct LocalProvider {
    root: PathBuf,
    /// The namespace inits of this process's isolated sandboxes.
    inits: Arc<Mutex<HashMap<String, Arc<Init>>>>,
    /// What [`LocalProvider::read`] returned for sandboxes of this
    /// process, so that a command does not re-read and re-parse
    /// `meta.json` (see [`LocalProvider::info`]).
    infos: Arc<Mutex<HashMap<String, Known>>>,
    /// rfs's executable, when this process can run it in a sandbox.
    own_exe: Option<PathBuf>,
    /// The cgroups (resource limits) of sandboxes, by id.
    cgroups: Arc<Mutex<HashMap<String, Arc<cgroup::Cgroup>>>>,
    /// The egress records of sandboxes behind rfs's proxy, by id.
    egress_logs: Arc<Mutex<HashMap<String, Arc<crate::network::EgressLog>>>>,
}

/// A sandbox as its `meta.json` was last read.
#[derive(Debug, Clone)]
struct Known {
    info: SandboxInfo,
    isolation: Option<String>,
    /// Its network policy.
    network: crate::network::NetworkPolicy,
    /// Its cgroups as `meta.json` records them.
    cgroups: Vec<cgroup::Part>,
    /// Its disk cap, bytes.
    disk: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct Meta {
    id: String,
    labels: Labels,
    created_unix: u64,
    /// `namespaces` or `none` (absent: created before isolation existed).
    #[serde(default)]
    isolation: Option<String>,
    /// Whether an isolated sandbox shares the host's network (absent:
    /// written before this was recorded; re-entered without network).
    #[serde(default)]
    network: Option<bool>,
    /// Its network policy (absent: written before policies; `network`
    /// says host or none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    network_policy: Option<crate::network::NetworkFact>,
    /// Its cgroups, one per limit (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    cgroups: Vec<cgroup::Part>,
    /// The size of its disk (a tmpfs over its directory; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    disk: Option<u64>,
}

impl LocalProvider {
    /// A provider keeping its sandboxes under `state_dir/local`.
    pub fn new(state_dir: &Path) -> Self {
        LocalProvider {
            root: state_dir.join("local"),
            inits: Arc::default(),
            infos: Arc::default(),
            own_exe: crate::provider::own_executable::executable().map(Path::to_path_buf),
            cgroups: Arc::default(),
            egress_logs: Arc::default(),
        }
    }

    /// The same, running `exe` (an rfs executable) as its own executable
    /// ([`Provider::exec_own_with_input`]).
    pub fn with_own_executable(mut self, exe: PathBuf) -> Self {
        self.own_exe = Some(exe);
        self
    }

    /// The namespace init `id` runs in (`None`: not isolated). An isolated
    /// sandbox of another rfs process is entered through a fresh init of
    /// this process over the same directory and mount plan once its run
    /// has ended (a `--keep` one: the run's init died with it); one
    /// whose run is alive, or whose owner cannot be judged, is refused.
    fn init_of(&self, id: &str) -> ProviderResult<Option<Arc<Init>>> {
        let mut inits = self.inits.lock().expect("inits lock");
        if let Some(init) = inits.get(id) {
            return Ok(Some(init.clone()));
        }
        let cached = self.infos.lock().expect("infos lock").get(id).cloned();
        let known = match cached {
            Some(k) => Some(k),
            None => self.read_meta(id).ok().flatten(),
        };
        let Some(known) = known.filter(|k| k.isolation.as_deref() == Some("namespaces")) else {
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
        let init = Init::for_sandbox(&dir, &known.network)
            .and_then(|init| {
                egress::serve(&init, &known.network, self.egress_log(id))?;
                Ok(init)
            })
            .map_err(|e| {
                ProviderError::NotStarted(format!(
                    "cannot re-enter the namespaces of kept sandbox {id}: {e}"
                ))
            })?;
        if let Some(cg) = self.cgroup_of(id)? {
            let _ = init.cgroup.set(cg);
        }
        let init = Arc::new(init);
        inits.insert(id.to_owned(), init.clone());
        Ok(Some(init))
    }

    /// The cgroups of sandbox `id` (`None`: it has none); those of a
    /// sandbox of another rfs process are opened from its `meta.json`,
    /// and refused when they are gone (its limits would not hold).
    fn cgroup_of(&self, id: &str) -> ProviderResult<Option<Arc<cgroup::Cgroup>>> {
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

    /// The disk limit of sandbox `id` when its disk is full.
    fn disk_full(&self, id: &str) -> Option<crate::provider::limits::LimitHit> {
        let cap = match self.infos.lock().expect("infos lock").get(id) {
            Some(k) => k.disk,
            None => self.read_meta(id).ok().flatten().and_then(|k| k.disk),
        }?;
        let (_, full) = disk::usage(&self.dir(id).ok()?)?;
        full.then_some(crate::provider::limits::LimitHit {
            kind: crate::provider::limits::LimitKind::Disk,
            value: cap,
        })
    }

    fn sandboxes(&self) -> PathBuf {
        self.root.join("sandboxes")
    }

    fn dir(&self, id: &str) -> ProviderResult<PathBuf> {
        // ids are ours: refuse anything that could name another path.
        if id.is_empty() || !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-') {
            return Err(ProviderError::NotFound { id: id.into() });
        }
        Ok(self.sandboxes().join(id))
    }

    /// The sandbox `id` for running something in it: as [`Self::read`]
    /// found it last, as long as its `meta.json` is still there (a
    /// sandbox whose directory was removed or emptied is gone, as when
    /// read from disk); `NotFound` when it is not.
    fn info(&self, id: &str) -> ProviderResult<SandboxInfo> {
        let cached = self.infos.lock().expect("infos lock").get(id).cloned();
        if let Some(known) = cached {
            match std::fs::symlink_metadata(self.dir(id)?.join("meta.json")) {
                Ok(m) if m.is_file() => return Ok(known.info),
                _ => {
                    self.infos.lock().expect("infos lock").remove(id);
                }
            }
        }
        let known = self
            .read_meta(id)?
            .ok_or(ProviderError::NotFound { id: id.into() })?;
        self.infos
            .lock()
            .expect("infos lock")
            .insert(id.to_owned(), known.clone());
        Ok(known.info)
    }

    /// The egress record of sandbox `id` (made on first use).
    fn egress_log(&self, id: &str) -> Arc<crate::network::EgressLog> {
        self.egress_logs
            .lock()
            .expect("egress lock")
            .entry(id.to_owned())
            .or_default()
            .clone()
    }

    fn read(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        Ok(self.read_meta(id)?.map(|k| k.info))
    }

    fn read_meta(&self, id: &str) -> ProviderResult<Option<Known>> {
        let dir = self.dir(id)?;
        let meta = match std::fs::read(dir.join("meta.json")) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(ProviderError::Io(format!("reading sandbox {id}: {e}"))),
        };
        let meta: Meta = serde_json::from_slice(&meta).map_err(|e| {
            ProviderError::Protocol(format!("sandbox {id} metadata is corrupt: {e}"))
        })?;
        Ok(Some(Known {
            info: SandboxInfo {
                id: meta.id,
                labels: meta.labels,
                home: dir.join("home").to_string_lossy().into_owned(),
                state: "running".into(),
            },
            isolation: meta.isolation,
            network: match (meta.network_policy, meta.network) {
                (Some(f), _) => crate::network::NetworkPolicy::from_fact(&f)
                    .map_err(|e| ProviderError::Protocol(format!("sandbox {id} metadata: {e}")))?,
                (None, Some(true)) => crate::network::NetworkPolicy::Host,
                (None, _) => crate::network::NetworkPolicy::Off,
            },
            cgroups: meta.cgroups,
            disk: meta.disk,
        }))
    }
}

fn io_err(what: &str, e: std::io::Error) -> ProviderError {
    ProviderError::Io(format!("{what}: {e}"))
}

/// Make every directory below `dir` writable so that removal cannot be
/// blocked by a step that ran `chmod -w`.
fn make_writable(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for e in entries.flatten() {
        if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
            make_writable(&e.path());
        }
    }
}

/// Why a local sandbox without namespaces takes no cache.
const CACHES_NEED_NAMESPACES: &str = "provider `local` mounts a cache only into a sandbox isolated in namespaces (its own mount namespace); with isolation `none` steps run on the host, where the mount would be the host's";

#[async_trait]
impl Provider for LocalProvider {
    fn name(&self) -> &str {
        "local"
    }

    /// Its exec's pipes, child (and pidfd) and timers live and die within
    /// the call.
    fn profile(&self) -> Profile {
        Profile {
            starts_from: super::BaseKind::Nothing,
            remote: false,
            exec_is_self_contained: true,
        }
    }

    fn streaming(&self) -> Option<&dyn StreamInput> {
        Some(self)
    }

    fn isolation(
        &self,
        req: &IsolationRequest,
    ) -> Result<IsolationInForce, crate::provider::isolation::IsolationError> {
        probe::decide(req)
    }

    /// Only into a sandbox isolated in namespaces (its own mount
    /// namespace: see [`cache_mounts`]).
    fn cache_mounts(&self, req: &IsolationRequest) -> Result<(), String> {
        match probe::decide(req) {
            Ok(f) if f.mode == "namespaces" => Ok(()),
            Ok(_) => Err(CACHES_NEED_NAMESPACES.into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Limits through cgroups where rfs may create them; rfs's default
    /// process cap is said to be not enforced where it may not, a limit
    /// someone asked for is refused there.
    fn limits(
        &self,
        req: &crate::provider::limits::LimitsRequest,
    ) -> Result<crate::provider::limits::LimitsFact, crate::provider::limits::LimitsError> {
        limits_decision(req)
    }

    fn egress(&self, id: &str) -> Option<Arc<crate::network::EgressLog>> {
        self.egress_logs
            .lock()
            .expect("egress lock")
            .get(id)
            .cloned()
    }

    /// The cgroups' counters after every command; a full disk after one
    /// that did not succeed (its `No space left on device` is the limit).
    async fn limits_reached(
        &self,
        id: &str,
        ended_ok: bool,
    ) -> Vec<crate::provider::limits::LimitHit> {
        let mut hits = match self.cgroup_of(id) {
            Ok(Some(cg)) => cg.reached(),
            _ => vec![],
        };
        if !ended_ok {
            hits.extend(self.disk_full(id));
        }
        hits
    }

    /// The memory cgroup's peak (reset per step), the pids cgroup's peak
    /// and the disk's use.
    async fn usage(&self, id: &str, reset: bool) -> Option<crate::provider::limits::Usage> {
        let (memory_peak, pids_peak) = match self.cgroup_of(id) {
            Ok(Some(cg)) => cg.peaks(reset),
            _ => (None, None),
        };
        let dir = self.dir(id).ok()?;
        let disk_used = disk::is_mounted(&dir)
            .then(|| disk::usage(&dir).map(|u| u.0))
            .flatten();
        Some(crate::provider::limits::Usage {
            memory_peak,
            pids_peak,
            disk_used,
        })
    }

    async fn preflight(&self) -> ProviderResult<()> {
        std::fs::create_dir_all(self.sandboxes()).map_err(|e| ProviderError::Unavailable {
            provider: "local".into(),
            message: format!("cannot create {}: {e}", self.sandboxes().display()),
        })
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        self.preflight().await?;
        let id = format!("local-{}", uuid::Uuid::new_v4().simple());
        let dir = self.dir(&id)?;
        let in_force =
            probe::decide(&spec.isolation).map_err(|e| ProviderError::Provision(e.to_string()))?;
        let isolated = in_force.mode == "namespaces";
        if !isolated && !spec.caches.is_empty() {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(ProviderError::Unsupported(CACHES_NEED_NAMESPACES.into()));
        }
        let limits = limits_decision(&spec.isolation.limits)
            .map_err(|e| ProviderError::Provision(e.to_string()))?;
        let mut values = crate::provider::limits::Limits::default();
        let mut disk_cap = None;
        for l in &limits.enforced {
            match l.kind {
                crate::provider::limits::LimitKind::Pids => values.pids = Some(l.value),
                crate::provider::limits::LimitKind::Memory => values.memory = Some(l.value),
                crate::provider::limits::LimitKind::Cpus => values.cpus = Some(l.value),
                crate::provider::limits::LimitKind::Disk => disk_cap = Some(l.value),
            }
        }
        make_dir(&dir, disk_cap)?;
        let cg = if values.is_empty() {
            None
        } else {
            match cgroup::Cgroup::create(&id, &values) {
                Ok(cg) => Some(Arc::new(cg)),
                Err(e) => {
                    remove_dir(&dir);
                    return Err(ProviderError::Provision(format!(
                        "cannot set the resource limits of sandbox {id}: {e}"
                    )));
                }
            }
        };
        if let Some(cg) = &cg {
            self.cgroups
                .lock()
                .expect("cgroups lock")
                .insert(id.clone(), cg.clone());
        }
        let undo_cgroup = |this: &Self| {
            if let Some(cg) = this.cgroups.lock().expect("cgroups lock").remove(&id) {
                let _ = cg.remove();
            }
        };
        if isolated {
            std::fs::create_dir(mount_plan::root_dir(&dir))
                .map_err(|e| io_err("creating sandbox root", e))?;
            let (d, network) = (dir.clone(), spec.isolation.network.clone());
            let caches = spec.caches.clone();
            let log = self.egress_log(&id);
            let init = tokio::task::spawn_blocking(move || {
                let init = Init::for_sandbox_with_caches(&d, &network, &caches)?;
                egress::serve(&init, &network, log)?;
                Ok::<_, SetupError>(init)
            })
            .await
            .map_err(|e| ProviderError::Io(e.to_string().to_string()))?;
            match init {
                Ok(init) => {
                    if let Some(cg) = &cg {
                        let _ = init.cgroup.set(cg.clone());
                    }
                    self.inits
                        .lock()
                        .expect("inits lock")
                        .insert(id.clone(), Arc::new(init));
                }
                Err(e) => {
                    undo_cgroup(self);
                    remove_dir(&dir);
                    return Err(ProviderError::Provision(format!(
                        "cannot isolate sandbox {id} in namespaces: {e}"
                    )));
                }
            }
        }
        let meta = Meta {
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
            cgroups: cg.as_ref().map(|c| c.parts()).unwrap_or_default(),
            disk: disk_cap,
        };
        let tmp = dir.join("meta.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(&meta).expect("meta serialises"),
        )
        .map_err(|e| io_err("writing sandbox metadata", e))?;
        std::fs::rename(&tmp, dir.join("meta.json"))
            .map_err(|e| io_err("writing sandbox metadata", e))?;
        self.read(&id)?
            .ok_or_else(|| ProviderError::Provision(format!("sandbox {id} vanished after create")))
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        match self.read(id) {
            Err(ProviderError::NotFound { .. }) => Ok(None),
            other => other,
        }
    }

    async fn list(&self, want: &Labels) -> ProviderResult<Vec<SandboxInfo>> {
        let entries = match std::fs::read_dir(self.sandboxes()) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(io_err("listing sandboxes", e)),
        };
        let mut out = vec![];
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Ok(Some(info)) = self.read(&name) {
                if labels::matches(&info.labels, want) {
                    out.push(info);
                }
            }
        }
        out.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    async fn upload(&self, id: &str, local: &Path, remote_path: &str) -> ProviderResult<()> {
        let info = self.info(id)?;
        let dest = Path::new(remote_path);
        if !dest.starts_with(Path::new(&info.home).parent().unwrap_or(Path::new("/"))) {
            return Err(ProviderError::Invalid(format!(
                "upload target {remote_path} is outside sandbox {id}"
            )));
        }
        // Same filesystem in the common case: a hard link costs nothing;
        // otherwise copy (streams through the kernel).
        if std::fs::hard_link(local, dest).is_err() {
            tokio::fs::copy(local, dest)
                .await
                .map_err(|e| io_err(&format!("copying into sandbox {id}"), e))?;
        }
        Ok(())
    }

    async fn exec(
        &self,
        id: &str,
        req: &ExecRequest,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        self.run(id, req, None, sink).await
    }

    async fn open_pty(&self, id: &str, req: &PtyRequest) -> ProviderResult<PtyChannel> {
        let info = self.info(id)?;
        let init = self.init_of(id)?;
        // The same base environment as exec, then the request's.
        let mut req = req.clone();
        let mut env = base_env(&info.home, init.as_deref());
        env.append(&mut req.env);
        req.env = env;
        let cg = self.cgroup_of(id)?;
        pty::spawn_local_pty_in(&req, init, cg.map_or([-1; 3], |c| c.procs_fds())).await
    }

    /// The host's fingerprint: a local sandbox shares its system.
    async fn environment(&self, id: &str) -> ProviderResult<Option<crate::events::Environment>> {
        let _ = id;
        Ok(Some(crate::events::Environment {
            image: None,
            host: Some(fingerprint::host()),
        }))
    }

    async fn destroy(&self, id: &str) -> ProviderResult<()> {
        let dir = self.dir(id)?;
        // An isolated sandbox's whole PID namespace dies with its init
        // (setsid daemons included); waits until it is gone.
        self.infos.lock().expect("infos lock").remove(id);
        let init = self.inits.lock().expect("inits lock").remove(id);
        self.egress_logs.lock().expect("egress lock").remove(id);
        if let Some(init) = init {
            tokio::task::spawn_blocking(move || init.kill())
                .await
                .map_err(|e| ProviderError::Io(e.to_string().to_string()))?;
        }
        // Processes left running in the sandbox (an rfs killed with SIGKILL
        // could not end its step) die with it.
        kill_processes_under(&dir);
        // Its cgroups go with it (what is left in them is killed), and
        // are verified gone.
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
                tokio::task::spawn_blocking(move || cgroup::Cgroup::remove_parts(&parts)).await
            }
        };
        removed
            .map_err(|e| ProviderError::Io(e.to_string()))?
            .map_err(|e| ProviderError::Io(format!("destroying sandbox {id}: {e}")))?;
        // Its disk goes with it (nothing is left to remove inside).
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
        let res = tokio::task::spawn_blocking(move || {
            make_writable(&gone);
            std::fs::remove_dir_all(&gone)
        })
        .await
        .map_err(|e| ProviderError::Io(e.to_string().to_string()))?;
        res.map_err(|e| io_err(&format!("removing sandbox {id}"), e))
    }
}

#[async_trait]
impl StreamInput for LocalProvider {
    /// The input goes through a FIFO in the sandbox's tmp directory: the
    /// command runs under `sh -c 'exec "$@" <FIFO'` through [`Self::exec`]
    /// (so it gets exactly exec's environment and process handling) while
    /// rfs writes the stream into the FIFO. Nothing touches the disk.
    async fn exec_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let info = self.info(id)?;
        let fifo = Path::new(&info.home)
            .with_file_name("tmp")
            .join(format!("rfs-input-{}", uuid::Uuid::new_v4().simple()));
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).map_err(|e| {
            ProviderError::Io(format!("creating an input FIFO in sandbox {id}: {e}"))
        })?;
        let _remove = RemoveOnDrop(fifo.clone());
        // Inside namespaces the sandbox's tmp directory is its /tmp.
        let fifo_inside = match self.init_of(id)? {
            Some(_) => Path::new("/tmp").join(fifo.file_name().expect("named")),
            None => fifo.clone(),
        };
        let mut wrapped = req.clone();
        wrapped.argv = [
            "/bin/sh",
            "-c",
            r#"f=$1; shift; exec "$@" <"$f""#,
            "rfs-input",
            &fifo_inside.to_string_lossy(),
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(req.argv.iter().cloned())
        .collect();
        fed_while_running(
            feed_fifo(fifo.clone(), input),
            self.exec(id, &wrapped, sink),
        )
        .await
    }

    fn native(&self) -> Option<&dyn NativeVerifier> {
        self.own_exe
            .is_some()
            .then_some(self as &dyn NativeVerifier)
    }
}

#[async_trait]
impl NativeVerifier for LocalProvider {
    /// rfs's executable is opened (close-on-exec) and, in namespaces,
    /// executed through that descriptor (rfs's path does not exist there);
    /// its standard input is `input`'s pipe when it is one, else a pipe rfs
    /// writes `input` into.
    async fn exec_own_with_input(
        &self,
        id: &str,
        req: &ExecRequest,
        input: InputStream,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        let cannot = |e: &dyn std::fmt::Display| {
            ProviderError::NotStarted(format!(
                "cannot start rfs's own executable in sandbox {id}: {e}"
            ))
        };
        let path = self
            .own_exe
            .clone()
            .ok_or_else(|| cannot(&"this process declared no rfs executable"))?;
        let exe = own_executable(&path).map_err(|e| cannot(&e))?;
        // A pipe's read end becomes the program's standard input as it is
        // (its producer writes straight into the program); any other
        // stream is copied into a pipe of our own.
        let input = match input.into_pipe() {
            Ok(stdin) => {
                let own = OwnProgram { path, exe, stdin };
                return self.run(id, req, Some(own), sink).await;
            }
            Err(input) => input,
        };
        let (rx, tx) = crate::provider::input::pipe_cloexec().map_err(|e| cannot(&e))?;
        nix::fcntl::fcntl(
            tx.as_raw_fd(),
            nix::fcntl::FcntlArg::F_SETFL(nix::fcntl::OFlag::O_NONBLOCK),
        )
        .map_err(|e| cannot(&e))?;
        let tx = tokio::net::unix::pipe::Sender::from_owned_fd(tx).map_err(|e| cannot(&e))?;
        let own = OwnProgram {
            path,
            exe,
            stdin: rx,
        };
        fed_while_running(feed_into(tx, input), self.run(id, req, Some(own), sink)).await
    }
}

/// What `local` enforces of `req`: every limit where rfs may create
/// cgroups; elsewhere a limit someone asked for is refused, and rfs's
/// default process cap is said to be not enforced (and why).
fn limits_decision(
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

/// Create the sandbox directory `dir` with its `home` and `tmp`, on a
/// tmpfs of `disk` bytes when there is a disk cap.
fn make_dir(dir: &Path, disk: Option<u64>) -> ProviderResult<()> {
    std::fs::create_dir(dir).map_err(|e| io_err("creating sandbox directory", e))?;
    if let Some(bytes) = disk {
        if let Err(e) = disk::mount(dir, bytes) {
            let _ = std::fs::remove_dir(dir);
            return Err(ProviderError::Provision(e));
        }
    }
    let made = std::fs::create_dir(dir.join("home"))
        .map_err(|e| io_err("creating sandbox home", e))
        .and_then(|()| {
            std::fs::create_dir(dir.join("tmp")).map_err(|e| io_err("creating sandbox tmp", e))
        });
    if made.is_err() {
        remove_dir(dir);
    }
    made
}

/// Remove a sandbox directory that never became a sandbox (its disk
/// unmounted first).
fn remove_dir(dir: &Path) {
    let _ = disk::unmount(dir);
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::isolation::IsolationMode;
    use crate::provider::Collect;

    fn host_sandbox(state: &State) -> (LocalProvider, tokio::runtime::Runtime, String) {
        let p = LocalProvider::new(state.path());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let mut spec = CreateSpec::default();
        spec.isolation.mode = IsolationMode::None;
        let id = rt.block_on(p.create(&spec)).unwrap().id;
        state
            .made
            .borrow_mut()
            .push((p.cgroups.clone(), id.clone()));
        (p, rt, id)
    }

    /// A state dir whose sandboxes' disks (tmpfs, when rfs runs as root)
    /// are unmounted and whose cgroups are removed when the test ends,
    /// however it ends: a test here destroys no sandbox, and `tempdir`
    /// cannot remove a mount point.
    struct State {
        dir: tempfile::TempDir,
        made: std::cell::RefCell<Vec<(CgroupMap, String)>>,
    }

    type CgroupMap = Arc<Mutex<HashMap<String, Arc<cgroup::Cgroup>>>>;

    impl State {
        fn new() -> State {
            State {
                dir: tempfile::tempdir().unwrap(),
                made: Default::default(),
            }
        }
        fn path(&self) -> &Path {
            self.dir.path()
        }
    }

    impl Drop for State {
        fn drop(&mut self) {
            for (cgroups, id) in self.made.borrow_mut().drain(..) {
                if let Some(cg) = cgroups.lock().expect("cgroups lock").remove(&id) {
                    let _ = cg.remove();
                }
            }
            let root = self.dir.path().join("local").join("sandboxes");
            for e in std::fs::read_dir(&root).into_iter().flatten().flatten() {
                if disk::is_mounted(&e.path()) {
                    let _ = disk::unmount(&e.path());
                }
            }
        }
    }

    #[test]
    fn a_unit_test_sandbox_leaves_no_disk_mounted_and_no_cgroup() {
        let state = State::new();
        let (p, _rt, id) = host_sandbox(&state);
        let dir = p.dir(&id).unwrap();
        let cgroup_dirs: Vec<_> = p
            .cgroups
            .lock()
            .unwrap()
            .get(&id)
            .map(|cg| cg.parts().into_iter().map(|part| part.dir).collect())
            .unwrap_or_default();
        drop(state);
        assert!(!disk::is_mounted(&dir), "{} still mounted", dir.display());
        for d in cgroup_dirs {
            assert!(!d.exists(), "cgroup {} left behind", d.display());
        }
    }

    fn echo(p: &LocalProvider, rt: &tokio::runtime::Runtime, id: &str) -> ProviderResult<Vec<u8>> {
        let req = ExecRequest {
            argv: vec!["/bin/sh".into(), "-c".into(), "echo ok".into()],
            cwd: "/".into(),
            env: vec![],
            timeout: None,
            cancel: tokio_util::sync::CancellationToken::new(),
        };
        let mut sink = Collect::default();
        rt.block_on(p.exec(id, &req, &mut sink))?;
        Ok(sink.stdout)
    }

    /// What a command learns of its sandbox is kept in memory, but a
    /// sandbox whose `meta.json` went away after a command ran (its
    /// directory emptied by a step of an unisolated sandbox) is gone, as
    /// when it was read from disk each time.
    #[test]
    fn a_sandbox_whose_metadata_vanished_after_a_command_is_not_found() {
        let state = State::new();
        let (p, rt, id) = host_sandbox(&state);
        assert_eq!(echo(&p, &rt, &id).unwrap(), b"ok\n");
        std::fs::remove_file(p.dir(&id).unwrap().join("meta.json")).unwrap();
        match echo(&p, &rt, &id) {
            Err(ProviderError::NotFound { id: gone }) => assert_eq!(gone, id),
            other => panic!("{other:?}"),
        }
    }

    /// Polled on a current-thread loop (as a step's command is, see
    /// `runtime::exec_loop`), a command is still ended by its timeout and
    /// by a cancellation from another thread, its whole group with it.
    #[test]
    fn timeout_and_cancel_from_another_thread_end_the_group_on_a_current_thread_loop() {
        let state = State::new();
        let (p, rt, id) = host_sandbox(&state);
        let run = |timeout, cancel: tokio_util::sync::CancellationToken| {
            let req = ExecRequest {
                argv: vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    "sleep 30 & echo $! ; wait".into(),
                ],
                cwd: "/".into(),
                env: vec![],
                timeout,
                cancel,
            };
            let mut sink = Collect::default();
            let o = rt.block_on(p.exec(&id, &req, &mut sink)).unwrap();
            let pid: i32 = String::from_utf8(sink.stdout)
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            (o, pid)
        };
        let gone = |pid: i32| {
            // The background `sleep` was in the command's group: killed
            // (and reaped by init, so it no longer exists or is a zombie).
            // SIGKILL is delivered asynchronously: on a loaded machine the
            // process can still be running for a moment after `kill`
            // returned, so wait a bounded time for it to die.
            let deadline = std::time::Instant::now() + Duration::from_secs(5);
            loop {
                let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
                let dead = stat.is_empty()
                    || stat
                        .rsplit_once(')')
                        .is_some_and(|(_, r)| r.trim_start().starts_with('Z'));
                if dead || std::time::Instant::now() >= deadline {
                    return dead;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        let (o, pid) = run(
            Some(Duration::from_millis(300)),
            tokio_util::sync::CancellationToken::new(),
        );
        assert!(o.timed_out && !o.cancelled, "{o:?}");
        assert!(gone(pid), "sleep {pid} survived the timeout");
        let cancel = tokio_util::sync::CancellationToken::new();
        let c = cancel.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            c.cancel();
        });
        let (o, pid) = run(None, cancel);
        t.join().unwrap();
        assert!(o.cancelled && !o.timed_out, "{o:?}");
        assert!(gone(pid), "sleep {pid} survived the cancellation");
    }

    /// A sandbox this process did not create is read from disk, and an
    /// isolated one of another process is refused (not run on the host).
    #[test]
    fn an_isolated_sandbox_of_another_process_is_refused_not_run_on_the_host() {
        let state = State::new();
        let (p, rt, id) = host_sandbox(&state);
        let meta = p.dir(&id).unwrap().join("meta.json");
        let text = std::fs::read_to_string(&meta).unwrap();
        std::fs::write(&meta, text.replace("\"none\"", "\"namespaces\"")).unwrap();
        let other = LocalProvider::new(state.path());
        let e = echo(&other, &rt, &id).unwrap_err();
        assert!(
            e.to_string().contains("owned by another rfs process"),
            "{e}"
        );
    }
}
