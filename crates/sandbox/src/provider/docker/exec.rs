//! Running commands in a container: the exec round trip (create, start,
//! stream, inspect), the wrapped user command with timeout and cancellation,
//! and the process-group kill.

use std::pin::Pin;
use std::time::Duration;

use bollard::container::LogOutput;
use bollard::errors::Error as BollardError;
use bollard::exec::{CreateExecOptions, StartExecOptions, StartExecResults};
use bytes::{Bytes, BytesMut};
use futures_util::{Stream, StreamExt};
use tokio::io::{AsyncWrite, AsyncWriteExt as _};

use crate::provider::input::Copied;
use crate::provider::supervisor::{Intervention, Supervisor};
use crate::provider::InputStream;

use super::client::{self, Client};
use super::exec_script::{self, OciFailure, WrapperFailure};
use super::stdin_fifo::Lane;
use crate::provider::{
    Collect, ExecOutcome, ExecRequest, OutputSink, ProviderError, ProviderResult,
};

/// SIGKILL, reported as the signal of a command rfs killed.
const SIGKILL: i32 = 9;
/// How long to wait for a killed command's output to end before asking
/// again (or giving up).
const KILL_GRACE: Duration = Duration::from_secs(5);
/// How many times a kill is attempted while the output stays open.
const KILL_ATTEMPTS: u32 = 3;
/// At most this much runtime failure text is held back from the sink.
const HOLD_LIMIT: usize = 64 * 1024;
/// The user internal commands run as.
pub(super) const ROOT: &str = "0";

/// One exec to create.
pub(super) struct ExecSpec<'a> {
    pub argv: Vec<String>,
    pub cwd: &'a str,
    pub env: &'a [(String, String)],
    pub user: Option<&'a str>,
    /// Allocate a TTY and attach stdin.
    pub tty: bool,
    /// Attach stdin without a TTY (a byte stream fed by rfs).
    pub stdin: bool,
}

/// The output stream of a started exec.
pub(super) type Output = Pin<Box<dyn Stream<Item = Result<LogOutput, BollardError>> + Send>>;

/// A started exec.
pub(super) struct Started {
    pub exec_id: String,
    pub output: Output,
    pub input: Pin<Box<dyn AsyncWrite + Send>>,
}

/// Docker `Env` entries from ordered pairs: later entries win.
pub(super) fn env_entries(env: &[(String, String)]) -> ProviderResult<Vec<String>> {
    let mut merged: Vec<(&str, &str)> = Vec::with_capacity(env.len());
    for (k, v) in env {
        crate::validate::env_var(k, v).map_err(|e| ProviderError::Invalid(e.to_string()))?;
        merged.retain(|(mk, _)| *mk != k.as_str());
        merged.push((k, v));
    }
    Ok(merged
        .into_iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect())
}

/// Refuse a relative working directory before the runtime does.
pub(super) fn check_cwd(cwd: &str) -> ProviderResult<()> {
    if cwd.starts_with('/') {
        Ok(())
    } else {
        Err(ProviderError::Invalid(format!(
            "working directory `{cwd}` is not an absolute path"
        )))
    }
}

/// Create and start an exec in container `id`.
pub(super) async fn start(
    client: &Client,
    id: &str,
    spec: ExecSpec<'_>,
) -> ProviderResult<Started> {
    let api = client.api().await?;
    let config = CreateExecOptions::<String> {
        attach_stdin: Some(spec.tty || spec.stdin),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(spec.tty),
        env: Some(env_entries(spec.env)?),
        cmd: Some(spec.argv),
        user: spec.user.map(str::to_string),
        working_dir: Some(spec.cwd.to_string()),
        ..Default::default()
    };
    let created = api
        .create_exec(id, config)
        .await
        .map_err(|e| container_error(client, id, e))?;
    let options = StartExecOptions {
        detach: false,
        tty: spec.tty,
        output_capacity: None,
    };
    match api
        .start_exec(&created.id, Some(options))
        .await
        .map_err(|e| container_error(client, id, e))?
    {
        StartExecResults::Attached { output, input } => Ok(Started {
            exec_id: created.id,
            output,
            input,
        }),
        StartExecResults::Detached => Err(ProviderError::Protocol(
            "docker started the exec detached although rfs asked to attach".into(),
        )),
    }
}

/// Map an error of an exec call on container `id`.
pub(super) fn container_error(client: &Client, id: &str, e: BollardError) -> ProviderError {
    match client::status(&e) {
        Some(404) => ProviderError::NotFound { id: id.to_string() },
        Some(409) => ProviderError::NotRunning(format!(
            "sandbox {id} is not running (its lifetime may have ended): {}",
            client::server_message(&e).unwrap_or_default()
        )),
        _ => client.error(e),
    }
}

