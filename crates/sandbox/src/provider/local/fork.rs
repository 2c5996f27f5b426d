//! Setup once, fork per proof on `local` (#36).
//!
//! A checkpoint is a copy of a sandbox's writable folders (`home` and
//! `tmp`), taken by descriptor beneath each folder (a process of the
//! setup still running cannot make the copy follow a link out of it:
//! [`crate::untrusted_tree`]; copy-on-write where the filesystem can),
//! under `<state>/local/checkpoints/<id>/` with a
//! `meta.json` of its labels. A fork is a new sandbox whose `home` and
//! `tmp` are overlayfs mounts: the checkpoint's folder the read-only
//! lower layer, the fork's own folder the upper one — mounting costs the
//! same whatever the tree's size, and what a fork writes stays its own
//! (forks never see each other's writes, nor change the checkpoint).
//! Where overlayfs cannot be mounted (not root, no overlay support) the
//! fork gets a copy of the checkpoint, and its fact says so and why.

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use super::{io_err, LocalProvider};
use crate::provider::fork::{Checkpoint, Fork, Forked};
use crate::provider::{CreateSpec, Labels, ProviderError, ProviderResult};

/// The writable folders of a sandbox a checkpoint keeps.
const LAYERS: [&str; 2] = ["home", "tmp"];
/// Where a fork keeps its upper and work folders (never seen inside).
const FORK_DIR: &str = ".fork";

/// `meta.json` of a checkpoint.
#[derive(Serialize, Deserialize)]
struct CheckpointMeta {
    id: String,
    name: String,
    labels: Labels,
    /// The sandbox it was taken from, and that sandbox's home.
    sandbox: String,
    home: String,
    created_unix: u64,
}

impl LocalProvider {
    fn checkpoints(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    fn checkpoint_dir(&self, id: &str) -> ProviderResult<PathBuf> {
        let ours =
            id.starts_with("ckpt-") && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-');
        if !ours {
            return Err(ProviderError::NotFound { id: id.into() });
        }
        Ok(self.checkpoints().join(id))
    }

    /// Where checkpoint `id` is made before it is whole (renamed to its
    /// [`Self::checkpoint_dir`] when it is). Its `meta.json` (the owner's
    /// labels) is written first: an rfs killed while copying leaves a
    /// folder `rfs gc` can judge and remove.
    fn partial_dir(&self, id: &str) -> ProviderResult<PathBuf> {
        self.checkpoint_dir(id)?;
        Ok(self.checkpoints().join(format!(".{id}.partial")))
    }

    /// Remove what an rfs killed while removing a sandbox or checkpoint
    /// left in `trash/` (renamed there to be removed; whoever removes it
    /// first does, a concurrent removal is harmless).
    fn empty_trash(&self) {
        let Ok(entries) = std::fs::read_dir(self.root.join("trash")) else {
            return;
        };
        for e in entries.flatten() {
            let _ = crate::untrusted_tree::remove(&e.path());
        }
    }
}

/// The bytes the files under `dir` take (links not followed; a block
/// per file at least, as a filesystem spends them).
fn tree_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.path().symlink_metadata() {
            Ok(m) if m.is_dir() => m.blocks() * 512 + tree_bytes(&e.path()),
            Ok(m) => (m.blocks() * 512).max(m.len()),
            Err(_) => 0,
        })
        .sum()
}

/// Copy `from` to `to` (which must not exist): by descriptor beneath
/// `from`, never following a link the sandbox made, keeping links,
/// modes (narrowed: no setuid, setgid or world-write bit), times and hard
/// links; copy-on-write where the filesystem can. Devices, fifos and
/// sockets are not kept. See [`crate::untrusted_tree`].
fn copy_tree(from: &Path, to: &Path) -> Result<(), String> {
    crate::untrusted_tree::copy(from, to)
        .map(|_| ())
        .map_err(|e| format!("copying {} to {}: {e}", from.display(), to.display()))
}

/// Mount `lower` read-only under the sandbox folder `dir`'s layers, each
/// with an upper folder of the fork's own; else copy them. Returns how.
pub(super) fn layer(dir: &Path, lower: &Path) -> ProviderResult<String> {
    match overlay(dir, lower) {
        Ok(()) => Ok("overlayfs: the checkpoint is the read-only lower layer, the fork's own folder the upper".into()),
        Err(why) => {
            unlayer(dir);
            for l in LAYERS {
                let target = dir.join(l);
                let _ = std::fs::remove_dir(&target);
                copy_tree(&lower.join(l), &target).map_err(ProviderError::Provision)?;
            }
            Ok(format!("a copy of the checkpoint (overlayfs not possible here: {why})"))
        }
    }
}

