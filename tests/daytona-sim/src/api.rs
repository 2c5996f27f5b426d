//! The REST API (`/api/...`): sandbox lifecycle, list, labels, policies.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Path, RawQuery, State};
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post, put};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::errors;
use crate::isolation::SandboxBox;
use crate::state::{now_rfc3339, AppState, Record};
use crate::ListShape;

type St = State<Arc<AppState>>;

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/api/config", get(config))
        .route("/api/health", get(health))
        .route("/api/health/ready", get(health))
        .route("/api/sandbox", post(create).get(list))
        .route("/api/sandbox/paginated", get(list_paginated))
        .route("/api/sandbox/{id}", get(get_one).delete(delete))
        .route("/api/sandbox/{id}/start", post(start))
        .route("/api/sandbox/{id}/stop", post(stop))
        .route("/api/sandbox/{id}/labels", put(labels))
        .route("/api/sandbox/{id}/fork", post(crate::fork::fork))
        .route("/api/sandbox/{id}/forks", get(crate::fork::children))
        .route(
            "/api/sandbox/{id}/snapshot",
            post(crate::snapshots::snapshot_sandbox),
        )
        .route("/api/snapshots", get(crate::snapshots::list))
        .route(
            "/api/snapshots/{id}",
            get(crate::snapshots::get_one).delete(crate::snapshots::remove),
        )
        .route(
            "/api/sandbox/{id}/network-settings",
            post(crate::network_settings::update),
        )
        .route("/api/sandbox/{id}/autostop/{min}", post(autostop))
        .route("/api/sandbox/{id}/autodelete/{min}", post(autodelete))
        .route("/api/sandbox/{id}/autoarchive/{min}", post(autoarchive))
        .route("/api/sandbox/{id}/last-activity", post(last_activity))
        .route(
            "/api/sandbox/{id}/toolbox-proxy-url",
            get(toolbox_proxy_url),
        )
        .route("/__sim/requests", get(sim_requests))
}

/// Test-only (not Daytona's): every request so far, for benchmarks that
/// drive the server from outside the process (`scripts/bench-daytona.sh`).
async fn sim_requests(State(st): St) -> Json<Value> {
    let list = st.requests.lock().unwrap();
    Json(Value::Array(
        list.iter()
            .map(|r| {
                json!({
                    "method": r.method,
                    "route": r.route,
                    "query": r.query,
                    "status": r.status,
                    "at_ms": r.at.as_millis() as u64,
                })
            })
            .collect(),
    ))
}

async fn config(State(st): St) -> Json<Value> {
    Json(json!({
        "version": crate::DAEMON_VERSION,
        "proxyToolboxUrl": st.toolbox_url(),
        "defaultSnapshot": st.opts.default_snapshot,
        "maxAutoArchiveInterval": 43200,
        "maintananceMode": false,
        "environment": "rfs-daytona-sim",
    }))
}

async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct CreateSandbox {
    name: Option<String>,
    snapshot: Option<String>,
    user: Option<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    target: Option<String>,
    cpu: Option<i64>,
    gpu: Option<i64>,
    memory: Option<i64>,
    disk: Option<i64>,
    auto_stop_interval: Option<i64>,
    auto_archive_interval: Option<i64>,
    auto_delete_interval: Option<i64>,
    build_info: Option<Value>,
    #[serde(default)]
    network_block_all: bool,
    /// Comma-separated CIDRs; recorded, and enforced fail-closed (the
    /// simulator cannot route by CIDR: a sandbox with a list gets no
    /// network at all).
    #[serde(default)]
    network_allow_list: Option<String>,
    /// Comma-separated names (`example.com`, `*.example.com`); recorded
    /// and validated as Daytona does, enforced like a CIDR list.
    #[serde(default)]
    domain_allow_list: Option<String>,
}

pub(crate) fn find<'a>(
    list: &'a mut [Record],
    id_or_name: &str,
    now: Instant,
) -> Option<&'a mut Record> {
    list.iter_mut()
        .find(|r| !r.is_gone(now) && (r.id == id_or_name || r.name == id_or_name))
}

fn not_found(uri: &Uri, id: &str) -> Response {
    errors::api(
        404,
        uri.path(),
        format!("Sandbox with ID or name {id} not found"),
    )
}