/// The exit code of a finished exec, read after its output ended. `None`
/// when the daemon does not report one (still running, or unknown).
pub(super) async fn exit_code(client: &Client, exec_id: &str) -> ProviderResult<Option<i32>> {
    let api = client.api().await?;
    let mut delay = Duration::from_millis(5);
    for _ in 0..40 {
        let info = api
            .inspect_exec(exec_id)
            .await
            .map_err(|e| client.error(e))?;
        if info.running != Some(true) {
            return Ok(info.exit_code.and_then(|c| i32::try_from(c).ok()));
        }
        tokio::time::sleep(delay).await;
        delay = (delay * 2).min(Duration::from_millis(100));
    }
    Ok(None)
}

/// A helper rfs runs in a container, as its errors name it, and the most
/// rfs reads of each of its output streams (issue #43: a step may have
/// replaced any program of the container with one that writes without
/// end).
#[derive(Debug, Clone, Copy)]
pub(super) struct Helper {
    pub name: &'static str,
    pub max: usize,
}

impl Helper {
    /// A helper whose answer is a few lines (`id`, `mkdir`, `rm`, a probe):
    /// [`SMALL_OUTPUT`] bytes on each stream.
    pub const fn small(name: &'static str) -> Helper {
        Helper {
            name,
            max: SMALL_OUTPUT,
        }
    }
}

/// The bound of a [`Helper::small`]'s streams.
pub(super) const SMALL_OUTPUT: usize = 64 * 1024;

/// Run a short internal command to completion and collect its output, at
/// most `helper.max` bytes of each stream: past that rfs stops reading,
/// drops the exec's stream (abandoning it) and fails naming the helper
/// and the bound.
pub(super) async fn run_collect(
    client: &Client,
    id: &str,
    spec: ExecSpec<'_>,
    helper: Helper,
) -> ProviderResult<(Option<i32>, Collect)> {
    let mut started = start(client, id, spec).await?;
    let mut out = crate::provider::BoundedCollect::new(helper.max, helper.max, Default::default());
    while let Some(item) = started.output.next().await {
        route_plain(item.map_err(|e| client.error(e))?, &mut out);
        if let Some(e) = out.error(&format!("{} in sandbox {id}", helper.name)) {
            return Err(e);
        }
    }
    let code = exit_code(client, &started.exec_id).await?;
    Ok((code, out.out))
}

/// Send one output item to the sink.
pub(super) fn route_plain(item: LogOutput, sink: &mut dyn OutputSink) {
    match item {
        LogOutput::StdOut { message } | LogOutput::Console { message } => sink.stdout(&message),
        LogOutput::StdErr { message } => sink.stderr(&message),
        LogOutput::StdIn { .. } => {}
    }
}

