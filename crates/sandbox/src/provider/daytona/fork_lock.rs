//! A source is busy while Daytona forks or snapshots it: it goes
//! `forking` (`snapshotting`) and pending until the runner's job ends
//! (`sandbox.service.ts` :1176-1185, :1365-1375), and meanwhile a second
//! fork is 400 `Sandbox must be in started state to fork` or 409
//! `Sandbox state change in progress` (:1103-1108, :1308-1316), a delete
//! 409 (:2016-2018). So rfs makes one such call per source at a time in
//! the process (every provider instance shares the lock: a suite's
//! proofs run on instances of their own), waits until the source is
//! back, and still retries a busy answer with a bounded backoff (another
//! rfs, or the server's own lag): a proof never fails for a race rfs made.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use tokio::time::Instant;

use super::dto::SandboxDto;
use super::http::HttpError;
use super::Api;
use crate::provider::{ProviderError, ProviderResult};

/// How long a busy source is waited for, in all.
pub(super) const BUSY_WAIT: Duration = Duration::from_secs(180);

/// The lock of source `id` on the server `api_url`.
pub(super) fn source_lock(api_url: &str, id: &str) -> Arc<tokio::sync::Mutex<()>> {
    static LOCKS: OnceLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> = OnceLock::new();
    let mut m = super::lock(LOCKS.get_or_init(Default::default));
    m.entry(format!("{api_url} {id}")).or_default().clone()
}

/// Whether `e` is Daytona saying the source is busy (being forked,
/// snapshotted, or not back to `started` yet).
pub(super) fn busy(e: &HttpError) -> bool {
    let m = e.message().unwrap_or_default().to_ascii_lowercase();
    match e.status() {
        Some(409) => m.contains("state change in progress"),
        Some(400) => m.contains("must be in started") || m.contains("state to create a snapshot"),
        _ => false,
    }
}

impl Api {
    /// Wait until sandbox `id` is out of a busy state (`forking`,
    /// `snapshotting`, `creating`, `starting`), within `bound`; a
    /// `stopped` one (auto-stopped while the suite ran) is started.
    /// Its state then (`None`: gone).
    pub(super) async fn settled(
        &self,
        id: &str,
        bound: Duration,
    ) -> ProviderResult<Option<SandboxDto>> {
        let end = Instant::now() + bound;
        let mut wait = Duration::from_millis(50);
        let mut started_it = false;
        loop {
            let Some(d) = self.get_dto(id).await? else {
                return Ok(None);
            };
            match d.state() {
                "forking" | "snapshotting" | "creating" | "starting" | "restoring"
                    if Instant::now() < end => {}
                "stopped" if !started_it => {
                    started_it = true;
                    self.start(id).await?;
                }
                _ => return Ok(Some(d)),
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(1));
        }
    }

    /// `POST /sandbox/{id}/start`.
    async fn start(&self, id: &str) -> ProviderResult<()> {
        use super::http::{enc, Call, Retry};
        let url = format!("{}/sandbox/{}/start", self.http.config().api_url, enc(id));
        let call = Call::new("start sandbox", Some(id), reqwest::Method::POST, url)
            .retry(Retry::Idempotent);
        self.http
            .send(&call, |r| r)
            .await
            .map(|_| ())
            .map_err(Into::into)
    }

    /// `call` (a fork or a snapshot of `id`), retried while Daytona says
    /// the source is busy, with a bounded backoff; `what` names it.
    pub(super) async fn when_not_busy<T, F, Fut>(
        &self,
        id: &str,
        what: &str,
        mut call: F,
    ) -> ProviderResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, HttpError>>,
    {
        let end = Instant::now() + BUSY_WAIT;
        let mut tries = 0u32;
        loop {
            tries += 1;
            match call().await {
                Ok(v) => return Ok(v),
                Err(e) if busy(&e) && Instant::now() < end => {
                    tracing::debug!(target: "rfs::daytona", sandbox = %id, error = %e, "source busy; waiting");
                    let now = self
                        .settled(id, end.saturating_duration_since(Instant::now()))
                        .await?;
                    // Busy is worth waiting for; a source that failed or
                    // went away never comes back.
                    match now.as_ref().map(|d| d.state()) {
                        None => {
                            return Err(ProviderError::Provision(format!(
                                "cannot {what} sandbox {id}: it is gone ({e})"
                            )))
                        }
                        Some(s @ ("error" | "build_failed" | "destroyed" | "destroying")) => {
                            return Err(ProviderError::Provision(format!(
                                "cannot {what} sandbox {id}: it is `{s}` ({e})"
                            )))
                        }
                        Some(_) => {}
                    }
                    let pause = Duration::from_millis(100 * u64::from(tries.min(10)));
                    tokio::time::sleep(pause).await;
                }
                Err(e) if busy(&e) => {
                    return Err(ProviderError::Provision(format!(
                        "cannot {what} sandbox {id}: it stayed busy for {} s ({e}; {tries} tries)",
                        BUSY_WAIT.as_secs()
                    )))
                }
                Err(e) => {
                    return Err(ProviderError::Provision(format!(
                        "cannot {what} sandbox {id}: {e}"
                    )))
                }
            }
        }
    }
}
