//! Interactive sessions: an exec with a TTY, pumped by two tasks (input:
//! data, resize, kill; output: chunks, then the exit status).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bollard::container::LogOutput;
use bollard::exec::ResizeExecOptions;
use futures_util::StreamExt;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use super::client::Client;
use super::exec::{self, ExecSpec, Started};
use super::exec_script::{self, WrapperFailure};
use crate::provider::{ProviderError, ProviderResult, PtyChannel, PtyInput, PtyRequest};

/// Output chunks buffered before the session waits for the reader.
const OUTPUT_BUFFER: usize = 256;

/// Open a PTY session running `req.argv` in container `id`.
pub(super) async fn open(
    client: &Client,
    id: &str,
    user: Option<&str>,
    req: &PtyRequest,
) -> ProviderResult<PtyChannel> {
    let program = req.argv.first().ok_or_else(|| {
        ProviderError::Invalid("cannot open a session with an empty command".into())
    })?;
    exec::check_cwd(&req.cwd)?;
    precheck(client, id, user, req, program).await?;
    let token = exec_script::token();
    let spec = ExecSpec {
        argv: exec_script::pty_argv(&token, req.cols, req.rows, &req.argv),
        cwd: &req.cwd,
        env: &req.env,
        user,
        tty: true,
        stdin: false,
    };
    let started = exec::start(client, id, spec).await?;
    let api = client.api().await?;
    // The session may already be over (a quick command): a failed resize is
    // not an error then, and the exit status tells what happened.
    let _ = api
        .resize_exec(
            &started.exec_id,
            ResizeExecOptions {
                height: req.rows,
                width: req.cols,
            },
        )
        .await;
    Ok(spawn_pumps(client.clone(), id.to_string(), token, started))
}

/// Check the working directory and the executable with a plain exec first:
/// under a TTY the runtime's failure would only be text on the screen.
async fn precheck(
    client: &Client,
    id: &str,
    user: Option<&str>,
    req: &PtyRequest,
    program: &str,
) -> ProviderResult<()> {
    let spec = ExecSpec {
        argv: exec_script::find_argv(program),
        cwd: &req.cwd,
        env: &req.env,
        user,
        tty: false,
        stdin: false,
    };
    let (code, out) =
        exec::run_collect(client, id, spec, exec::Helper::small("the program lookup")).await?;
    match code {
        Some(0) => Ok(()),
        Some(1) => Err(exec::wrapper_error(WrapperFailure::Executable, id, program)),
        Some(126) if exec_script::looks_like_oci_failure(&out.stdout) => Err(exec::oci_error(
            &exec_script::oci_failure(&out.stdout),
            id,
            &req.cwd,
            "/bin/sh",
        )),
        other => Err(ProviderError::NotStarted(format!(
            "cannot check `{program}` in sandbox {id} ({}): {}{}",
            crate::exit_code::ExitText(other),
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
    }
}

/// Start the input and output tasks and hand back the channel ends.
fn spawn_pumps(client: Client, id: String, token: String, started: Started) -> PtyChannel {
    let (input_tx, input_rx) = mpsc::unbounded_channel();
    let (output_tx, output_rx) = mpsc::channel(OUTPUT_BUFFER);
    let (exit_tx, exit_rx) = oneshot::channel();
    let done = CancellationToken::new();
    let killed = Arc::new(AtomicBool::new(false));
    let Started {
        exec_id,
        output,
        input,
    } = started;
    tokio::spawn(pump_input(
        client.clone(),
        id.clone(),
        token.clone(),
        exec_id.clone(),
        input,
        input_rx,
        done.clone(),
        killed.clone(),
    ));
    tokio::spawn(async move {
        let mut output = output;
        while let Some(item) = output.next().await {
            let Ok(item) = item else { break };
            let bytes = match item {
                LogOutput::Console { message }
                | LogOutput::StdOut { message }
                | LogOutput::StdErr { message } => message,
                LogOutput::StdIn { .. } => continue,
            };
            // A reader that went away does not stop the session: keep
            // draining so the exit status can still be read.
            let _ = output_tx.send(bytes.to_vec()).await;
        }
        drop(output_tx);
        done.cancel();
        let exit = exec::exit_code(&client, &exec_id).await.ok().flatten();
        let killed = killed.load(Ordering::SeqCst);
        // A session rfs killed reports SIGKILL and `cancelled`, as on
        // every provider.
        let _ = exit_tx.send(exec::stopped_outcome(exit, killed, false, killed));
        // The session exec'd into the command, so nobody else removes its
        // group record; the sandbox may be gone already, which is fine.
        let spec = ExecSpec {
            argv: exec_script::cleanup_argv(&token),
            cwd: "/",
            env: &[],
            user: Some(exec::ROOT),
            tty: false,
            stdin: false,
        };
        let _ =
            exec::run_collect(&client, &id, spec, exec::Helper::small("the group cleanup")).await;
    });
    PtyChannel {
        input: input_tx,
        output: output_rx,
        exit: exit_rx,
    }
}

/// Forward input to the session until its output ends.
#[allow(clippy::too_many_arguments)]
async fn pump_input(
    client: Client,
    id: String,
    token: String,
    exec_id: String,
    mut input: std::pin::Pin<Box<dyn tokio::io::AsyncWrite + Send>>,
    mut rx: mpsc::UnboundedReceiver<PtyInput>,
    done: CancellationToken,
    killed: Arc<AtomicBool>,
) {
    loop {
        let msg = tokio::select! {
            msg = rx.recv() => msg,
            _ = done.cancelled() => return,
        };
        match msg {
            // Every sender was dropped: nobody can drive or close the
            // session any more, so it ends, as a local PTY session does.
            None => {
                killed.store(true, Ordering::SeqCst);
                let _ = exec::kill_group(&client, &id, &token).await;
                done.cancelled().await;
                return;
            }
            Some(PtyInput::Data(bytes)) => {
                if input.write_all(&bytes).await.is_err() || input.flush().await.is_err() {
                    done.cancelled().await;
                    return;
                }
            }
            Some(PtyInput::Resize { cols, rows }) => {
                if let Ok(api) = client.api().await {
                    let size = ResizeExecOptions {
                        height: rows,
                        width: cols,
                    };
                    let _ = api.resize_exec(&exec_id, size).await;
                }
            }
            Some(PtyInput::Kill) => {
                killed.store(true, Ordering::SeqCst);
                let _ = exec::kill_group(&client, &id, &token).await;
            }
        }
    }
}
