//! `POST /api/sandbox/{id}/network-settings` (body
//! `UpdateSandboxNetworkSettings`: `networkBlockAll?`, `networkAllowList?`,
//! `domainAllowList?`), as Daytona v0.190.0 answers it
//! (`sandbox.controller.ts` :1072-1120, `sandbox.service.ts`
//! `updateNetworkSettings` :3067-3133): 200 with the sandbox's `Sandbox`
//! DTO carrying the new settings; none of the three → 400 `At least one of
//! networkBlockAll, networkAllowList or domainAllowList must be
//! provided`; each list validated as on create (400 with the message). A
//! field left out keeps its value; an empty list clears it;
//! `networkBlockAll: true` clears the CIDR list, a CIDR list sets
//! `networkBlockAll: false`. Daytona changes the
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
    let field = |k: &str| body.get(k).filter(|v| !v.is_null());
    if field("networkBlockAll").is_none()
        && field("networkAllowList").is_none()
        && field("domainAllowList").is_none()
    {
        return errors::api(
            400,
            &path,
            "At least one of networkBlockAll, networkAllowList or domainAllowList must be provided",
        );
    }
    let domains = body.get("domainAllowList").and_then(Value::as_str);
    let cidrs = body.get("networkAllowList").and_then(Value::as_str);
    for (list, check) in [
        (
            domains,
            crate::network_rules::domain_allow_list as fn(&str) -> _,
        ),
        (cidrs, crate::network_rules::network_allow_list),
    ] {
        if let Some(Err(m)) = list.filter(|l| !l.trim().is_empty()).map(check) {
            return errors::api(400, &path, m);
        }
    }
    let (sandbox, block_all, allow_list, domain_list) = {
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
        let asked_block = body.get("networkBlockAll").and_then(Value::as_bool);
        let mut block_all = asked_block.unwrap_or(rec.network_block_all);
        let mut allow_list = rec.network_allow_list.clone();
        if asked_block == Some(true) {
            allow_list = None;
        }
        match cidrs {
            Some(l) if l.trim().is_empty() => allow_list = None,
            Some(l) => {
                allow_list = Some(l.to_owned());
                block_all = false;
            }
            None if asked_block == Some(false) => allow_list = None,
            None => {}
        }
        let domain_list = match domains {
            Some(l) => (!l.trim().is_empty()).then(|| l.to_owned()),
            None => rec.domain_allow_list.clone(),
        };
        (rec.sandbox.clone(), block_all, allow_list, domain_list)
    };
    // The record says the new settings only once the sandbox has them.
    let blocked = block_all || allow_list.is_some() || domain_list.is_some();
    let switched = tokio::task::spawn_blocking(move || sandbox.set_network_blocked(blocked)).await;
    if let Ok(Err(e)) | Err(e) = switched.map_err(std::io::Error::other) {
        return errors::api(500, &path, format!("Network settings failed: {e}"));
    }
    let mut list = st.sandboxes.lock().unwrap();
    match find(&mut list, &id, Instant::now()) {
        Some(rec) => {
            rec.network_block_all = block_all;
            rec.network_allow_list = allow_list;
            rec.domain_allow_list = domain_list;
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