/// A create completes on the server even when the client hangs up (as Daytona's does).
async fn create(State(st): St, uri: Uri, body: Option<Json<Value>>) -> Response {
    let path = uri.path().to_string();
    match tokio::spawn(create_detached(st, path.clone(), body)).await {
        Ok(r) => r,
        Err(e) => errors::api(500, &path, format!("create failed: {e}")),
    }
}

async fn create_detached(st: Arc<AppState>, path: String, body: Option<Json<Value>>) -> Response {
    let body = body.map(|Json(v)| v).unwrap_or_else(|| json!({}));
    let req: CreateSandbox = match serde_json::from_value(body) {
        Ok(r) => r,
        Err(e) => return errors::api(400, &path, format!("Invalid request body: {e}")),
    };
    let snapshot = match checked_snapshot(&st, &req, &path) {
        Ok(s) => s,
        Err(refused) => return refused,
    };
    let made = match crate::snapshots::usable(&st, &snapshot, &path) {
        Ok(m) => m,
        Err(refused) => return refused,
    };
    // sandbox.service.ts:655-661: both lists validated, 400 with the message.
    for (list, check) in [
        (
            &req.network_allow_list,
            crate::network_rules::network_allow_list as fn(&str) -> _,
        ),
        (
            &req.domain_allow_list,
            crate::network_rules::domain_allow_list,
        ),
    ] {
        if let Some(Err(m)) = list.as_deref().map(check) {
            return errors::api(400, &path, m);
        }
    }
    let class = match &made {
        Some(m) => m.class,
        None => st.class_of(&snapshot),
    };
    let id = uuid::Uuid::new_v4().to_string();
    let name = req.name.clone().unwrap_or_else(|| id.clone());
    {
        let now = Instant::now();
        let mut list = st.sandboxes.lock().unwrap();
        if find(&mut list, &name, now).is_some() {
            return errors::api(
                409,
                &path,
                format!("Sandbox with name {name} already exists"),
            );
        }
    }
    let base = st.base_dir.clone();
    let box_id = id.clone();
    let blocked = req.network_block_all
        || req.network_allow_list.is_some()
        || req.domain_allow_list.is_some();
    let files = made.map(|m| m.files);
    let built = tokio::task::spawn_blocking(move || {
        let b = match files {
            // From a snapshot of a sandbox: its files.
            Some(f) => {
                let b = f.fork_dir(&base, &box_id)?;
                b.set_network_blocked(blocked)?;
                b.copy_files_of(&f)?;
                b
            }
            None => SandboxBox::create(&base, &box_id, blocked)?,
        };
        b.start()?;
        Ok::<_, std::io::Error>(b)
    })
    .await;
    let sandbox = match built {
        Ok(Ok(b)) => Arc::new(b),
        Ok(Err(e)) => return errors::api(500, &path, format!("Sandbox failed to start: {e}")),
        Err(e) => return errors::api(500, &path, format!("Sandbox failed to start: {e}")),
    };
    let mut rec = Record {
        labels: req.labels,
        env: req.env,
        snapshot,
        user: req.user.unwrap_or_else(|| "daytona".into()),
        target: req.target.unwrap_or_else(|| "us".into()),
        auto_stop: req.auto_stop_interval.unwrap_or(15),
        auto_archive: req.auto_archive_interval.unwrap_or(10080),
        auto_delete: req.auto_delete_interval.unwrap_or(-1),
        network_block_all: req.network_block_all,
        network_allow_list: req.network_allow_list.clone(),
        domain_allow_list: req.domain_allow_list.clone(),
        class,
        ..Record::fresh(id.clone(), name, sandbox, st.next_seq())
    };
    let ends_in = st.faults.take_create_ends_in();
    if let Some(state) = ends_in {
        // The create is answered in a transitional state; GET then shows
        // where it ended (an error, or still creating forever).
        rec.sandbox.stop();
        rec.state = state;
        rec.desired_state = "started";
    }
    rec.push_view(Instant::now(), Some(rec.state));
    let dto = rec.dto(
        if ends_in.is_some() {
            "creating"
        } else {
            "started"
        },
        &st.toolbox_url(),
    );
    st.sandboxes.lock().unwrap().push(rec);
    if let Some(delay) = st.faults.take_create_late() {
        tokio::time::sleep(delay).await;
    }
    Json(dto).into_response()
}

