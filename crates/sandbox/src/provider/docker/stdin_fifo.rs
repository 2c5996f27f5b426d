//! The stream's fast lane into a container: a FIFO on this machine,
//! bind-mounted read-only into the container, that a command in the
//! sandbox reads as its standard input while rfs writes into it.
//!
//! The exec's attached connection carries every byte through dockerd and
//! the containerd shim (about 3.5 CPU-seconds per GiB on top of the
//! transfer itself, here); a pipe shared through the file system carries
//! them kernel to kernel. It works only when the daemon runs on this
//! machine's kernel and file system: the lane is offered only for a daemon
//! on a local socket, and each sandbox's lane is probed before its first
//! use (a nonce written into it must come back out of the sandbox). Where
//! the probe fails the stream goes over the exec's connection, and the
//! journal says why (`source.verify.stream_fallback`).
//!
//! What the lane changes and what it does not: the command still reads a
//! plain byte stream and every check on it stays in the sandbox. The FIFO
//! is the only thing in its directory; the directory's parent on this
//! machine is private to rfs's user (mode 0700), so no other local user
//! can reach it. Inside the sandbox any process may open it (a sandbox's
//! own processes can read the source anyway); bytes one of them stole or
//! added show as a corrupted archive, which the verification refuses.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bollard::models::{Mount, MountType};
use tokio::time::Instant;

use crate::provider::{InputStream, ProviderError, ProviderResult};

/// Where the lane's directory is mounted in the container.
pub(super) const TARGET: &str = "/.rfs-stream";
/// The FIFO's name in that directory.
const FIFO: &str = "in";
/// How long a command may take to open the lane before rfs gives up.
const OPEN_DEADLINE: Duration = Duration::from_secs(30);
/// The copy's buffer.
const CHUNK: usize = 1 << 20;

/// One sandbox's lane: a private directory on this machine holding the
/// FIFO's directory. Dropping it removes both.
pub(super) struct Lane {
    root: tempfile::TempDir,
    /// The probe's outcome, decided once however many ask at once.
    pub(super) probed: tokio::sync::OnceCell<Result<(), String>>,
}

/// The start of a lane directory's name; the owning process's pid and
/// start time follow (see [`reap_orphans`]).
const PREFIX: &str = "rfs-lane-";

impl Lane {
    /// A fresh lane: `<tmp>/rfs-lane-PID-START-XXXX` (0700) / `in.d`
    /// (0755) / `in` (a FIFO, 0644: readable by the sandbox user, whoever
    /// it is). Lanes left behind by rfs processes that are gone are
    /// removed first.
    pub(super) fn new() -> io::Result<Lane> {
        use crate::provider::labels::{OWNER_PID, OWNER_PID_START};
        static REAPED: std::sync::Once = std::sync::Once::new();
        let tmp = std::env::temp_dir();
        // Orphans appear when an rfs dies: once per process is enough.
        REAPED.call_once(|| drop(reap_orphans(&tmp)));
        // The owner as sandboxes record it; a start time that cannot be
        // read stays empty, which is never judged gone.
        let owner = crate::provider::owner::owner_labels();
        let root = tempfile::Builder::new()
            .prefix(&format!(
                "{PREFIX}{}-{}-",
                owner[OWNER_PID], owner[OWNER_PID_START]
            ))
            .tempdir_in(&tmp)?;
        std::fs::set_permissions(root.path(), std::fs::Permissions::from_mode(0o700))?;
        let dir = root.path().join("in.d");
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        let fifo = dir.join(FIFO);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(io::Error::from)?;
        std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o644))?;
        Ok(Lane {
            root,
            probed: tokio::sync::OnceCell::new(),
        })
    }

    /// Put `files` (name, path on this machine) in a new directory of the
    /// lane, hard-linked where this machine allows it and copied
    /// otherwise, so the sandbox sees them at once, read-only, without an
    /// upload. Returns the directory as the sandbox sees it; see
    /// [`Lane::remove_placed`].
    pub(super) fn place(&self, files: &[(String, PathBuf)]) -> io::Result<String> {
        let name = format!("exe-{}", uuid::Uuid::new_v4().simple());
        let dir = self.dir().join(&name);
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        let placed = files.iter().try_for_each(|(n, src)| {
            let dst = dir.join(n);
            let linked = nix::unistd::linkat(
                None,
                src.as_path(),
                None,
                &dst,
                nix::fcntl::AtFlags::AT_SYMLINK_FOLLOW,
            );
            match linked {
                Ok(()) => Ok(()),
                Err(_) => std::fs::copy(src, &dst)
                    .map(drop)
                    .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", src.display()))),
            }
        });
        match placed {
            Ok(()) => Ok(format!("{TARGET}/{name}")),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Remove a directory [`Lane::place`] made (given as the sandbox sees
    /// it); anything else is left alone.
    pub(super) fn remove_placed(&self, in_sandbox: &str) -> io::Result<()> {
        let name = in_sandbox
            .strip_prefix(TARGET)
            .and_then(|n| n.strip_prefix("/exe-"))
            .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_hexdigit()))
            .ok_or_else(|| io::Error::other(format!("{in_sandbox} is not placed in the lane")))?;
        std::fs::remove_dir_all(self.dir().join(format!("exe-{name}")))
    }

    /// The directory mounted into the container.
    pub(super) fn dir(&self) -> PathBuf {
        self.root.path().join("in.d")
    }

    /// The FIFO on this machine.
    pub(super) fn host_fifo(&self) -> PathBuf {
        self.dir().join(FIFO)
    }

    /// The FIFO as the sandbox sees it.
    pub(super) fn sandbox_fifo() -> String {
        format!("{TARGET}/{FIFO}")
    }

    /// The read-only bind mount of the lane's directory.
    pub(super) fn mount(&self) -> Mount {
        Mount {
            target: Some(TARGET.to_owned()),
            source: Some(self.dir().display().to_string()),
            typ: Some(MountType::BIND),
            read_only: Some(true),
            ..Default::default()
        }
    }

    /// Copy `input` into the FIFO once a command in the sandbox opened it
    /// (within [`OPEN_DEADLINE`]), then close it: the command reads the end
    /// of its input. A command that stops reading ends the copy quietly,
    /// as with the exec's own stdin.
    pub(super) async fn feed(&self, mut input: InputStream) -> ProviderResult<()> {
        let mut fifo = open_writer(&self.host_fifo(), OPEN_DEADLINE)
            .await
            .map_err(|e| ProviderError::Io(format!("the sandbox's stream lane: {e}")))?;
        crate::provider::input::enlarge_pipe(std::os::fd::AsRawFd::as_raw_fd(&fifo));
        // A command that closed its input ends the copy quietly.
        input.copy_into(&mut fifo, CHUNK).await.map(drop)
    }
}