fn overlay(dir: &Path, lower: &Path) -> Result<(), String> {
    if !super::sys::host_root() {
        return Err("mounting overlayfs on the host needs root".into());
    }
    if [lower, dir]
        .iter()
        .any(|p| p.to_string_lossy().contains([',', ':', '\\']))
    {
        return Err("a path holds `,`, `:` or `\\`, which overlayfs options cannot carry".into());
    }
    for l in LAYERS {
        let (upper, work) = (
            dir.join(FORK_DIR).join("upper").join(l),
            dir.join(FORK_DIR).join("work").join(l),
        );
        for d in [&upper, &work] {
            std::fs::create_dir_all(d).map_err(|e| format!("{}: {e}", d.display()))?;
        }
        // The upper's root takes the lower's owner and mode (the home's).
        let _ = std::process::Command::new("chmod")
            .arg("--reference")
            .arg(lower.join(l))
            .arg(&upper)
            .status();
        super::overlay::mount("rfs-fork", &dir.join(l), &lower.join(l), &upper, &work, "")?;
    }
    Ok(())
}

/// Unmount a fork's overlays (none mounted: nothing to do).
pub(super) fn unlayer(dir: &Path) {
    for l in LAYERS {
        let at = dir.join(l);
        if nix::sys::statfs::statfs(&at)
            .is_ok_and(|s| s.filesystem_type() == nix::sys::statfs::OVERLAYFS_SUPER_MAGIC)
        {
            let _ = nix::mount::umount2(&at, nix::mount::MntFlags::MNT_DETACH);
        }
    }
}

/// A partial checkpoint without its `meta.json` is one whose rfs was
/// killed between creating it and writing that file (it is written
/// first): garbage once older than a minute, whoever made it.
fn remove_if_stale_partial(e: &std::fs::DirEntry) {
    let name = e.file_name();
    let name = name.to_string_lossy();
    if !(name.starts_with(".ckpt-") && name.ends_with(".partial")) {
        return;
    }
    let old = e
        .metadata()
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > std::time::Duration::from_secs(60));
    if old {
        let _ = crate::untrusted_tree::remove(&e.path());
    }
}

#[async_trait]
impl Fork for LocalProvider {
    async fn checkpoint(
        &self,
        id: &str,
        name: &str,
        labels: &Labels,
    ) -> ProviderResult<Checkpoint> {
        let info = self.info(id)?;
        let dir = self.dir(id)?;
        let cid = format!("ckpt-{}", uuid::Uuid::new_v4().simple());
        let dest = self.checkpoint_dir(&cid)?;
        std::fs::create_dir_all(self.checkpoints())
            .map_err(|e| io_err("creating checkpoints", e))?;
        let partial = self.partial_dir(&cid)?;
        let meta = CheckpointMeta {
            id: cid.clone(),
            name: name.to_owned(),
            labels: labels.clone(),
            sandbox: id.to_owned(),
            home: info.home.clone(),
            created_unix: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        };
        let (p2, d2) = (partial.clone(), dest.clone());
        let made = tokio::task::spawn_blocking(move || {
            std::fs::create_dir(&p2).map_err(|e| format!("{}: {e}", p2.display()))?;
            std::fs::write(
                p2.join("meta.json"),
                serde_json::to_vec_pretty(&meta).expect("meta serialises"),
            )
            .map_err(|e| format!("writing the checkpoint's meta.json: {e}"))?;
            for l in LAYERS {
                copy_tree(&dir.join(l), &p2.join(l))?;
            }
            let bytes = tree_bytes(&p2);
            std::fs::rename(&p2, &d2).map_err(|e| format!("{}: {e}", d2.display()))?;
            Ok::<_, String>(bytes)
        })
        .await
        .map_err(|e| ProviderError::Io(e.to_string()))?;
        let bytes = match made {
            Ok(bytes) => bytes,
            Err(why) => {
                let _ = crate::untrusted_tree::remove(&partial);
                return Err(ProviderError::Provision(format!(
                    "cannot checkpoint sandbox {id}: {why}"
                )));
            }
        };
        Ok(Checkpoint {
            id: cid,
            how: "a copy of the sandbox's home and /tmp made by descriptor (no link followed; no device, setuid bit or world-write kept; copy-on-write where possible), forked through overlayfs".into(),
            home: info.home,
            host_bytes: Some(bytes),
        })
    }

    async fn fork(&self, checkpoint: &Checkpoint, spec: &CreateSpec) -> ProviderResult<Forked> {
        let lower = self.checkpoint_dir(&checkpoint.id)?;
        if !lower.join("meta.json").is_file() {
            return Err(ProviderError::NotFound {
                id: checkpoint.id.clone(),
            });
        }
        let (info, how) = self.create_sandbox_from(spec, Some(&lower)).await?;
        Ok(Forked {
            info,
            how: how.unwrap_or_default(),
        })
    }