/// Kill the process group recorded under `token` (as root) and wait until
/// its processes are gone. Returns the kill script's exit status.
pub(super) async fn kill_group(client: &Client, id: &str, token: &str) -> ProviderResult<i32> {
    let spec = ExecSpec {
        argv: exec_script::kill_argv(token),
        cwd: "/",
        env: &[],
        user: Some(ROOT),
        tty: false,
        stdin: false,
    };
    let (code, out) = run_collect(client, id, spec, Helper::small("the kill script")).await?;
    match code {
        Some(0) | Some(exec_script::KILL_NOTHING_RECORDED) => Ok(code.unwrap_or_default()),
        other => Err(ProviderError::Kill(format!(
            "could not kill a command's process group in sandbox {id} (kill: {}): {}",
            crate::exit_code::ExitText(other),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// Run a user command under the wrapper, streaming into `sink`.
pub(super) async fn run(
    client: &Client,
    id: &str,
    user: Option<&str>,
    req: &ExecRequest,
    sink: &mut dyn OutputSink,
) -> ProviderResult<ExecOutcome> {
    run_with_input(client, id, user, req, None, sink).await
}

/// Where a command's input goes: the exec's own stdin, or the sandbox's
/// stream lane.
#[derive(Clone, Copy)]
pub(super) enum Feed<'l> {
    Stdin,
    Lane(&'l Lane),
}

/// Copy `input` into the exec's stdin, then close it (the hijacked
/// connection's write side; Docker closes the command's stdin). An error
/// reading `input` is returned; a command that stops reading ends the copy
/// quietly (what it did not read is dropped).
async fn feed(
    mut input: InputStream,
    stdin: &mut Pin<Box<dyn AsyncWrite + Send>>,
) -> ProviderResult<()> {
    if input.copy_into(stdin, 256 * 1024).await? == Copied::ReaderGone {
        // The command closed its stdin: drain nothing more.
        return Ok(());
    }
    let _ = stdin.shutdown().await;
    Ok(())
}

/// [`run`] with `input` streamed into the command's standard input, over
/// the exec's own connection or through `feed`'s lane.
pub(super) async fn run_with_input(
    client: &Client,
    id: &str,
    user: Option<&str>,
    req: &ExecRequest,
    input: Option<(InputStream, Feed<'_>)>,
    sink: &mut dyn OutputSink,
) -> ProviderResult<ExecOutcome> {
    let program = checked_program(req)?;
    if req.cancel.is_cancelled() {
        return Ok(ExecOutcome {
            cancelled: true,
            ..ExecOutcome::default()
        });
    }
    let feeds = input.as_ref().map(|(_, f)| *f);
    let (token, started) = start_wrapped(client, id, user, req, feeds).await?;
    let Started {
        exec_id,
        mut output,
        input: mut stdin,
    } = started;
    let has_input = input.is_some();
    let mut feeding = std::pin::pin!(async move {
        match input {
            Some((i, Feed::Stdin)) => feed(i, &mut stdin).await,
            Some((i, Feed::Lane(l))) => l.feed(i).await,
            None => Ok(()),
        }
    });
    let mut fed = !has_input;
    let mut router = Router::new(&token);
    let mut sup = Supervisor::new(req, KILL_GRACE);
    let mut killed = false;
    let mut ended = false;
    // An error mid-command must not leave the command running.
    let mut failure: Option<ProviderError> = None;
    loop {
        let intervention = tokio::select! {
            r = &mut feeding, if !fed => {
                fed = true;
                if let Err(e) = r {
                    failure = Some(e);
                    break;
                }
                continue;
            },
            item = output.next() => match item {
                None => {
                    ended = true;
                    break;
                }
                Some(Ok(item)) => {
                    router.route(item, sink);
                    continue;
                }
                Some(Err(e)) => {
                    failure = Some(client.error(e));
                    break;
                }
            },
            i = sup.next() => i,
        };
        // The group is dead but something outside it still holds the
        // output open: stop reading.
        if intervention == Intervention::GraceOver && (sup.kills() >= KILL_ATTEMPTS || killed) {
            break;
        }
        match kill_group(client, id, &token).await {
            Ok(code) => killed |= code == 0,
            Err(e) => {
                failure = Some(e);
                break;
            }
        }
        sup.killed();
    }
    let exit = exit_after(client, id, &exec_id, &token, failure, ended).await?;
    if sup.stop().is_some() {
        router.flush(sink);
        return Ok(stopped_outcome(
            exit,
            killed,
            sup.timed_out(),
            sup.cancelled(),
        ));
    }
    if let Some(err) = router.setup_failure(exit, id, &req.cwd, program) {
        return Err(err);
    }
    router.flush(sink);
    Ok(ExecOutcome {
        exit,
        ..ExecOutcome::default()
    })
}

/// Start `req` in container `id` under the exec script's wrapper (its
/// token returned), stdin attached when `feed` is over the exec's own
/// connection.
async fn start_wrapped(
    client: &Client,
    id: &str,
    user: Option<&str>,
    req: &ExecRequest,
    feed: Option<Feed<'_>>,
) -> ProviderResult<(String, Started)> {
    let token = exec_script::token();
    let lane_path = matches!(feed, Some(Feed::Lane(_))).then(Lane::sandbox_fifo);
    let spec = ExecSpec {
        argv: exec_script::exec_argv(&token, lane_path.as_deref(), &req.argv),
        cwd: &req.cwd,
        env: &req.env,
        user,
        tty: false,
        stdin: feed.is_some() && lane_path.is_none(),
    };
    let started = start(client, id, spec).await?;
    Ok((token, started))
}

/// The command's program, once the request is one rfs can run (a
/// command, an absolute working directory).
fn checked_program(req: &ExecRequest) -> ProviderResult<&String> {
    let program = req
        .argv
        .first()
        .ok_or_else(|| ProviderError::Invalid("cannot run an empty command".into()))?;
    check_cwd(&req.cwd)?;
    Ok(program)
}

/// The command's exit code once its output ended (`None` when rfs stopped
/// reading first); after a `failure` its group is killed, so that an error
/// mid-command leaves nothing running.
async fn exit_after(
    client: &Client,
    id: &str,
    exec_id: &str,
    token: &str,
    failure: Option<ProviderError>,
    ended: bool,
) -> ProviderResult<Option<i32>> {
    let exit = match failure {
        None if ended => exit_code(client, exec_id).await,
        None => Ok(None),
        Some(e) => Err(e),
    };
    if exit.is_err() {
        let _ = kill_group(client, id, token).await;
    }
    exit
}

/// The outcome of a command rfs stopped: killed means no exit code and
/// SIGKILL (shared by plain execs and PTY sessions).
pub(super) fn stopped_outcome(
    exit: Option<i32>,
    killed: bool,
    timed_out: bool,
    cancelled: bool,
) -> ExecOutcome {
    ExecOutcome {
        exit: if killed { None } else { exit },
        signal: killed.then_some(SIGKILL),
        timed_out,
        cancelled,
    }
}

/// What the first output of a command was held back as.
enum Held {
    /// Runtime failure text (stdout), possibly in several chunks.
    Oci(BytesMut),
    /// The wrapper's marker line (stderr).
    Wrapper(WrapperFailure, Bytes),
}

/// Routes a wrapped command's output to the sink, holding back the very
/// first chunk when it may be a setup failure (the runtime's exec failure
/// text or the wrapper's marker), so that failures become provider errors
/// instead of command output.
struct Router<'t> {
    token: &'t str,
    first: bool,
    held: Option<Held>,
}

impl<'t> Router<'t> {
    fn new(token: &'t str) -> Self {
        Router {
            token,
            first: true,
            held: None,
        }
    }

    fn route(&mut self, item: LogOutput, sink: &mut dyn OutputSink) {
        let first = std::mem::replace(&mut self.first, false);
        match (&item, &mut self.held) {
            (LogOutput::StdOut { message }, None)
                if first && exec_script::looks_like_oci_failure(message) =>
            {
                self.held = Some(Held::Oci(BytesMut::from(&message[..])));
                return;
            }
            (LogOutput::StdErr { message }, None) if first => {
                if let Some(f) = exec_script::wrapper_failure(self.token, message) {
                    self.held = Some(Held::Wrapper(f, message.clone()));
                    return;
                }
            }
            (LogOutput::StdOut { message }, Some(Held::Oci(buf)))
                if buf.len() + message.len() <= HOLD_LIMIT =>
            {
                buf.extend_from_slice(message);
                return;
            }
            _ => {}
        }
        self.flush(sink);
        route_plain(item, sink);
    }

    /// Release anything held back to the sink.
    fn flush(&mut self, sink: &mut dyn OutputSink) {
        match self.held.take() {
            Some(Held::Oci(buf)) => sink.stdout(&buf),
            Some(Held::Wrapper(_, line)) => sink.stderr(&line),
            None => {}
        }
    }

    /// The setup failure the held output and exit code prove, if any.
    fn setup_failure(
        &self,
        exit: Option<i32>,
        id: &str,
        cwd: &str,
        program: &str,
    ) -> Option<ProviderError> {
        match (&self.held, exit) {
            (Some(Held::Oci(text)), Some(126)) => Some(oci_error(
                &exec_script::oci_failure(text),
                id,
                cwd,
                "/bin/sh",
            )),
            (Some(Held::Wrapper(f, _)), Some(125 | 127)) => Some(wrapper_error(*f, id, program)),
            _ => None,
        }
    }
}

/// rfs's message for a runtime exec failure.
pub(super) fn oci_error(f: &OciFailure, id: &str, cwd: &str, program: &str) -> ProviderError {
    ProviderError::NotStarted(match f {
        OciFailure::Cwd(text) if text.contains("no such file or directory") => {
            format!("working directory `{cwd}` does not exist in sandbox {id}")
        }
        OciFailure::Cwd(text) => {
            format!("cannot enter working directory `{cwd}` in sandbox {id}: {text}")
        }
        OciFailure::Executable(_) => {
            format!("`{program}` does not exist in sandbox {id}; rfs needs it to run commands")
        }
        OciFailure::Other(text) => format!("sandbox {id} could not start a command: {text}"),
    })
}

/// rfs's message for a failure reported by the wrapper.
pub(super) fn wrapper_error(f: WrapperFailure, id: &str, program: &str) -> ProviderError {
    ProviderError::NotStarted(match f {
        WrapperFailure::Executable if program.contains('/') => {
            format!("`{program}` is not an executable file in sandbox {id}")
        }
        WrapperFailure::Executable => {
            format!("command `{program}` not found on PATH in sandbox {id}")
        }
        WrapperFailure::PgidFile => format!(
            "cannot record the process group of `{program}` in /tmp of sandbox {id} \
             (is /tmp writable?)"
        ),
        WrapperFailure::Setsid => format!(
            "sandbox {id} has no `setsid`, which rfs needs to kill `{program}`'s process group"
        ),
        WrapperFailure::Stdin => format!(
            "the stream lane {} cannot be opened in sandbox {id}, so `{program}` was not started",
            super::stdin_fifo::Lane::sandbox_fifo()
        ),
    })
}