/// Remove the lanes in `tmp` whose owning rfs process is gone (killed
/// before its teardown; its sandbox dies by its dead-man switch or
/// `rfs gc`), judged as `rfs gc` judges a sandbox's owner: by pid and
/// process start time, on this host. A lane whose owner is alive or
/// cannot be judged, or that this user cannot remove, is left alone.
/// Returns the lanes removed.
pub(super) fn reap_orphans(tmp: &Path) -> Vec<PathBuf> {
    use crate::provider::labels;
    use crate::provider::owner::{owner_liveness, Liveness};
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return vec![];
    };
    let mut reaped = vec![];
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let mut parts = rest.splitn(3, '-');
        let (Some(pid), Some(start), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
            continue;
        };
        let owner = labels::Labels::from([
            (labels::OWNER_HOST.into(), crate::provider::owner::host()),
            (labels::OWNER_PID.into(), pid.to_owned()),
            (labels::OWNER_PID_START.into(), start.to_owned()),
        ]);
        let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
        if is_dir && matches!(owner_liveness(&owner), Liveness::Gone(_)) {
            let path = e.path();
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {
                    tracing::info!(lane = %path.display(), "removed a stream lane left behind");
                    reaped.push(path);
                }
                Err(err) => tracing::debug!(lane = %path.display(), "left alone: {err}"),
            }
        }
    }
    reaped
}

/// Whether a daemon at `host` can share a lane with this process: one on
/// a local socket (a daemon reached over the network cannot see this
/// machine's files; a local one still has to pass the probe).
pub(super) fn offered_for(host: &str) -> bool {
    host.starts_with("unix://")
}

