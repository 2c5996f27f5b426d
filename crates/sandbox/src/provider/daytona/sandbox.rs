//! Sandbox lifecycle over the REST API: create (labels, unique name,
//! dead-man policy, bounded wait for `started`, never a blind retry), get,
//! list (both shapes, paged), delete (once; 404 and our own 409 mean
//! accepted) and the provider's own verified destroy for failed creates.

use std::time::Duration;

use reqwest::Method;
use serde_json::json;
use tokio::time::Instant;

use super::dto::{ListPage, Next, SandboxDto};
use super::http::enc;
use super::http::{Call, HttpError, Retry};
use super::network_fields::{network_fields, NetworkFields};
use super::Api;
use crate::provider::{labels, CreateSpec, Labels, ProviderError, ProviderResult};

/// Minutes of inactivity after which Daytona stops an abandoned sandbox
/// by default (rfs keeps it alive while the run lives; see
/// [`super::config::AUTO_STOP_ENV`]).
pub use super::config::AUTO_STOP_MINUTES;
/// Minutes after stopping before it is deleted: at once.
pub const AUTO_DELETE_MINUTES: u32 = 0;
/// Default bound on the wait for state `started` after create.
pub use super::config::START_WAIT;
/// Bound on the provider's own verification of a destroy.
pub const GONE_WAIT: Duration = Duration::from_secs(120);
/// Page size of list calls.
const PAGE_LIMIT: u32 = 100;
/// A list never follows more pages than this.
const MAX_PAGES: u32 = 1000;

/// States from which a sandbox will not become usable.
fn failed_state(state: &str) -> bool {
    matches!(state, "error" | "build_failed" | "destroyed" | "destroying")
}

/// The sandbox name for a run: unique per run, valid for Daytona.
pub fn sandbox_name(run_id: &str) -> String {
    let clean: String = run_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("rfs-{clean}")
}

/// The `labels` query value: a JSON object string (built by hand, never by
/// a generated client: see the SDK's parameter-ordering bug).
pub fn labels_query(want: &Labels) -> String {
    serde_json::to_string(want).unwrap_or_else(|_| "{}".into())
}

impl Api {
    fn api(&self, path: &str) -> String {
        format!("{}{path}", self.http.config().api_url)
    }

