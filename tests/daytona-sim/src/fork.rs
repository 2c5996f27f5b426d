//! `POST /api/sandbox/{id}/fork` (body `ForkSandbox`: `{ name? }`), as
//! Daytona answers it: 200 with the new sandbox's `Sandbox` DTO in state
//! `forking`; its filesystem is a copy of the source's (made in the
//! background, owners and modes kept), after which it is `started`. The
//! fork keeps the source's labels, env, user, snapshot, network settings,
//! resources and intervals; a source being deleted, or neither started
//! nor stopped, is refused (409), an existing name too.

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
    let (source_box, rec) = {
        let now = Instant::now();
        let mut list = st.sandboxes.lock().unwrap();
        if find(&mut list, &name, now).is_some() {
            return errors::api(
                409,
                &path,
                format!("Sandbox with name {name} already exists"),
            );
        }
        let Some(src) = find(&mut list, &id, now) else {
            return errors::api(
                404,
                &path,
                format!("Sandbox with ID or name {id} not found"),
            );
        };
        if src.deleted_at.is_some() || !matches!(src.state, "started" | "stopped") {
            return errors::api(
                409,
                &path,
                format!(
                    "Sandbox {id} is {}: only a started or stopped sandbox can be forked",
                    src.state
                ),
            );
        }
        let sandbox = match src.sandbox.fork_dir(&st.base_dir, &new_id) {
            Ok(b) => Arc::new(b),
            Err(e) => return errors::api(500, &path, format!("Fork failed: {e}")),
        };
        let mut rec = Record {
            labels: src.labels.clone(),
            env: src.env.clone(),
            snapshot: src.snapshot.clone(),
            user: src.user.clone(),
            target: src.target.clone(),
            state: "forking",
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
        rec.push_view(Instant::now(), Some("forking"));
        (src.sandbox.clone(), rec)
    };
    let dto = rec.dto("forking", &st.toolbox_url());
    let new_box = rec.sandbox.clone();
    st.sandboxes.lock().unwrap().push(rec);
    // The copy and the start happen after the answer, as on Daytona.
    let st2 = st.clone();
    tokio::spawn(async move {
        let done = tokio::task::spawn_blocking(move || {
            new_box.copy_files_of(&source_box)?;
            new_box.start()
        })
        .await;
        let ok = matches!(done, Ok(Ok(())));
        if let Ok(Err(e)) = &done {
            eprintln!("rfs-daytona-sim: fork {new_id} failed: {e}");
        }
        let now = Instant::now();
        let mut list = st2.sandboxes.lock().unwrap();
        if let Some(r) = find(&mut list, &new_id, now) {
            if r.deleted_at.is_none() {
                r.state = if ok { "started" } else { "error" };
                r.updated_at = now_rfc3339();
                r.push_view(now, Some(r.state));
            }
        }
    });
    Json(json!(dto)).into_response()
}
