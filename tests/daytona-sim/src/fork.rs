//! `POST /api/sandbox/{id}/fork` (body `ForkSandbox`: `{ name? }`) and
//! `GET /api/sandbox/{id}/forks`, as Daytona v0.190.0 answers them
//! (`apps/api/src/sandbox/services/sandbox.service.ts` `forkSandbox`,
//! read, not copied):
//!
//! - only a `linux-vm` or `windows` source forks: any other class is 422
//!   `Forking is not supported for this sandbox` (:1093-1094);
//! - the source must be `started` (400 `Sandbox must be in started state
//!   to fork`, :1103-1104) and not pending (409 `Sandbox state change in
//!   progress`, :1107-1108);
//! - the fork is inserted `creating` and pending (:1142-1143), keeping the
//!   source's labels, env, user, snapshot, class, resources, intervals,
//!   `networkBlockAll` and `networkAllowList` — not `domainAllowList`
//!   (:1121-1141);
//! - the source goes `forking`, pending, until the runner's job ends
//!   (:1176-1185); then the source is back to `started` and the fork is
//!   `started` (`job-state-handler.service.ts` :736-776).
//!
//! The copy of the filesystem is made in the background, during at least
//! `SimOptions::job_lag`.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::api::find;
use crate::errors;
use crate::state::{now_rfc3339, AppState, Record};

pub(crate) async fn fork(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Response {
    let path = uri.path().to_owned();
    let name = body
        .as_ref()
        .and_then(|Json(b)| b.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let new_id = uuid::Uuid::new_v4().to_string();
    let name = name.unwrap_or_else(|| new_id.clone());
    let (source_box, rec, source_id) = {
        let now = Instant::now();
        let mut list = st.sandboxes.lock().unwrap();
        if find(&mut list, &name, now).is_some() {
            return errors::api(409, &path, "Sandbox with this name already exists");
        }
        let Some(src) = find(&mut list, &id, now) else {
            return errors::api(
                404,
                &path,
                format!("Sandbox with ID or name {id} not found"),
            );
        };
        if !matches!(src.class, "linux-vm" | "windows") {
            return errors::api(422, &path, "Forking is not supported for this sandbox");
        }
        if src.deleted_at.is_some() || src.state != "started" {
            return errors::api(400, &path, "Sandbox must be in started state to fork");
        }
        if src.pending {
            return errors::api(409, &path, "Sandbox state change in progress");
        }
        let sandbox = match src.sandbox.fork_dir(&st.base_dir, &new_id) {
            Ok(b) => Arc::new(b),
            Err(e) => return errors::api(500, &path, format!("Fork failed: {e}")),
        };
        src.state = "forking";
        src.pending = true;
        src.updated_at = now_rfc3339();
        src.push_view(now, Some("forking"));
        let mut rec = Record {
            labels: src.labels.clone(),
            env: src.env.clone(),
            snapshot: src.snapshot.clone(),
            user: src.user.clone(),
            target: src.target.clone(),
            class: src.class,
            state: "creating",
            pending: true,
            parent: Some(src.id.clone()),
            auto_stop: src.auto_stop,
            auto_archive: src.auto_archive,
            auto_delete: src.auto_delete,
            network_block_all: src.network_block_all,
            network_allow_list: src.network_allow_list.clone(),
            cpu: src.cpu,
            memory: src.memory,
            disk: src.disk,
            ..Record::fresh(new_id.clone(), name, sandbox, st.next_seq())
        };
        rec.push_view(Instant::now(), Some("creating"));
        (src.sandbox.clone(), rec, src.id.clone())
    };
    let dto = rec.dto("creating", &st.toolbox_url());
    let new_box = rec.sandbox.clone();
    st.sandboxes.lock().unwrap().push(rec);
    // The copy and the start happen after the answer, as on Daytona.
    let st2 = st.clone();
    let lag = st.opts.job_lag;
    tokio::spawn(async move {
        let copied = tokio::task::spawn_blocking(move || {
            new_box.copy_files_of(&source_box)?;
            new_box.start()
        });
        let (done, ()) = tokio::join!(copied, tokio::time::sleep(lag));
        let ok = matches!(done, Ok(Ok(())));
        if let Ok(Err(e)) = &done {
            eprintln!("rfs-daytona-sim: fork {new_id} failed: {e}");
        }
        let now = Instant::now();
        let mut list = st2.sandboxes.lock().unwrap();
        // The source first, then the fork (job-state-handler.service.ts:750-776).
        if let Some(src) = find(&mut list, &source_id, now) {
            if src.state == "forking" {
                src.state = "started";
                src.pending = false;
                src.updated_at = now_rfc3339();
                src.push_view(now, Some("started"));
            }
        }
        if let Some(r) = find(&mut list, &new_id, now) {
            r.pending = false;
            if r.deleted_at.is_none() {
                r.state = if ok { "started" } else { "error" };
                r.updated_at = now_rfc3339();
                r.push_view(now, Some(r.state));
            }
        }
    });
    Json(json!(dto)).into_response()
}

/// `GET /api/sandbox/{id}/forks`: the fork children not deleted
/// (`getForkChildren`, sandbox.service.ts:1243-1261), full `Sandbox` DTOs.
pub(crate) async fn children(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(parent) = find(&mut list, &id, now).map(|p| p.id.clone()) else {
        return errors::api(
            404,
            uri.path(),
            format!("Sandbox with ID or name {id} not found"),
        );
    };
    let kids: Vec<Value> = list
        .iter()
        .filter(|c| c.parent.as_deref() == Some(&parent) && c.current_state(now).is_some())
        .map(|c| {
            c.dto(
                c.current_state(now).unwrap_or("destroyed"),
                &st.toolbox_url(),
            )
        })
        .collect();
    Json(Value::Array(kids)).into_response()
}
