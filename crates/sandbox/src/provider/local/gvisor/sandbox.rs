//! One running gVisor sandbox: started once per rfs sandbox (`runsc run
//! --detach` of its bundle, in the sandbox's cgroups and network
//! namespace) with rfs's agent as its first process, entered by commands
//! through the agent or `runsc exec`, and at the end killed, deleted and
//! verified gone.

use std::ffi::OsString;
use std::os::fd::{AsRawFd as _, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::agent_client::Agent;
use super::bundle::{self, BundleSpec};
use super::runsc::{rootless, runsc, Enter, Runsc, DEBUG_ENV};

/// A running gVisor sandbox (its container id is the rfs sandbox's id).
#[derive(Debug)]
pub struct GvisorSandbox {
    pub(crate) runsc: &'static Runsc,
    /// runsc's state directory (`<state>/local/runsc`).
    pub(crate) state: PathBuf,
    pub(crate) cid: String,
    /// The bundle directory (`dir/gvisor`): process files live there.
    pub(crate) bundle: PathBuf,
    /// rfs's end of the pipe the sandbox's first process waits on (when
    /// that is not the agent).
    lifeline: Mutex<Option<OwnedFd>>,
    /// rfs's agent inside, which starts commands without `runsc exec`
    /// (where rfs's own executable is bound in).
    pub(crate) agent: Option<Arc<Agent>>,
    /// Whether rfs's own executable is bound in ([`bundle::OWN_EXE_INSIDE`]).
    pub(crate) own_exe: bool,
    /// The namespaces every runsc call enters first (rootless, with a
    /// network namespace of the sandbox's own: [`Enter`]).
    pub(crate) enter: Option<Enter>,
    /// The keeper reaping gVisor's processes ([`super::keeper`]), waited
    /// for at the end.
    keeper: Mutex<Option<std::process::Child>>,
    destroyed: std::sync::atomic::AtomicBool,
}

/// How long the agent may take to say it runs (its process start under
/// gVisor; seconds on a loaded machine).
const AGENT_WITHIN: Duration = Duration::from_secs(20);

/// How long the keeper may take to end once gVisor's processes were
/// killed (it reaps them as they exit).
const KEEPER_WITHIN: Duration = Duration::from_secs(10);

/// Where the states of rfs's gVisor sandboxes live, for the local
/// provider rooted at `local_root` (`<state>/local`).
pub fn state_dir(local_root: &Path) -> PathBuf {
    local_root.join("runsc")
}

impl GvisorSandbox {
    /// Start the gVisor sandbox of the rfs sandbox `cid` living in `dir`:
    /// in the network namespace of `ns` (`None`: the host's) and the
    /// cgroups whose `tasks` are `cgroup` (`-1`: none). Blocking.
    ///
    /// As root, runsc joins the network namespace the bundle names;
    /// rootless, every runsc call enters the sandbox's user and network
    /// namespaces first ([`Enter`]).
    pub fn start(
        cid: &str,
        dir: &Path,
        state: &Path,
        ns: Option<Enter>,
        cgroup: [std::os::fd::RawFd; 3],
        (caches, host_mounts): bundle::Binds,
    ) -> Result<GvisorSandbox, String> {
        let runsc = runsc()?;
        let own_exe = crate::provider::own_executable::executable()
            .and_then(|p| std::fs::canonicalize(p).ok())
            .filter(|p| p.is_file());
        let host_dirs = super::host_view::host_dirs(dir);
        // Before anything of the sandbox exists: refused here, nothing runs.
        // The person's host folders are served id-mapped as well.
        let served: Vec<_> = host_mounts.iter().map(|m| m.host_dir.clone()).collect();
        let id_mapped = super::host_view::prepare(&[&host_dirs[..], &served[..]].concat())?;
        let (netns, enter) = match ns {
            Some(e) if rootless() => (None, Some(e)),
            other => (other.map(|e| e.net), None),
        };
        let spec = BundleSpec {
            netns,
            own_exe: own_exe.clone(),
            caches,
            host_dirs,
            host_mounts,
        };
        let bundle = bundle::write(dir, &spec)
            .map_err(|e| format!("cannot write its OCI bundle in {}: {e}", dir.display()))?;
        std::fs::create_dir_all(state)
            .map_err(|e| format!("cannot create runsc's state directory: {e}"))?;
        // A kept sandbox's gVisor sandbox ended with its run: its state
        // goes before a fresh one takes the name.
        remove_leftover(state, cid)?;
        let pipe = || {
            crate::provider::input::pipe_cloexec()
                .map_err(|e| format!("cannot make its lifeline pipe: {e}"))
        };
        let (life_r, life_w) = pipe()?;
        // The agent's answers (its standard output).
        let answers = own_exe.is_some().then(pipe).transpose()?;
        let errors = bundle.join("runsc-run.log");
        let log = std::fs::File::create(&errors)
            .map_err(|e| format!("cannot create {}: {e}", errors.display()))?;
        let mut argv = runsc.invocation(state, enter.as_ref());
        argv.extend(["run", "--detach", "--bundle"].map(OsString::from));
        argv.push(bundle.clone().into());
        argv.push(cid.into());
        // Through a keeper where rfs's executable is known, which reaps
        // gVisor's processes when they end ([`super::keeper`]).
        let status_pipe = own_exe.is_some().then(pipe).transpose()?;
        let mut cmd = match (&own_exe, &status_pipe) {
            (Some(exe), Some((_, w))) => {
                let mut c = std::process::Command::new(exe);
                // Its own group: a terminal's signals are rfs's to handle.
                std::os::unix::process::CommandExt::process_group(&mut c, 0);
                c.arg(super::keeper::ARG)
                    .arg(w.as_raw_fd().to_string())
                    .arg("--")
                    .args(&argv);
                keep_open(&mut c, w.as_raw_fd());
                c
            }
            _ => {
                let mut c = std::process::Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        // The sandbox keeps these as its first process's standard streams:
        // stdin is the lifeline (the agent's requests), stdout the agent's
        // answers, else a file as stderr is (a pipe would stay open).
        let (answers_r, stdout) = match answers {
            Some((r, w)) => (Some(r), Stdio::from(w)),
            None => (
                None,
                Stdio::from(log.try_clone().map_err(|e| e.to_string())?),
            ),
        };
        cmd.current_dir("/")
            .env_clear()
            .env("PATH", super::super::env::host_path())
            .stdin(Stdio::from(life_r))
            .stdout(stdout)
            .stderr(Stdio::from(log));
        join_cgroups(&mut cmd, cgroup);
        id_mapped.apply(&mut cmd);
        let cannot = |e: std::io::Error| {
            format!(
                "cannot run {} (in a mount namespace of its own, over id-mapped copies of the system directories): {e}",
                runsc.path.display()
            )
        };
        let (code, keeper) = match status_pipe {
            Some((status_r, status_w)) => {
                let mut keeper = cmd.spawn().map_err(cannot)?;
                drop(status_w);
                drop(cmd);
                match read_status(status_r) {
                    Some(code) => (code, Some(keeper)),
                    None => {
                        let ended = keeper.wait();
                        // Whatever runsc had started of it goes.
                        let _ = remove_leftover_in(state, cid, enter.as_ref());
                        return Err(format!(
                            "rfs's keeper of the gVisor sandbox ended before runsc did ({}): {}",
                            ended.map_or_else(|e| e.to_string(), |s| s.to_string()),
                            std::fs::read_to_string(&errors).unwrap_or_default().trim()
                        ));
                    }
                }
            }
            None => {
                let status = cmd.status().map_err(cannot)?;
                drop(cmd);
                let code = status.code().unwrap_or_else(|| {
                    use std::os::unix::process::ExitStatusExt as _;
                    128 + status.signal().unwrap_or(0)
                });
                (code, None)
            }
        };
        // rfs's copies of the sandbox's ends are closed: only gVisor holds them.
        let mut sandbox = GvisorSandbox {
            runsc,
            state: state.to_path_buf(),
            cid: cid.to_owned(),
            bundle,
            lifeline: Mutex::new(Some(life_w)),
            agent: None,
            own_exe: own_exe.is_some(),
            enter,
            keeper: Mutex::new(keeper),
            destroyed: false.into(),
        };
        if code != 0 {
            let said = std::fs::read_to_string(&errors).unwrap_or_default();
            let _ = sandbox.destroy();
            return Err(format!(
                "runsc {} could not start it (exit {code}): {}{}",
                runsc.version,
                said.trim(),
                debug_hint()
            ));
        }
        if let Some(answers) = answers_r {
            let requests = sandbox.lifeline.lock().expect("lifeline").take();
            let requests = requests.expect("the lifeline is rfs's until the end");
            match Agent::connect(requests, answers, AGENT_WITHIN) {
                Ok(agent) => sandbox.agent = Some(agent),
                Err(why) => {
                    let _ = sandbox.destroy();
                    let said = std::fs::read_to_string(&errors).unwrap_or_default();
                    return Err(format!(
                        "rfs's agent did not start in it ({why}): {}{}",
                        said.trim(),
                        debug_hint()
                    ));
                }
            }
        }
        Ok(sandbox)
    }

    /// `runsc` with rfs's flags for this sandbox.
    pub(crate) fn command(&self) -> std::process::Command {
        self.runsc.command_in(&self.state, self.enter.as_ref())
    }

    /// The program and leading arguments of [`GvisorSandbox::command`].
    pub(crate) fn invocation(&self) -> Vec<std::ffi::OsString> {
        self.runsc.invocation(&self.state, self.enter.as_ref())
    }

    /// Kill and delete the sandbox, then check runsc no longer knows it.
    /// Blocking (gVisor's sandbox takes a second or two to end).
    pub fn destroy(&self) -> Result<(), String> {
        if self
            .destroyed
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return Ok(());
        }
        drop(self.lifeline.lock().expect("lifeline lock").take());
        if let Some(agent) = &self.agent {
            agent.close();
        }
        let quiet = |mut c: std::process::Command| {
            c.stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .output()
        };
        let mut kill = self.command();
        kill.args(["kill", &self.cid, "KILL"]);
        let _ = quiet(kill);
        let mut delete = self.command();
        delete.args(["delete", "--force", &self.cid]);
        let deleted = quiet(delete).map_err(|e| format!("cannot run runsc delete: {e}"));
        let gone = match deleted {
            Ok(_) if !self.known() => Ok(()),
            Ok(d) => Err(format!(
                "gVisor sandbox {} is still there after runsc delete: {}",
                self.cid,
                String::from_utf8_lossy(&d.stderr).trim()
            )),
            Err(e) => Err(e),
        };
        // On every path: a keeper left unwaited would stay a zombie of a
        // long-lived rfs (`rfs mcp`, `rfs repl`).
        self.end_keeper();
        gone
    }

    /// Wait (bounded) for the keeper, which ends once it reaped gVisor's
    /// processes; killed if it does not.
    fn end_keeper(&self) {
        let Some(mut keeper) = self.keeper.lock().expect("keeper lock").take() else {
            return;
        };
        let deadline = std::time::Instant::now() + KEEPER_WITHIN;
        while matches!(keeper.try_wait(), Ok(None)) && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = keeper.kill();
        let _ = keeper.wait();
    }

    /// Whether runsc still has a state for this sandbox.
    pub fn known(&self) -> bool {
        known(&self.state, &self.cid)
    }
}

/// Delete what runsc still has of container `cid` (a sandbox whose rfs
/// ended without destroying it), and check it is gone.
pub fn remove_leftover(state: &Path, cid: &str) -> Result<(), String> {
    remove_leftover_in(state, cid, None)
}

/// [`remove_leftover`] of a sandbox whose namespaces may still be there:
/// rootless, runsc reaches its sandbox only inside them ([`Enter`]).
fn remove_leftover_in(state: &Path, cid: &str, enter: Option<&Enter>) -> Result<(), String> {
    if !known(state, cid) {
        return Ok(());
    }
    let runsc = runsc()?;
    let out = runsc
        .command_in(state, enter)
        .args(["delete", "--force", cid])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run runsc delete: {e}"))?;
    if known(state, cid) {
        return Err(format!(
            "gVisor sandbox {cid} is still there after runsc delete: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(())
}

/// Whether runsc's state directory `state` holds container `cid`.
pub fn known(state: &Path, cid: &str) -> bool {
    std::fs::read_dir(state).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let name = e.file_name();
            let name = name.to_string_lossy();
            name.ends_with(&format!("_sandbox:{cid}.state"))
                || name.ends_with(&format!("_sandbox:{cid}.lock"))
        })
    })
}

/// The processes `cmd` starts join the cgroups `fds` (`-1`: none).
pub(crate) fn join_cgroups(cmd: &mut std::process::Command, fds: [std::os::fd::RawFd; 3]) {
    use std::os::unix::process::CommandExt as _;
    if fds.iter().all(|&f| f < 0) {
        return;
    }
    // SAFETY: only write(2) runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if super::super::cgroup::join(&fds) {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// The child `cmd` starts inherits `fd` (made close-on-exec).
fn keep_open(cmd: &mut std::process::Command, fd: std::os::fd::RawFd) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: only fcntl(2) runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == 0 {
                Ok(())
            } else {
                Err(std::io::Error::last_os_error())
            }
        });
    }
}

/// The exit code the keeper says runsc ended with; `None` if it ended
/// without saying.
fn read_status(r: OwnedFd) -> Option<i32> {
    use std::io::Read as _;
    let mut bytes = [0u8; 4];
    std::fs::File::from(r).read_exact(&mut bytes).ok()?;
    Some(i32::from_ne_bytes(bytes))
}

/// What to do to see why runsc failed.
pub(crate) fn debug_hint() -> String {
    if std::env::var_os(DEBUG_ENV).is_some_and(|v| !v.is_empty()) {
        String::new()
    } else {
        format!(" (set {DEBUG_ENV}=DIR for runsc's debug logs)")
    }
}
