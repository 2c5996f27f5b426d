//! Local provider: a sandbox is a fresh directory under the state directory.
//!
//! Layout: `<state>/local/sandboxes/<id>/meta.json` (labels, created) and
//! `<state>/local/sandboxes/<id>/home/` (the sandbox user's HOME). The
//! inventory is the set of those directories. Destroy first renames the
//! directory out of the inventory (atomic), then deletes it.
//!
//! ## One home
//!
//! Inside an isolated sandbox (namespaces or gVisor) the home is always
//! [`HOME_INSIDE`], whichever folder of the state directory holds it: a
//! setup and every fork of its checkpoint, and every run, see the same
//! path, so what a setup wrote into its files (a virtualenv's shebangs,
//! an editable install's `.pth`, cargo's fingerprints) still holds in a
//! fork, and no host path of rfs's state reaches a step. With isolation
//! `none` a step runs on the host, where the home can only be its host
//! folder.
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
//! A command wrapped by rfs's in-sandbox wrapper ([`crate::provider::wrapper`])
//! starts as its own shell directly: the second child does the
//! wrapper's checks itself, as the command's process ([`confine`]).
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

mod cache_layers;
mod cache_mounts;
mod cgroup;
mod child;
mod commands;
mod confine;
mod disk;
mod egress;
mod env;
mod errors;
mod fingerprint;
mod fork;
pub mod gvisor;
mod host_mounts;
mod idmap;
mod input_feed;
mod inventory;
mod launch;
mod lifecycle;
mod limits;
mod mount_plan;
mod mount_points;
mod namespace_init;
mod overlay;
mod private_etc;
mod probe;
mod processes;
pub mod pty;
mod reentry;
mod spawn_stacks;
mod stream_input;
mod sys;
mod upload;

pub use errors::{SetupError, SpawnError};
pub use namespace_init::reaper_main;
pub use private_etc::HOSTNAME;
pub use probe::{availability, doctor_line, DoctorRefusal};

use std::collections::HashMap;
use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;

use self::child::LocalChild;
use self::env::*;
use self::inventory::Known;
use self::limits::limits_decision;
use self::namespace_init::Init;
use crate::provider::isolation::{IsolationInForce, IsolationRequest};
use crate::provider::supervisor::Supervisor;
use crate::provider::{
    labels, CreateSpec, ExecOutcome, ExecRequest, InputStream, Labels, OutputSink, Profile,
    Provider, ProviderError, ProviderResult, PtyChannel, PtyRequest, SandboxInfo, StreamInput,
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
    /// `/dev/null`, the standard input of every command, opened once.
    dev_null: Arc<std::sync::OnceLock<std::fs::File>>,
    /// The cache overlays of this process's sandboxes, by id: written
    /// into their caches when the sandbox is destroyed.
    cache_layers: Arc<Mutex<HashMap<String, Vec<cache_layers::Layer>>>>,
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
            dev_null: Arc::default(),
            cache_layers: Arc::default(),
        }
    }

    /// `/dev/null`, open for reading.
    pub(super) fn dev_null(&self) -> std::io::Result<&std::fs::File> {
        if let Some(f) = self.dev_null.get() {
            return Ok(f);
        }
        let f = std::fs::File::open("/dev/null")?;
        Ok(self.dev_null.get_or_init(|| f))
    }

    /// The same, running `exe` (an rfs executable) as its own executable
    /// ([`Provider::exec_own_with_input`]).
    pub fn with_own_executable(mut self, exe: PathBuf) -> Self {
        self.own_exe = Some(exe);
        self
    }

    /// The egress record of sandbox `id` (made on first use).
    pub(super) fn egress_log(&self, id: &str) -> Arc<crate::network::EgressLog> {
        self.egress_logs
            .lock()
            .expect("egress lock")
            .entry(id.to_owned())
            .or_default()
            .clone()
    }
}

/// The home of every isolated `local` sandbox, as its steps see it (the
/// same path as the `docker` provider's default home).
pub const HOME_INSIDE: &str = "/home/rfs";

fn io_err(what: &str, e: std::io::Error) -> ProviderError {
    ProviderError::Io(format!("{what}: {e}"))
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

    fn forking(&self) -> Option<&dyn crate::provider::fork::Fork> {
        Some(self)
    }

    fn isolation(
        &self,
        req: &IsolationRequest,
    ) -> Result<IsolationInForce, crate::provider::isolation::IsolationError> {
        let in_force = probe::decide(req)?;
        host_mounts::check(&req.host_mounts, &in_force.mode)
            .map_err(|why| req.refuse_host_mounts("local", &why).unwrap_err())?;
        Ok(in_force)
    }

    /// Only into a sandbox isolated in namespaces (its own mount
    /// namespace: see [`cache_mounts`]).
    fn cache_mounts(&self, req: &IsolationRequest) -> Result<(), String> {
        match probe::decide(req) {
            Ok(f) if f.mode == "namespaces" || f.mode == gvisor::MODE => Ok(()),
            Ok(_) => Err(CACHES_NEED_NAMESPACES.into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Where the sandbox has its own disk, a cache is an overlay whose
    /// upper layer is written back (`cache_layers`); elsewhere it is
    /// bound as it is.
    fn caches_bound_as_they_are(&self, req: &IsolationRequest) -> bool {
        limits_decision(&req.limits).map_or(true, |l| lifecycle::disk_cap(&l).is_none())
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
        // Its own disk, mounted at its creation (as `disk_full` reads it).
        let disk_used = self
            .disk_cap(id)
            .and_then(|_| disk::usage(&dir).map(|u| u.0));
        Some(crate::provider::limits::Usage {
            memory_peak,
            pids_peak,
            disk_used,
        })
    }

    async fn preflight(&self) -> ProviderResult<()> {
        self.ensure_inventory()
    }

    async fn create(&self, spec: &CreateSpec) -> ProviderResult<SandboxInfo> {
        self.create_sandbox(spec).await
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
        self.upload_file(id, local, remote_path).await
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
        if let Some(g) = init.as_ref().and_then(|i| i.gvisor.get()) {
            return pty::spawn_local_pty_in(&gvisor::pty_request(g, &req)?, None, [-1; 3]).await;
        }
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
        self.destroy_sandbox(id).await
    }
}

#[cfg(test)]
mod tests;