/// The snapshot a create asks for, or the server's refusal of the
/// request (an image build, resources, negative intervals, an unknown
/// snapshot), as Daytona words it.
fn checked_snapshot(st: &AppState, req: &CreateSandbox, path: &str) -> Result<String, Response> {
    if req.build_info.is_some() {
        if req.snapshot.is_some() {
            return Err(errors::api(
                400,
                path,
                "Cannot specify a snapshot when using a build info entry",
            ));
        }
        return Err(errors::api(
            400,
            path,
            "rfs-daytona-sim: building sandboxes from buildInfo (images) is not supported; use a snapshot",
        ));
    }
    if req.cpu.is_some() || req.gpu.is_some() || req.memory.is_some() || req.disk.is_some() {
        return Err(errors::api(
            400,
            path,
            "Cannot specify Sandbox resources when using a snapshot",
        ));
    }
    for (field, v) in [
        ("autoStopInterval", req.auto_stop_interval),
        ("autoArchiveInterval", req.auto_archive_interval),
    ] {
        if v.is_some_and(|v| v < 0) {
            return Err(errors::api(
                400,
                path,
                format!("{field} must not be negative"),
            ));
        }
    }
    let snapshot = req
        .snapshot
        .clone()
        .unwrap_or_else(|| st.opts.default_snapshot.clone());
    if snapshot != st.opts.default_snapshot
        && !st.opts.snapshots.contains(&snapshot)
        && !crate::snapshots::known(st, &snapshot)
    {
        return Err(errors::api(
            400,
            path,
            format!("Snapshot {snapshot} not found. Did you add it through the Daytona Dashboard?"),
        ));
    }
    Ok(snapshot)
}

async fn get_one(State(st): St, uri: Uri, Path(id): Path<String>) -> Response {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    match find(&mut list, &id, now) {
        Some(r) => {
            let state = r.current_state(now).unwrap_or("destroyed");
            let mut dto = r.dto(state, &st.toolbox_url());
            if r.deleted_at.is_some() {
                dto["desiredState"] = json!("destroyed");
            }
            Json(dto).into_response()
        }
        None => not_found(&uri, &id),
    }
}

async fn delete(State(st): St, uri: Uri, Path(id): Path<String>) -> Response {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = find(&mut list, &id, now) else {
        return not_found(&uri, &id);
    };
    // sandbox.service.ts:2016-2018: pending (or already deleted) → 409.
    if rec.deleted_at.is_some() || rec.pending {
        return errors::api(409, uri.path(), "Sandbox state change in progress");
    }
    let parent_id = rec.id.clone();
    // sandbox.service.ts:2020-2029: a fork child not deleted keeps its parent.
    if list
        .iter()
        .any(|c| c.parent.as_deref() == Some(&parent_id) && c.deleted_at.is_none())
    {
        return errors::api(
            400,
            uri.path(),
            "Cannot delete sandbox which has active fork children. The forks must be deleted first.",
        );
    }
    let Some(rec) = find(&mut list, &id, now) else {
        return not_found(&uri, &id);
    };
    let old_state = rec.state;
    st.soft_delete(rec);
    let mut dto = rec.dto(old_state, &st.toolbox_url());
    dto["desiredState"] = json!("destroyed");
    Json(dto).into_response()
}

async fn start(State(st): St, uri: Uri, Path(id): Path<String>) -> Response {
    let rec_box = {
        let now = Instant::now();
        let mut list = st.sandboxes.lock().unwrap();
        let Some(rec) = find(&mut list, &id, now) else {
            return not_found(&uri, &id);
        };
        if rec.deleted_at.is_some() {
            return errors::api(409, uri.path(), "Sandbox state change in progress");
        }
        rec.sandbox.clone()
    };
    let started = tokio::task::spawn_blocking(move || rec_box.start()).await;
    if !matches!(started, Ok(Ok(()))) {
        return errors::api(500, uri.path(), "Sandbox failed to start");
    }
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = find(&mut list, &id, now) else {
        return not_found(&uri, &id);
    };
    rec.state = "started";
    rec.desired_state = "started";
    rec.stopped_at = None;
    rec.touch();
    rec.push_view(now, Some("started"));
    Json(rec.dto("started", &st.toolbox_url())).into_response()
}