/// Open `fifo` for writing once a reader has it open; `ENXIO` (no reader
/// yet) is retried until `deadline`. Never blocks a thread.
async fn open_writer(
    fifo: &Path,
    deadline: Duration,
) -> io::Result<tokio::net::unix::pipe::Sender> {
    let until = Instant::now() + deadline;
    let mut pause = Duration::from_millis(1);
    loop {
        match tokio::net::unix::pipe::OpenOptions::new().open_sender(fifo) {
            Ok(s) => return Ok(s),
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) && Instant::now() < until => {
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "no command in the sandbox opened {} within {}s",
                        fifo.display(),
                        deadline.as_secs()
                    ),
                ))
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lane_is_private_on_this_machine_and_readable_in_the_sandbox() {
        let lane = Lane::new().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(lane.root.path()), 0o700);
        assert_eq!(mode(&lane.dir()), 0o755);
        assert_eq!(mode(&lane.host_fifo()), 0o644);
        use std::os::unix::fs::FileTypeExt;
        assert!(std::fs::metadata(lane.host_fifo())
            .unwrap()
            .file_type()
            .is_fifo());
        let root = lane.root.path().to_path_buf();
        drop(lane);
        assert!(!root.exists(), "a dropped lane leaves its directory behind");
    }

    #[tokio::test]
    async fn a_lane_nobody_opens_gives_up_at_its_deadline() {
        let lane = Lane::new().unwrap();
        let e = open_writer(&lane.host_fifo(), Duration::from_millis(50))
            .await
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(
            e.to_string().contains("no command in the sandbox opened"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn bytes_fed_into_the_lane_reach_its_reader_whole() {
        let lane = Lane::new().unwrap();
        let fifo = lane.host_fifo();
        let reader = std::thread::spawn(move || std::fs::read(fifo).unwrap());
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        lane.feed(InputStream::new(std::io::Cursor::new(data.clone())))
            .await
            .unwrap();
        assert_eq!(reader.join().unwrap(), data);
    }

    #[test]
    fn placed_files_are_linked_or_copied_and_removed_by_their_sandbox_path() {
        let lane = Lane::new().unwrap();
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a"), "alpha").unwrap();
        let files = vec![
            ("one".to_string(), src.path().join("a")),
            // A magic link of /proc: followed, like a symlink.
            ("self".to_string(), PathBuf::from("/proc/self/exe")),
        ];
        let at = lane.place(&files).unwrap();
        assert!(at.starts_with("/.rfs-stream/exe-"), "{at}");
        let host = lane.dir().join(at.strip_prefix("/.rfs-stream/").unwrap());
        assert_eq!(std::fs::read_to_string(host.join("one")).unwrap(), "alpha");
        assert_eq!(
            std::fs::metadata(host.join("self")).unwrap().len(),
            std::fs::metadata("/proc/self/exe").unwrap().len()
        );
        assert!(lane.remove_placed("/.rfs-stream/in").is_err());
        assert!(lane.remove_placed("/.rfs-stream/exe-../../x").is_err());
        lane.remove_placed(&at).unwrap();
        assert!(!host.exists());
        assert!(lane.host_fifo().exists(), "the FIFO stays");
        // A file that cannot be read places nothing.
        let missing = vec![("x".to_string(), src.path().join("missing"))];
        assert!(lane.place(&missing).is_err());
        assert_eq!(std::fs::read_dir(lane.dir()).unwrap().count(), 1);
    }

    /// A lane whose rfs was killed before its teardown is removed by the
    /// next rfs that makes one; live owners' lanes and anything else in
    /// the temporary directory stay.
    #[test]
    fn a_lane_left_by_a_killed_rfs_is_reaped_by_the_next_one() {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let me = std::process::id();
        let start = crate::provider::owner::pid_start(me).unwrap();
        let make = |name: &str| {
            let d = tmp.path().join(name);
            std::fs::create_dir_all(d.join("in.d")).unwrap();
            d
        };
        let orphan = make(&format!("rfs-lane-{dead}-123-abc"));
        let reused = make(&format!("rfs-lane-{me}-{}-def", start + 1));
        let live = make(&format!("rfs-lane-{me}-{start}-ghi"));
        let unknown = make(&format!("rfs-lane-{me}-unknown-jkl"));
        let unparsed = make("rfs-lane-xyz");
        let other = make(&format!("not-a-lane-{dead}-123-abc"));
        let mut reaped = reap_orphans(tmp.path());
        reaped.sort();
        let mut want = vec![orphan.clone(), reused.clone()];
        want.sort();
        assert_eq!(reaped, want);
        assert!(!orphan.exists() && !reused.exists());
        assert!(live.exists() && unknown.exists() && unparsed.exists() && other.exists());
    }

    #[test]
    fn a_new_lane_is_named_after_its_owner() {
        let lane = Lane::new().unwrap();
        let name = lane
            .root
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let me = std::process::id();
        let start = crate::provider::owner::pid_start(me).unwrap();
        assert!(
            name.starts_with(&format!("rfs-lane-{me}-{start}-")),
            "{name}"
        );
        // Its own process is alive: reaping leaves it alone (called here,
        // since a process reaps only once, at its first lane).
        let reaped = reap_orphans(&std::env::temp_dir());
        assert!(!reaped.contains(&lane.root.path().to_path_buf()));
        assert!(lane.root.path().exists());
    }

    #[test]
    fn only_a_daemon_on_a_local_socket_is_offered_a_lane() {
        assert!(offered_for("unix:///var/run/docker.sock"));
        assert!(!offered_for("tcp://10.0.0.2:2375"));
        assert!(!offered_for("ssh://me@host"));
    }
}
