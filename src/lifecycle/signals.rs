//! Signals: every terminating signal a terminal or a supervisor sends is
//! an orderly interrupt with verified cleanup.

use tokio_util::sync::CancellationToken;

use rfs_evidence::error::Error;

/// Listeners for every terminating signal a terminal or a supervisor
/// sends: SIGINT (Ctrl-C), SIGTERM (kill, systemd, docker stop), SIGHUP
/// (terminal closed, SSH session lost) and SIGQUIT (Ctrl-\\). Installed
/// before the run starts so that any of them, at any moment after the
/// journal exists, is an orderly interrupt with verified cleanup.
pub(crate) struct Signals {
    listeners: Vec<tokio::signal::unix::Signal>,
}

/// The signals [`Signals`] turns into an interrupt.
pub const INTERRUPT_SIGNALS: [&str; 4] = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT"];

impl Signals {
    /// Install the listeners (must be called within the runtime).
    pub(crate) fn install(rt: &tokio::runtime::Runtime) -> Option<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        let _guard = rt.enter();
        let kinds = [
            SignalKind::interrupt(),
            SignalKind::terminate(),
            SignalKind::hangup(),
            SignalKind::quit(),
        ];
        let listeners = kinds
            .into_iter()
            .map(signal)
            .collect::<std::io::Result<Vec<_>>>()
            .ok()?;
        Some(Signals { listeners })
    }

    /// Wait for one of [`INTERRUPT_SIGNALS`]; returns its name.
    pub(crate) async fn recv(&mut self) -> &'static str {
        let waits = self.listeners.iter_mut().map(|s| Box::pin(s.recv()));
        let (_, index, _) = futures_util::future::select_all(waits).await;
        INTERRUPT_SIGNALS[index]
    }
}

/// Cancel `interrupt` on any of [`INTERRUPT_SIGNALS`], saying `what`
/// happens then; the listeners live as long as the returned runtime (for
/// commands that drive several runs, each with `handle_signals` off).
pub(crate) fn cancel_on_signals(
    interrupt: &CancellationToken,
    what: &'static str,
) -> Result<tokio::runtime::Runtime, Error> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .map_err(Error::internal)?;
    if let Some(mut signals) = Signals::install(&rt) {
        let token = interrupt.clone();
        rt.spawn(async move {
            let name = signals.recv().await;
            errln!("{name}: {what}");
            token.cancel();
        });
    }
    Ok(rt)
}

pub(crate) async fn wait_signal(signals: Option<&mut Signals>) {
    match signals {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}
