//! `POST /api/sandbox/{id}/network-settings` (body
//! `UpdateSandboxNetworkSettings`: `networkBlockAll?`, `networkAllowList?`,
//! `domainAllowList?`), as Daytona answers it: 200 with the sandbox's
//! `Sandbox` DTO carrying the new settings. A field left out keeps its
//! value; an empty `networkAllowList` clears the list. Daytona changes the
//! runner's rules for the running sandbox; this server enforces a network
//! in the sandbox's namespaces, so a change between blocked and open
//! restarts the sandbox's init in the right one (its files kept, what ran
//! in it ended). Only a started sandbox is changed (409 otherwise).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::api::find;
use crate::errors;
use crate::state::{now_rfc3339, AppState};

pub(crate) async fn update(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    let path = uri.path().to_owned();
    let (sandbox, block_all, allow_list) = {
        let mut list = st.sandboxes.lock().unwrap();
        let Some(rec) = find(&mut list, &id, Instant::now()) else {
            return errors::api(
                404,
                &path,
                format!("Sandbox with ID or name {id} not found"),
            );
        };
        if rec.deleted_at.is_some() || rec.state != "started" {
            return errors::api(
                409,
                &path,
                format!(
                    "Sandbox {id} is {}: only a started sandbox's network can be changed",
                    rec.state
                ),
            );
        }
        let block_all = body
            .get("networkBlockAll")
            .and_then(Value::as_bool)
            .unwrap_or(rec.network_block_all);
        let allow_list = match body.get("networkAllowList").and_then(Value::as_str) {
            Some(l) => (!l.trim().is_empty()).then(|| l.to_owned()),
            None => rec.network_allow_list.clone(),
        };
        (rec.sandbox.clone(), block_all, allow_list)
    };
    // The record says the new settings only once the sandbox has them.
    let blocked = block_all || allow_list.is_some();
    let switched = tokio::task::spawn_blocking(move || sandbox.set_network_blocked(blocked)).await;
    if let Ok(Err(e)) | Err(e) = switched.map_err(std::io::Error::other) {
        return errors::api(500, &path, format!("Network settings failed: {e}"));
    }
    let mut list = st.sandboxes.lock().unwrap();
    match find(&mut list, &id, Instant::now()) {
        Some(rec) => {
            rec.network_block_all = block_all;
            rec.network_allow_list = allow_list;
            rec.updated_at = now_rfc3339();
            Json(json!(rec.dto(rec.state, &st.toolbox_url()))).into_response()
        }
        None => errors::api(
            404,
            &path,
            format!("Sandbox with ID or name {id} not found"),
        ),
    }
}
