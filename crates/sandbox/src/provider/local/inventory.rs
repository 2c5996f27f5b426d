//! The inventory of `local` sandboxes: one directory each under
//! `<state>/local/sandboxes/<id>/`, its `meta.json` (labels, creation
//! time, isolation, network policy, cgroups, disk) and what this process
//! last read of it.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{cgroup, disk, io_err, LocalProvider};
use crate::provider::{Labels, ProviderError, ProviderResult, SandboxInfo};

/// A sandbox as its `meta.json` was last read.
#[derive(Debug, Clone)]
pub(super) struct Known {
    pub(super) info: SandboxInfo,
    pub(super) isolation: Option<String>,
    /// Its network policy.
    pub(super) network: crate::network::NetworkPolicy,
    /// Its cgroups as `meta.json` records them.
    pub(super) cgroups: Vec<cgroup::Part>,
    /// Its disk cap, bytes.
    pub(super) disk: Option<u64>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct Meta {
    pub(super) id: String,
    pub(super) labels: Labels,
    pub(super) created_unix: u64,
    /// `namespaces` or `none` (absent: created before isolation existed).
    #[serde(default)]
    pub(super) isolation: Option<String>,
    /// Whether an isolated sandbox shares the host's network (absent:
    /// written before this was recorded; re-entered without network).
    #[serde(default)]
    pub(super) network: Option<bool>,
    /// Its network policy (absent: written before policies; `network`
    /// says host or none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) network_policy: Option<crate::network::NetworkFact>,
    /// Its cgroups, one per limit (absent: none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) cgroups: Vec<cgroup::Part>,
    /// The size of its disk (a tmpfs over its directory; absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) disk: Option<u64>,
    /// Its home as its steps see it: [`super::HOME_INSIDE`] when isolated
    /// (absent: written before the home was one fixed path, or with
    /// isolation `none`: its folder `home` on the host).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) home: Option<String>,
}

impl Meta {
    /// Write `meta.json` into `dir` (whole or not at all).
    pub(super) fn write(&self, dir: &Path) -> ProviderResult<()> {
        let tmp = dir.join("meta.json.tmp");
        std::fs::write(
            &tmp,
            serde_json::to_vec_pretty(self).expect("meta serialises"),
        )
        .map_err(|e| io_err("writing sandbox metadata", e))?;
        std::fs::rename(&tmp, dir.join("meta.json"))
            .map_err(|e| io_err("writing sandbox metadata", e))
    }
}

impl LocalProvider {
    /// The folder of the inventory, made when missing.
    pub(super) fn ensure_inventory(&self) -> ProviderResult<()> {
        std::fs::create_dir_all(self.sandboxes()).map_err(|e| ProviderError::Unavailable {
            provider: "local".into(),
            message: format!("cannot create {}: {e}", self.sandboxes().display()),
        })
    }

    pub(super) fn sandboxes(&self) -> PathBuf {
        self.root.join("sandboxes")
    }

    pub(super) fn dir(&self, id: &str) -> ProviderResult<PathBuf> {
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
    pub(super) fn info(&self, id: &str) -> ProviderResult<SandboxInfo> {
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

    pub(super) fn read(&self, id: &str) -> ProviderResult<Option<SandboxInfo>> {
        Ok(self.read_meta(id)?.map(|k| k.info))
    }

    pub(super) fn read_meta(&self, id: &str) -> ProviderResult<Option<Known>> {
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
                home: meta
                    .home
                    .clone()
                    .unwrap_or_else(|| dir.join("home").to_string_lossy().into_owned()),
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

/// Create the sandbox directory `dir` with its `home` and `tmp`, on a
/// tmpfs of `disk` bytes when there is a disk cap.
pub(super) fn make_dir(dir: &Path, disk: Option<u64>) -> ProviderResult<()> {
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
pub(super) fn remove_dir(dir: &Path) {
    super::cache_layers::unmount(dir);
    super::fork::unlayer(dir);
    let _ = disk::unmount(dir);
    let _ = crate::untrusted_tree::remove(dir);
}