    async fn remove_checkpoint(&self, id: &str) -> ProviderResult<()> {
        let trash = self.root.join("trash");
        std::fs::create_dir_all(&trash).map_err(|e| io_err("creating trash", e))?;
        let gone = trash.join(format!("{id}-{}", uuid::Uuid::new_v4().simple()));
        // Whole, or as an rfs killed while making it left it.
        let mut moved = false;
        for dir in [self.checkpoint_dir(id)?, self.partial_dir(id)?] {
            match std::fs::rename(&dir, &gone) {
                Ok(()) => {
                    moved = true;
                    break;
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io_err(&format!("removing checkpoint {id}"), e)),
            }
        }
        if !moved {
            return Ok(());
        }
        tokio::task::spawn_blocking(move || crate::untrusted_tree::remove(&gone))
            .await
            .map_err(|e| ProviderError::Io(e.to_string()))?
            .map_err(|e| io_err(&format!("removing checkpoint {id}"), e))
    }

    async fn list_checkpoints(&self) -> ProviderResult<Vec<(String, Labels)>> {
        self.empty_trash();
        let entries = match std::fs::read_dir(self.checkpoints()) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(e) => return Err(io_err("listing checkpoints", e)),
        };
        let mut out = vec![];
        for e in entries.flatten() {
            let Ok(bytes) = std::fs::read(e.path().join("meta.json")) else {
                remove_if_stale_partial(&e);
                continue;
            };
            if let Ok(m) = serde_json::from_slice::<CheckpointMeta>(&bytes) {
                let whole = self.checkpoint_dir(&m.id).is_ok_and(|d| d == e.path());
                let partial = self.partial_dir(&m.id).is_ok_and(|d| d == e.path());
                if whole || partial {
                    out.push((m.id, m.labels));
                }
            }
        }
        out.sort();
        Ok(out)
    }

    async fn checkpoint_exists(&self, id: &str) -> ProviderResult<bool> {
        Ok(self.checkpoint_dir(id)?.exists() || self.partial_dir(id)?.exists())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A checkpoint folder (`home/f`, `tmp/t`) and a fresh sandbox folder
    /// under `parent` (whose name decides whether overlayfs can take it).
    fn folders(parent: &Path) -> (PathBuf, PathBuf) {
        let lower = parent.join("ckpt");
        let dir = parent.join("sandbox");
        for l in LAYERS {
            std::fs::create_dir_all(lower.join(l)).unwrap();
            std::fs::create_dir_all(dir.join(l)).unwrap();
        }
        std::fs::write(lower.join("home/f"), "from the checkpoint").unwrap();
        std::fs::write(lower.join("tmp/t"), "tmp").unwrap();
        (lower, dir)
    }

    #[test]
    fn a_fork_sees_the_checkpoint_and_its_writes_never_reach_it() {
        if !super::super::sys::host_root() {
            return; // overlayfs on the host needs root (the copy is tested below)
        }
        let d = tempfile::tempdir().unwrap();
        let (lower, dir) = folders(d.path());
        let how = layer(&dir, &lower).unwrap();
        assert!(how.starts_with("overlayfs"), "{how}");
        assert_eq!(
            std::fs::read_to_string(dir.join("home/f")).unwrap(),
            "from the checkpoint"
        );
        std::fs::write(dir.join("home/f"), "the fork's").unwrap();
        std::fs::write(dir.join("home/new"), "new").unwrap();
        assert_eq!(
            std::fs::read_to_string(lower.join("home/f")).unwrap(),
            "from the checkpoint"
        );
        assert!(!lower.join("home/new").exists());
        unlayer(&dir);
        assert!(
            !dir.join("home/f").exists(),
            "unmounted: only the fork's folder is left"
        );
    }

    #[test]
    fn where_overlayfs_cannot_be_mounted_the_fork_is_a_copy_and_says_why() {
        let d = tempfile::tempdir().unwrap();
        let odd = d.path().join("a,b");
        std::fs::create_dir(&odd).unwrap();
        let (lower, dir) = folders(&odd);
        let how = layer(&dir, &lower).unwrap();
        assert!(
            how.starts_with("a copy of the checkpoint (overlayfs not possible here:"),
            "{how}"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("home/f")).unwrap(),
            "from the checkpoint"
        );
        assert_eq!(std::fs::read_to_string(dir.join("tmp/t")).unwrap(), "tmp");
        std::fs::write(dir.join("home/f"), "the fork's").unwrap();
        assert_eq!(
            std::fs::read_to_string(lower.join("home/f")).unwrap(),
            "from the checkpoint"
        );
    }
}