    /// `GET /sandbox/{id}`; `None` on 404. Only the exact id counts (the API
    /// also resolves names).
    pub async fn get_dto(&self, id: &str) -> ProviderResult<Option<SandboxDto>> {
        let call = Call::new(
            "get sandbox",
            Some(id),
            Method::GET,
            self.api(&format!("/sandbox/{}", enc(id))),
        );
        match self.http.json::<SandboxDto>(&call, |r| r).await {
            Ok(dto) if dto.id == id => Ok(Some(dto)),
            Ok(_) => Ok(None),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// `GET /sandbox/{name}` (the API resolves names, too).
    async fn get_by_name(&self, name: &str) -> Result<Option<SandboxDto>, HttpError> {
        let call = Call::new(
            "find sandbox by name",
            Some(name),
            Method::GET,
            self.api(&format!("/sandbox/{}", enc(name))),
        );
        match self.http.json::<SandboxDto>(&call, |r| r).await {
            Ok(dto) if dto.name.as_deref() == Some(name) => Ok(Some(dto)),
            Ok(_) => Ok(None),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every sandbox carrying all of `want`, following every page. The
    /// server filters; rfs re-checks so a filter quirk never widens it.
    pub async fn list_dtos(&self, want: &Labels) -> ProviderResult<Vec<SandboxDto>> {
        let mut out: Vec<SandboxDto> = vec![];
        let mut next = Next::Done;
        for _ in 0..MAX_PAGES {
            let mut query: Vec<(String, String)> = vec![
                ("labels".into(), labels_query(want)),
                ("limit".into(), PAGE_LIMIT.to_string()),
            ];
            match &next {
                Next::Cursor(c) => query.push(("cursor".into(), c.clone())),
                Next::Page(p) => query.push(("page".into(), p.to_string())),
                Next::Done => {}
            }
            let call = Call::new("list sandboxes", None, Method::GET, self.api("/sandbox"));
            let page: ListPage = self.http.json(&call, |r| r.query(&query)).await?;
            let (items, n) = page.split();
            for s in items {
                if labels::matches(&s.labels(), want) && !out.iter().any(|o| o.id == s.id) {
                    out.push(s);
                }
            }
            if n == Next::Done || n == next {
                return Ok(out);
            }
            next = n;
        }
        Err(ProviderError::Protocol(format!(
            "daytona: list sandboxes did not end after {MAX_PAGES} pages"
        )))
    }

    /// Create a sandbox and wait until it is `started`. Never resends the
    /// create: after an ambiguous failure the sandbox is looked up by its
    /// unique name and adopted (or destroyed when it failed).
    pub async fn create_started(&self, spec: &CreateSpec) -> ProviderResult<SandboxDto> {
        self.create_started_from(spec, None).await
    }

    /// [`Api::create_started`] from snapshot `from` (a checkpoint's)
    /// instead of the spec's or the configured one.
    pub(super) async fn create_started_from(
        &self,
        spec: &CreateSpec,
        from: Option<&str>,
    ) -> ProviderResult<SandboxDto> {
        let name = sandbox_name(&spec.run_id);
        let snapshot = from.map(str::to_owned).or_else(|| {
            spec.base
                .as_ref()
                .and_then(|b| b.snapshot())
                .map(str::to_owned)
                .filter(|s| !s.trim().is_empty())
                .or_else(|| self.http.config().default_snapshot.clone())
        });
        let mut body = json!({
            "name": name,
            "labels": spec.labels,
            "env": spec.env,
            "autoStopInterval": self.http.config().auto_stop_minutes,
            "autoDeleteInterval": AUTO_DELETE_MINUTES,
        });
        match network_fields(&spec.isolation.network).map_err(ProviderError::Provision)? {
            NetworkFields::BlockAll => body["networkBlockAll"] = json!(true),
            NetworkFields::Allow { cidrs, domains } => {
                if let Some(l) = cidrs {
                    body["networkAllowList"] = json!(l);
                }
                if let Some(l) = domains {
                    body["domainAllowList"] = json!(l);
                }
            }
            NetworkFields::Open => {}
        }
        if let Some(s) = &snapshot {
            body["snapshot"] = json!(s);
        }
        if let Some(t) = &self.http.config().target {
            body["target"] = json!(t);
        }
        let call = Call::new("create sandbox", None, Method::POST, self.api("/sandbox"))
            .retry(Retry::Never)
            .timeout(self.http.config().create_timeout);
        let created = match self.http.json::<SandboxDto>(&call, |r| r.json(&body)).await {
            Ok(dto) => dto,
            Err(e) if e.ambiguous() => match self.find_created(&name, spec).await {
                Ok(Some(dto)) => dto,
                Ok(None) => {
                    return Err(ProviderError::Provision(format!(
                        "{e}; no sandbox named {name} exists (checked by name and labels), so none leaked"
                    )))
                }
                Err(find) => {
                    return Err(ProviderError::Provision(format!(
                        "{e}; and rfs could not check whether sandbox {name} was created anyway ({find}); \
                         run `rfs gc --provider daytona` once the API answers"
                    )))
                }
            },
            Err(e) => return Err(create_refusal(e, snapshot.as_deref())),
        };
        self.remember(&created);
        self.wait_started(created).await
    }

    /// After an ambiguous create: the sandbox by its name, else by the run's
    /// labels. Both must agree that it is this run's.
    async fn find_created(
        &self,
        name: &str,
        spec: &CreateSpec,
    ) -> ProviderResult<Option<SandboxDto>> {
        let run = spec.labels.get(labels::RUN_ID);
        // The server may still be committing the create: look a few times.
        for round in 0..5 {
            if let Some(dto) = self.get_by_name(name).await? {
                if dto.labels().get(labels::RUN_ID) == run {
                    return Ok(Some(dto));
                }
            }
            let mut want = labels::rfs_selector();
            if let Some(r) = run {
                want.insert(labels::RUN_ID.into(), r.clone());
            }
            if let Some(item) = self.list_dtos(&want).await?.into_iter().next() {
                // A list item carries no network fields
                // (`dto/sandbox-list-item.dto.ts`): the sandbox itself does.
                if let Some(dto) = self.get_dto(&item.id).await? {
                    return Ok(Some(dto));
                }
            }
            tokio::time::sleep(Duration::from_millis(300 * (round + 1))).await;
        }
        Ok(None)
    }

    /// Poll until `started`; a failed state or the bound → destroy
    /// (verified) and refuse.
    pub(super) async fn wait_started(&self, mut dto: SandboxDto) -> ProviderResult<SandboxDto> {
        let id = dto.id.clone();
        let start_wait = self.http.config().start_wait;
        let deadline = Instant::now() + start_wait;
        let mut wait = Duration::from_millis(100);
        loop {
            let state = dto.state().to_owned();
            if state == "started" {
                return Ok(dto);
            }
            let why = if failed_state(&state) {
                Some(format!(
                    "sandbox {id} went to state `{state}`{}",
                    dto.error_reason
                        .as_deref()
                        .filter(|r| !r.is_empty())
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ))
            } else if Instant::now() >= deadline {
                Some(format!(
                    "sandbox {id} was not started within {} s (last state `{state}`)",
                    start_wait.as_secs_f64()
                ))
            } else {
                None
            };
            if let Some(why) = why {
                let cleanup = self.destroy_unused(&id).await;
                return Err(ProviderError::Provision(format!("{why}; {cleanup}")));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 2).min(Duration::from_secs(2));
            dto = match self.get_dto(&id).await? {
                Some(d) => d,
                None => {
                    return Err(ProviderError::Provision(format!(
                        "sandbox {id} disappeared while starting (state was `{state}`)"
                    )))
                }
            };
            self.remember(&dto);
        }
    }

    /// `DELETE /sandbox/{id}`, once. 404 means gone; 409 after an attempt
    /// of ours that got no answer means our delete is in progress. A 409
    /// or invalid-state answer to our first delete (the sandbox is still
    /// starting or stopping) waits for a stable state and deletes again.
    pub async fn delete(&self, id: &str) -> ProviderResult<()> {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let call = Call::new(
                "delete sandbox",
                Some(id),
                Method::DELETE,
                self.api(&format!("/sandbox/{}", enc(id))),
            );
            match self.http.send(&call, |r| r).await {
                Ok(_) => return Ok(()),
                Err(e) if e.status() == Some(404) => return Ok(()),
                Err(e) if e.status() == Some(409) && e.attempts > 1 => return Ok(()),
                Err(e) if invalid_state(&e) && Instant::now() < deadline => {
                    match self.get_dto(id).await? {
                        None => return Ok(()),
                        Some(d) if d.desired_state.as_deref() == Some("destroyed") => return Ok(()),
                        Some(_) => tokio::time::sleep(Duration::from_millis(500)).await,
                    }
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Destroy sandbox `id` that rfs will not use, verified gone within
    /// [`GONE_WAIT`]; how that went, to end the refusal that says why.
    pub(super) async fn destroy_unused(&self, id: &str) -> String {
        match self.destroy_gone(id, GONE_WAIT).await {
            Ok(()) => "it was destroyed (verified gone)".to_owned(),
            Err(e) => format!("destroying it could not be verified: {e}"),
        }
    }

    /// Delete and verify: `GET` is 404 **and** the id is absent from the
    /// labelled list in the same round, polled within `bound` (the list
    /// alone is never trusted: it lags and can show a deleted sandbox
    /// again).
    pub async fn destroy_gone(&self, id: &str, bound: Duration) -> ProviderResult<()> {
        self.delete(id).await?;
        let start = Instant::now();
        // The soft delete's lag as the last teardown saw it: the first
        // look waits most of it instead of finding the sandbox
        // `destroying` round after round.
        let learnt = *super::lock(&self.delete_lag);
        if let Some(lag) = learnt {
            tokio::time::sleep((lag * 4 / 5).min(bound / 2)).await;
        }
        let mut wait = Duration::from_millis(50);
        loop {
            // Both looks at once: one round trip a round.
            let selector = labels::rfs_selector();
            let (by_id, listed) = tokio::join!(self.get_dto(id), self.list_dtos(&selector));
            let (by_id, listed) = (by_id?, listed?);
            let in_list = listed.iter().any(|s| s.id == id);
            if by_id.is_none() && !in_list {
                *super::lock(&self.delete_lag) = Some(start.elapsed());
                self.forget(id);
                return Ok(());
            }
            if start.elapsed() >= bound {
                return Err(ProviderError::NotVerifiedGone(format!(
                    "sandbox {id} not verified gone after {} s: {}",
                    bound.as_secs(),
                    match by_id {
                        Some(d) => format!("get-by-id still returns it (state {})", d.state()),
                        None => "still listed".into(),
                    }
                )));
            }
            tokio::time::sleep(wait).await;
            wait = (wait * 3 / 2).min(Duration::from_secs(1));
        }
    }

    /// `POST /sandbox/{id}/last-activity`: postpone auto-stop.
    pub async fn keep_alive(&self, id: &str) -> Result<(), HttpError> {
        let call = Call::new(
            "keep sandbox alive",
            Some(id),
            Method::POST,
            self.api(&format!("/sandbox/{}/last-activity", enc(id))),
        )
        .retry(Retry::Idempotent);
        self.http.send(&call, |r| r).await.map(|_| ())
    }

    /// Check the API answers and accepts the credential.
    pub async fn ping(&self) -> ProviderResult<()> {
        let call = Call::new("check the API", None, Method::GET, self.api("/sandbox"));
        let q = [
            ("labels", labels_query(&labels::rfs_selector())),
            ("limit", "1".into()),
        ];
        match self.http.send(&call, |r| r.query(&q)).await {
            Ok(_) => Ok(()),
            Err(e) if matches!(e.status(), Some(401) | Some(403)) => {
                Err(ProviderError::Unavailable {
                    provider: "daytona".into(),
                    message: format!(
                        "the API at {} refused the credential (HTTP {}); check DAYTONA_API_KEY",
                        self.http.config().api_url,
                        e.status().unwrap_or_default()
                    ),
                })
            }
            Err(e) => Err(ProviderError::Unavailable {
                provider: "daytona".into(),
                message: format!(
                    "the API at {} does not answer: {e}",
                    self.http.config().api_url
                ),
            }),
        }
    }
}

/// A refusal because the sandbox is mid-transition (starting, stopping):
/// 409 "state change in progress" or 400 "not in a valid state".
fn invalid_state(e: &HttpError) -> bool {
    let m = e.message().unwrap_or_default().to_ascii_lowercase();
    e.status() == Some(409) || (e.status() == Some(400) && m.contains("state"))
}

/// Map a definite create failure; an unknown snapshot is named.
fn create_refusal(e: HttpError, snapshot: Option<&str>) -> ProviderError {
    let msg = e.message().unwrap_or_default().to_ascii_lowercase();
    let definite = matches!(e.status(), Some(400) | Some(404));
    if definite
        && msg.contains("snapshot")
        && (msg.contains("not found") || msg.contains("does not exist"))
    {
        return ProviderError::Provision(format!(
            "snapshot `{}` is not known to the Daytona server ({e}); rfs never falls back to another snapshot",
            snapshot.unwrap_or("(server default)")
        ));
    }
    e.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_query_is_a_json_object() {
        let mut l = Labels::new();
        l.insert("relayflows/created-by".into(), "rfs".into());
        l.insert("a\"b".into(), "c".into());
        let q = labels_query(&l);
        let back: Labels = serde_json::from_str(&q).unwrap();
        assert_eq!(back, l);
    }

    #[test]
    fn names_are_unique_per_run_and_plain() {
        assert_eq!(
            sandbox_name("20261130T181705Z-ab12cd34"),
            "rfs-20261130t181705z-ab12cd34"
        );
        assert_ne!(sandbox_name("r1"), sandbox_name("r2"));
    }

    #[test]
    fn unknown_snapshot_is_a_refusal_naming_it() {
        let e = HttpError {
            op: "create sandbox".into(),
            sandbox: None,
            failure: super::super::http::Failure::Status {
                status: 400,
                message: Some("Snapshot nope-snap not found. Did you add it?".into()),
            },
            attempts: 1,
        };
        let m = create_refusal(e, Some("nope-snap")).to_string();
        assert!(m.contains("snapshot `nope-snap` is not known"), "{m}");
    }
}
