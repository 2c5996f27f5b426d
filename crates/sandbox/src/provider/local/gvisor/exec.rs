//! Commands in a gVisor sandbox: each one is `runsc exec --process FILE`
//! (a process file written in the bundle: exactly the command's argv,
//! environment and working directory, no capabilities), a child of rfs
//! whose standard streams become the command's. The command runs in the
//! sandbox's gVisor kernel; what `runsc exec` exits with is the
//! command's status (a signal `n` as `128 + n`).

use std::io;
use std::os::unix::process::ExitStatusExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use super::bundle;
use super::sandbox::GvisorSandbox;

/// A command started in a gVisor sandbox: the `runsc exec` client rfs
/// waits for. Killed (a timeout, a cancel, a drop), the command inside
/// gVisor is killed too (SIGKILL cannot be forwarded by the client).
#[derive(Debug)]
pub struct GvisorChild {
    client: tokio::process::Child,
    /// The process file, and the file runsc writes the command's pid
    /// inside gVisor into; removed once the command has ended.
    files: [PathBuf; 2],
    /// `runsc kill --pid PID <cid> KILL` without the pid.
    kill: Vec<String>,
    runsc: PathBuf,
    ended: bool,
}

impl GvisorChild {
    /// The client's pid (= its process group id), while not reaped.
    pub fn id(&self) -> Option<u32> {
        self.client.id()
    }

    pub async fn wait(&mut self) -> io::Result<std::process::ExitStatus> {
        let status = self.client.wait().await?;
        if !self.ended {
            self.ended = true;
            if status.signal().is_some() {
                // rfs killed the client: the command goes with it.
                let (runsc, args) = self.kill_inside();
                if let Some(args) = args {
                    let _ = tokio::process::Command::new(runsc)
                        .args(args)
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

    /// The `runsc kill` of the command inside (`None`: its pid is not
    /// known, it never started).
    fn kill_inside(&self) -> (PathBuf, Option<Vec<String>>) {
        let pid = std::fs::read_to_string(&self.files[1])
            .ok()
            .and_then(|s| s.trim().parse::<u32>().ok());
        let args = pid.map(|p| {
            let mut a = self.kill.clone();
            let cid = a.pop().expect("the kill args end with the container id");
            a.extend([format!("--pid={p}"), cid, "KILL".into()]);
            a
        });
        (self.runsc.clone(), args)
    }

    fn remove_files(&self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
    }
}

impl Drop for GvisorChild {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        let _ = self.client.start_kill();
        let (runsc, args) = self.kill_inside();
        let files = self.files.clone();
        std::thread::spawn(move || {
            if let Some(args) = args {
                let _ = std::process::Command::new(runsc)
                    .args(args)
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
    pub(crate) fn child(&self, client: tokio::process::Child, files: [PathBuf; 2]) -> GvisorChild {
        let mut kill: Vec<String> = self.runsc.flags(&self.state);
        kill.extend(["kill".into(), self.cid.clone()]);
        GvisorChild {
            client,
            files,
            kill,
            runsc: self.runsc.path.clone(),
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
/// `dir`: its home and tmp are the host's `dir/home` and `dir/tmp`, its
/// `/etc` is `dir/etc`, the system directories are the host's.
pub fn cwd_exists(dir: &Path, cwd: &str) -> bool {
    let p = Path::new(cwd);
    let on_host = if let Ok(rest) = p.strip_prefix("/tmp") {
        dir.join("tmp").join(rest)
    } else if let Ok(rest) = p.strip_prefix("/etc") {
        super::super::private_etc::etc_dir(dir).join(rest)
    } else {
        p.to_path_buf()
    };
    on_host.is_dir()
}