async fn stop(State(st): St, uri: Uri, Path(id): Path<String>) -> Response {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = find(&mut list, &id, now) else {
        return not_found(&uri, &id);
    };
    if rec.deleted_at.is_some() {
        return errors::api(409, uri.path(), "Sandbox state change in progress");
    }
    st.stop(rec);
    let ephemeral = rec.auto_delete == 0;
    if ephemeral {
        st.soft_delete(rec);
    }
    axum::http::StatusCode::OK.into_response()
}

#[derive(Deserialize)]
struct LabelsBody {
    labels: BTreeMap<String, String>,
}

async fn labels(
    State(st): St,
    uri: Uri,
    Path(id): Path<String>,
    body: Option<Json<LabelsBody>>,
) -> Response {
    let Some(Json(body)) = body else {
        return errors::api(400, uri.path(), "labels must be an object of strings");
    };
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = find(&mut list, &id, now) else {
        return not_found(&uri, &id);
    };
    rec.labels = body.labels;
    rec.updated_at = now_rfc3339();
    Json(json!({ "labels": rec.labels })).into_response()
}

fn set_interval(st: &AppState, uri: &Uri, id: &str, min: &str, which: &str) -> Response {
    let Ok(min) = min.parse::<i64>() else {
        return errors::api(
            400,
            uri.path(),
            "Validation failed (numeric string is expected)",
        );
    };
    if which != "autodelete" && min < 0 {
        return errors::api(400, uri.path(), "Interval must not be negative");
    }
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = find(&mut list, id, now) else {
        return not_found(uri, id);
    };
    match which {
        "autostop" => rec.auto_stop = min,
        "autodelete" => rec.auto_delete = min,
        _ => rec.auto_archive = min,
    }
    rec.updated_at = now_rfc3339();
    let state = rec.current_state(now).unwrap_or("destroyed");
    Json(rec.dto(state, &st.toolbox_url())).into_response()
}

async fn autostop(State(st): St, uri: Uri, Path((id, min)): Path<(String, String)>) -> Response {
    set_interval(&st, &uri, &id, &min, "autostop")
}

async fn autodelete(State(st): St, uri: Uri, Path((id, min)): Path<(String, String)>) -> Response {
    set_interval(&st, &uri, &id, &min, "autodelete")
}

async fn autoarchive(State(st): St, uri: Uri, Path((id, min)): Path<(String, String)>) -> Response {
    set_interval(&st, &uri, &id, &min, "autoarchive")
}

async fn last_activity(State(st): St, uri: Uri, Path(id): Path<String>) -> Response {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = find(&mut list, &id, now) else {
        return not_found(&uri, &id);
    };
    rec.touch();
    axum::http::StatusCode::CREATED.into_response()
}

async fn toolbox_proxy_url(State(st): St, uri: Uri, Path(id): Path<String>) -> Response {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    if find(&mut list, &id, now).is_none() {
        return not_found(&uri, &id);
    }
    Json(json!({ "url": st.toolbox_url() })).into_response()
}

/// Parsed list filters shared by both list endpoints.
struct Filter {
    labels: BTreeMap<String, String>,
    id_prefix: Option<String>,
    name_prefix: Option<String>,
    states: Vec<String>,
}

fn parse_filter(pairs: &[(String, String)]) -> Result<Filter, String> {
    let mut f = Filter {
        labels: BTreeMap::new(),
        id_prefix: None,
        name_prefix: None,
        states: Vec::new(),
    };
    for (k, v) in pairs {
        match k.as_str() {
            "labels" => {
                let parsed: BTreeMap<String, String> = serde_json::from_str(v)
                    .map_err(|_| "Invalid labels JSON format".to_string())?;
                f.labels.extend(parsed);
            }
            "id" => f.id_prefix = Some(v.to_lowercase()),
            "name" => f.name_prefix = Some(v.to_lowercase()),
            "states" => {
                if v == "destroyed" {
                    return Err("each value in states must be one of the allowed states (destroyed is not allowed)".into());
                }
                f.states.push(v.clone());
            }
            _ => {}
        }
    }
    Ok(f)
}

