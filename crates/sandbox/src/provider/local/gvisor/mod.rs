//! `isolation: "gvisor"` for `local` (#35): the sandbox runs under
//! gVisor's user-space kernel (`runsc`), so a step's system calls reach
//! gVisor's Sentry, not the host kernel.
//!
//! A gVisor sandbox is the namespaces sandbox with gVisor inside: rfs
//! starts the namespace init as for `namespaces` (it owns the sandbox's
//! network namespace — only its loopback and rfs's egress proxy at
//! `127.0.0.1:3128` — and composes the private `/etc`), then ONE gVisor
//! sandbox ([`sandbox`]: `runsc run --detach` of an OCI bundle mirroring
//! the namespaces root, [`bundle`]) in that network namespace
//! (`--network=host`: gVisor's sockets are the namespace's, so the
//! network policy holds exactly as under namespaces) and in the
//! sandbox's cgroups. Its first process is rfs's agent ([`agent`],
//! rfs's own executable bound in), which starts commands on rfs's
//! request without a `runsc` per command ([`run`]); terminals, commands
//! fed a stream and rfs's own executable enter with `runsc exec`
//! ([`exec`]). The end kills and deletes it and checks runsc no longer
//! knows it.

mod agent;
mod agent_client;
mod agent_spawn;
mod bundle;
mod exec;
mod frames;
mod host_view;
mod input;
mod keeper;
mod probe;
mod run;
mod runsc;
mod sandbox;

pub use agent::main_if_agent as agent_main;
pub use agent_client::AgentGroup;
pub(super) use bundle::Binds;
pub use keeper::main_if_keeper as keeper_main;
pub use probe::{decide, doctor_probe};
pub(super) use runsc::Enter;
pub use runsc::{rootless, unusable, DEBUG_ENV, RUNSC_ENV};
pub use sandbox::{remove_leftover, state_dir, GvisorSandbox};

use std::path::Path;
use std::process::Stdio;

use super::commands::{Output, OwnProgram};
use crate::provider::{ExecRequest, ProviderError, ProviderResult};

/// A command started in a gVisor sandbox.
#[derive(Debug)]
pub enum GvisorChild {
    /// Through `runsc exec`: terminals, commands fed a stream or running
    /// rfs's own executable, every command where the agent is not there.
    Exec(Box<exec::ExecChild>),
    /// Through rfs's agent inside ([`agent`]).
    Agent(agent_client::AgentChild),
}

impl GvisorChild {
    /// The host pid (= process group id) of a `runsc exec` client, while
    /// not reaped; none for the agent's commands (see [`AgentGroup`]).
    pub fn id(&self) -> Option<u32> {
        match self {
            GvisorChild::Exec(c) => c.id(),
            GvisorChild::Agent(_) => None,
        }
    }

    pub async fn wait(&mut self) -> std::io::Result<std::process::ExitStatus> {
        match self {
            GvisorChild::Exec(c) => c.wait().await,
            GvisorChild::Agent(c) => c.wait().await,
        }
    }
}

/// The mode name in the journal and `meta.json`.
pub const MODE: &str = "gvisor";

/// The smallest process limit a gVisor sandbox can run under: the
/// sandbox's cgroups hold gVisor itself (about 35 threads for its kernel
/// and file server, and a dozen more a process on the ptrace platform).
pub const MIN_PIDS: u64 = 128;

/// Refuse a process limit gVisor itself would exceed.
pub fn check_pids(pids: Option<u64>) -> Result<(), String> {
    match pids {
        Some(p) if p < MIN_PIDS => Err(format!(
            "process limit {p} is below the {MIN_PIDS} a gVisor sandbox needs (under isolation `gvisor` the limit counts gVisor's own threads: about 35, and a dozen more a process); raise `pids` or use isolation `namespaces`"
        )),
        _ => Ok(()),
    }
}

/// Start the gVisor sandbox of the sandbox `id` (in `dir`) in the
/// namespaces `ns` of its namespace init (none: the host's network), in
/// the cgroups `cgroup`. Blocking.
pub(super) fn attach(
    id: &str,
    dir: &Path,
    state: &Path,
    ns: Option<Enter>,
    cgroup: [std::os::fd::RawFd; 3],
    binds: Binds,
) -> Result<GvisorSandbox, super::SetupError> {
    GvisorSandbox::start(id, dir, state, ns, cgroup, binds).map_err(super::SetupError::View)
}

/// Start `req` in gVisor sandbox `g` (of the sandbox in `dir`) with
/// exactly `env`; `own`: rfs's own executable, bound in the sandbox.
pub(super) fn start(
    g: &GvisorSandbox,
    dir: &Path,
    id: &str,
    req: &ExecRequest,
    env: &[(String, String)],
    own: Option<OwnProgram>,
) -> ProviderResult<(GvisorChild, Output, Output)> {
    let own_exe = own.is_some();
    start_with_stdin(g, dir, id, req, env, own.map(|o| o.stdin), own_exe)
}

/// [`start`] with `stdin` as the command's standard input (`None`:
/// `/dev/null`); `own_exe`: the program is rfs's own executable.
pub(super) fn start_with_stdin(
    g: &GvisorSandbox,
    dir: &Path,
    id: &str,
    req: &ExecRequest,
    env: &[(String, String)],
    stdin: Option<std::os::fd::OwnedFd>,
    own_exe: bool,
) -> ProviderResult<(GvisorChild, Output, Output)> {
    let prog = req.argv.first().map_or("", String::as_str);
    let cannot = |e: &dyn std::fmt::Display| super::commands::cannot_start(prog, id, e);
    if !exec::cwd_exists(dir, &req.cwd) {
        return Err(super::commands::missing_cwd(id, &req.cwd));
    }
    let argv = if own_exe {
        g.own_argv(&req.argv)
            .ok_or_else(|| cannot(&"rfs's own executable is not bound into this gVisor sandbox"))?
    } else {
        req.argv.clone()
    };
    let (cmd, files) = g
        .exec_command(&argv, env, &req.cwd, false)
        .map_err(|e| cannot(&e))?;
    let mut cmd = tokio::process::Command::from(cmd);
    cmd.stdin(stdin.map_or(Stdio::null(), Stdio::from))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut client = cmd.spawn().map_err(|e| cannot(&e))?;
    let out: Output = Box::pin(client.stdout.take().expect("piped"));
    let err: Output = Box::pin(client.stderr.take().expect("piped"));
    Ok((
        GvisorChild::Exec(Box::new(g.child(client, files))),
        out,
        err,
    ))
}

/// The [`crate::provider::PtyRequest`] that runs `req` (with exactly
/// its environment, in its directory inside) in gVisor sandbox `g` under
/// the terminal the host side gives it: `runsc exec` of a process file
/// with `terminal: true` (gVisor's terminal over the host's).
pub(super) fn pty_request(
    g: &GvisorSandbox,
    req: &crate::provider::PtyRequest,
) -> ProviderResult<crate::provider::PtyRequest> {
    let (cmd, _files) = g
        .exec_command(&req.argv, &req.env, &req.cwd, true)
        .map_err(|e| ProviderError::NotStarted(format!("pty: cannot start in gVisor: {e}")))?;
    let mut argv = vec![cmd.get_program().to_string_lossy().into_owned()];
    argv.extend(cmd.get_args().map(|a| a.to_string_lossy().into_owned()));
    Ok(crate::provider::PtyRequest {
        argv,
        env: vec![("PATH".to_owned(), super::env::host_path().to_owned())],
        cwd: "/".into(),
        ..req.clone()
    })
}
