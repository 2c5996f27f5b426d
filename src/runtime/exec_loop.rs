//! An event loop of the script thread's own, for the commands of
//! providers whose `exec` is self-contained
//! ([`rfs_sandbox::provider::Profile::exec_is_self_contained`]).
//!
//! The run's runtime is multi-threaded and the script thread only blocks
//! on it: every readiness of a command's pipes first wakes a worker (its
//! I/O driver), which then wakes the script thread. Polled on a
//! current-thread runtime instead, the script thread waits in `epoll`
//! itself and the kernel wakes it directly: two thread hand-offs fewer
//! per readiness, which is most of what a short step costs beyond the
//! command. Timeouts and interrupts work the same (the cancellation
//! token wakes this loop from any thread).

use std::sync::OnceLock;

/// Built on first use; shut down without blocking when dropped (a run
/// may be dropped inside the main runtime's context).
#[derive(Default)]
pub(crate) struct ExecLoop {
    rt: OnceLock<Option<tokio::runtime::Runtime>>,
}

impl ExecLoop {
    /// Run `f` to completion on the calling thread's loop; `fallback`
    /// (the run's runtime) when that loop could not be built.
    pub(crate) fn block_on<F: std::future::Future>(
        &self,
        fallback: &tokio::runtime::Handle,
        f: F,
    ) -> F::Output {
        let rt = self.rt.get_or_init(|| {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .ok()
        });
        match rt {
            Some(rt) => rt.block_on(f),
            None => fallback.block_on(f),
        }
    }
}

impl Drop for ExecLoop {
    fn drop(&mut self) {
        if let Some(Some(rt)) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_a_future_with_timers_and_pipes_and_drops_inside_a_runtime() {
        let l = ExecLoop::default();
        let main = tokio::runtime::Runtime::new().unwrap();
        let got = l.block_on(main.handle(), async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            let (tx, mut rx) = tokio::net::unix::pipe::pipe().unwrap();
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let mut tx = tx;
            tx.write_all(b"x").await.unwrap();
            drop(tx);
            let mut s = vec![];
            rx.read_to_end(&mut s).await.unwrap();
            s
        });
        assert_eq!(got, b"x");
        // Dropped where blocking is not allowed (as a run may be).
        main.block_on(async move { drop(l) });
    }
}