/// What the list shows now: (record index order newest first, view).
fn visible(st: &AppState, f: &Filter) -> Vec<Value> {
    let now = Instant::now();
    let at = now.checked_sub(st.opts.list_lag).unwrap_or(st.started);
    let list = st.sandboxes.lock().unwrap();
    let mut rows: Vec<(u64, Value)> = list
        .iter()
        .filter_map(|r| {
            let view = r.list_view_at(at)?;
            if !f.labels.iter().all(|(k, v)| r.labels.get(k) == Some(v)) {
                return None;
            }
            if f.id_prefix
                .as_ref()
                .is_some_and(|p| !r.id.to_lowercase().starts_with(p))
            {
                return None;
            }
            if f.name_prefix
                .as_ref()
                .is_some_and(|p| !view.name.to_lowercase().starts_with(p))
            {
                return None;
            }
            if !f.states.is_empty() && !f.states.iter().any(|s| s == view.state) {
                return None;
            }
            let item = match st.opts.list_shape {
                ListShape::Paginated => r.list_item(&view, &st.toolbox_url()),
                ListShape::BareArray => {
                    let mut d = r.dto(view.state, &st.toolbox_url());
                    d["name"] = json!(view.name);
                    d
                }
            };
            Some((r.seq, item))
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    rows.into_iter().map(|(_, v)| v).collect()
}

fn query_pairs(q: &Option<String>) -> Vec<(String, String)> {
    q.as_deref()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .unwrap_or_default()
}

async fn list(State(st): St, uri: Uri, RawQuery(q): RawQuery, _h: HeaderMap) -> Response {
    let pairs = query_pairs(&q);
    let f = match parse_filter(&pairs) {
        Ok(f) => f,
        Err(m) => return errors::api(400, uri.path(), m),
    };
    let rows = visible(&st, &f);
    if st.opts.list_shape == ListShape::BareArray {
        return Json(Value::Array(rows)).into_response();
    }
    let get = |k: &str| pairs.iter().find(|(pk, _)| pk == k).map(|(_, v)| v.clone());
    let limit = match get("limit").map(|l| l.parse::<usize>()) {
        None => 100,
        Some(Ok(l)) if (1..=200).contains(&l) => l,
        Some(_) => return errors::api(400, uri.path(), "limit must not be greater than 200"),
    };
    let offset = match get("cursor").filter(|c| !c.is_empty()) {
        None => 0,
        Some(c) => match c
            .strip_prefix("sim-cursor-")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) => n,
            None => return errors::api(400, uri.path(), "Invalid cursor"),
        },
    };
    let end = (offset + limit).min(rows.len());
    let page: Vec<Value> = rows
        .get(offset..end)
        .map(|s| s.to_vec())
        .unwrap_or_default();
    let next = if end < rows.len() {
        json!(format!("sim-cursor-{end}"))
    } else {
        Value::Null
    };
    Json(json!({ "items": page, "nextCursor": next })).into_response()
}

async fn list_paginated(State(st): St, uri: Uri, RawQuery(q): RawQuery) -> Response {
    let pairs = query_pairs(&q);
    let f = match parse_filter(&pairs) {
        Ok(f) => f,
        Err(m) => return errors::api(400, uri.path(), m),
    };
    let rows = visible(&st, &f);
    let get = |k: &str| {
        pairs
            .iter()
            .find(|(pk, _)| pk == k)
            .and_then(|(_, v)| v.parse::<usize>().ok())
    };
    let limit = get("limit").unwrap_or(100).clamp(1, 200);
    let page = get("page").unwrap_or(1).max(1);
    let total = rows.len();
    let total_pages = total.div_ceil(limit);
    let start = ((page - 1) * limit).min(total);
    let end = (start + limit).min(total);
    Json(json!({
        "items": rows[start..end],
        "total": total,
        "page": page,
        "totalPages": total_pages,
    }))
    .into_response()
}

/// How long `Sim::start` waits for the policy ticker between rounds.
pub(crate) fn policy_period(tick: Duration) -> Duration {
    (tick / 4).clamp(Duration::from_millis(10), Duration::from_secs(5))
}
