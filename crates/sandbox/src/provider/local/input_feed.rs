//! Feeding a command's standard input while it runs (a pipe, or a FIFO
//! for a command that runs elsewhere).

use super::*;

/// Removes a path when dropped.
pub(super) struct RemoveOnDrop(pub(super) PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Run `exec` while `feed` feeds its input; input the command did not read
/// is dropped with `feed`, a feed that failed reading its input fails the
/// call (the command saw a truncated stream).
pub(super) async fn fed_while_running(
    feed: impl std::future::Future<Output = ProviderResult<()>>,
    exec: impl std::future::Future<Output = ProviderResult<ExecOutcome>>,
) -> ProviderResult<ExecOutcome> {
    tokio::pin!(feed);
    tokio::pin!(exec);
    let mut fed = None;
    let outcome = loop {
        tokio::select! {
            r = &mut feed, if fed.is_none() => fed = Some(r),
            o = &mut exec => break o?,
        }
    };
    if let Some(Err(e)) = fed {
        return Err(e);
    }
    Ok(outcome)
}

/// The standard input of a command fed `input`: its pipe's read end as
/// it is (its producer writes straight into the command), else the read
/// end of a pipe of rfs's own, with the copy of `input` into it to run
/// while the command does ([`run_fed`]).
pub(super) fn stdin_pipe(
    input: InputStream,
) -> std::io::Result<(
    OwnedFd,
    Option<impl std::future::Future<Output = ProviderResult<()>>>,
)> {
    let input = match input.into_pipe() {
        Ok(rx) => return Ok((rx, None)),
        Err(input) => input,
    };
    let (rx, tx) = crate::provider::input::pipe_cloexec()?;
    // Sets O_NONBLOCK on the write end (the command's read end stays
    // blocking).
    let tx = tokio::net::unix::pipe::Sender::from_owned_fd(tx)?;
    Ok((rx, Some(feed_into(tx, input))))
}

/// Run `exec`, while `feed` (of [`stdin_pipe`]) feeds its input if any.
pub(super) async fn run_fed(
    feed: Option<impl std::future::Future<Output = ProviderResult<()>>>,
    exec: impl std::future::Future<Output = ProviderResult<ExecOutcome>>,
) -> ProviderResult<ExecOutcome> {
    match feed {
        Some(feed) => fed_while_running(feed, exec).await,
        None => exec.await,
    }
}

/// Copy `input` into the FIFO at `path` once a reader has opened it. A
/// reader that goes away ends the feed without error (the command's
/// outcome says why); an error reading `input` is returned.
pub(super) async fn feed_fifo(path: PathBuf, input: InputStream) -> ProviderResult<()> {
    // Opening for writing without a reader fails (ENXIO) instead of
    // blocking; poll until the command has opened its end.
    let tx = loop {
        match tokio::net::unix::pipe::OpenOptions::new().open_sender(&path) {
            Ok(tx) => break tx,
            Err(e) if e.raw_os_error() == Some(libc::ENXIO) => {
                tokio::time::sleep(Duration::from_millis(2)).await
            }
            Err(e) => {
                return Err(ProviderError::Io(format!(
                    "the input stream broke before its end: {e}"
                )))
            }
        }
    };
    feed_into(tx, input).await
}

/// Copy `input` into `tx` ([`InputStream::copy_into`]): a reader that went
/// away ends the feed without error, an error reading `input` is returned.
async fn feed_into(
    mut tx: tokio::net::unix::pipe::Sender,
    mut input: InputStream,
) -> ProviderResult<()> {
    input.copy_into(&mut tx, 256 * 1024).await.map(drop)
}
