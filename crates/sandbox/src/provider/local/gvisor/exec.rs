//! Commands in a gVisor sandbox that rfs's agent does not start
//! (terminals, commands fed a stream, rfs's own executable, a sandbox
//! without the agent): each one is `runsc exec --process FILE`
//! (a process file written in the bundle: exactly the command's argv,
//! environment and working directory, no capabilities), a child of rfs
//! whose standard streams become the command's. The command runs in the
//! sandbox's gVisor kernel; what `runsc exec` exits with is the
//! command's status (a signal `n` as `128 + n`).

use std::ffi::OsString;
use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::bundle;
use super::sandbox::GvisorSandbox;

/// A command started in a gVisor sandbox: the `runsc exec` client rfs
/// waits for. Killed (a timeout, a cancel, a drop), the command's process
/// group inside gVisor is killed too (the client cannot forward SIGKILL).
/// A command that ends by itself leaves what it started in the background
/// running until the sandbox ends (killing its group would cost another
/// `runsc exec` per step).
#[derive(Debug)]
pub struct ExecChild {
    client: tokio::process::Child,
    /// The process file, and the file runsc writes the command's pid
    /// inside gVisor into; removed once the command has ended.
    files: [PathBuf; 2],
    /// How runsc is called for this sandbox (program and flags), and its
    /// container id.
    runsc: Vec<OsString>,
    cid: String,
    ended: bool,
}

impl ExecChild {
    /// The client's pid (= its process group id), while not reaped.
    pub fn id(&self) -> Option<u32> {
        self.client.id()
    }

    pub async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        let status = self.client.wait().await?;
        if !self.ended {
            self.ended = true;
            if status.signal().is_some() {
                // rfs killed the client: the command's group goes with it.
                for argv in self.kill_inside() {
                    let _ = tokio::process::Command::new(&argv[0])
                        .args(&argv[1..])
                        .stdin(Stdio::null())
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .status()
                        .await;
                }
            }
            self.remove_files();
        }
        Ok(status)
    }

    /// The `runsc` calls that kill the command's process group inside
    /// gVisor (it leads its group there), then the command itself (none:
    /// its pid is not known, it never started).
    fn kill_inside(&self) -> Vec<Vec<OsString>> {
        let Some(pid) = std::fs::read_to_string(&self.files[1])
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok())
        else {
            return vec![];
        };
        let mut group = self.runsc.clone();
        group.extend(
            ["exec", &self.cid, "/bin/kill", "-KILL", "--"]
                .map(OsString::from)
                .into_iter()
                .chain([format!("-{pid}").into()]),
        );
        let mut leader = self.runsc.clone();
        leader.extend([
            "kill".into(),
            format!("--pid={pid}").into(),
            self.cid.clone().into(),
            "KILL".into(),
        ]);
        vec![group, leader]
    }

    fn remove_files(&self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Drop for ExecChild {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let _ = self.client.start_kill();
        let (calls, files) = (self.kill_inside(), self.files.clone());
        std::thread::spawn(move || {
            for argv in calls {
                let _ = std::process::Command::new(&argv[0])
                    .args(&argv[1..])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
            for f in files {
                let _ = std::fs::remove_file(f);
            }
        });
    }
}

impl GvisorSandbox {
    /// The `runsc exec` of `argv` with exactly `env`, in `cwd` (a path
    /// inside), under a terminal or not; the process file is written.
    /// Returns the command to spawn and the files to remove afterwards.
    pub(crate) fn exec_command(
        &self,
        argv: &[String],
        env: &[(String, String)],
        cwd: &str,
        terminal: bool,
    ) -> io::Result<(std::process::Command, [PathBuf; 2])> {
        let dir = self.bundle.join("exec");
        std::fs::create_dir_all(&dir)?;
        let name = uuid::Uuid::new_v4().simple().to_string();
        let (process, pid) = (
            dir.join(format!("{name}.json")),
            dir.join(format!("{name}.pid")),
        );
        let spec = bundle::process(argv, env, cwd, terminal);
        std::fs::write(
            &process,
            serde_json::to_vec(&spec).map_err(io::Error::other)?,
        )?;
        let mut cmd = self.command();
        cmd.arg("exec")
            .arg(format!("--process={}", process.display()))
            .arg(format!("--internal-pid-file={}", pid.display()))
            .arg(&self.cid)
            .current_dir("/")
            .env_clear()
            .env("PATH", super::super::env::host_path());
        Ok((cmd, [process, pid]))
    }

    /// Wrap the spawned client of [`GvisorSandbox::exec_command`].
    pub(crate) fn child(&self, client: tokio::process::Child, files: [PathBuf; 2]) -> ExecChild {
        ExecChild {
            client,
            files,
            runsc: self.invocation(),
            cid: self.cid.clone(),
            ended: false,
        }
    }

    /// `argv` with rfs's own executable as its program, where the
    /// sandbox has it bound in.
    pub(crate) fn own_argv(&self, argv: &[String]) -> Option<Vec<String>> {
        self.own_exe.then(|| {
            std::iter::once(bundle::OWN_EXE_INSIDE.to_owned())
                .chain(argv.iter().skip(1).cloned())
                .collect()
        })
    }
}

/// Whether the directory `cwd` (a path inside) exists in the sandbox in
/// `dir`: its home ([`super::super::HOME_INSIDE`]) and tmp are the host's
/// `dir/home` and `dir/tmp`, its `/etc` is `dir/etc`, the system
/// directories are the host's.
pub fn cwd_exists(dir: &Path, cwd: &str) -> bool {
    let p = Path::new(cwd);
    let on_host = if let Ok(rest) = p.strip_prefix(super::super::HOME_INSIDE) {
        dir.join("home").join(rest)
    } else if let Ok(rest) = p.strip_prefix("/tmp") {
        dir.join("tmp").join(rest)
    } else if let Ok(rest) = p.strip_prefix("/etc") {
        super::super::private_etc::etc_dir(dir).join(rest)
    } else {
        p.to_path_buf()
    };
    on_host.is_dir()
}
