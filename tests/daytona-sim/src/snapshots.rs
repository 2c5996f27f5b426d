//! Snapshots of sandboxes, as Daytona v0.190.0 makes, shows and removes
//! them (read, not copied):
//!
//! - `POST /api/sandbox/{id}/snapshot` (`{name}`, `sandbox.controller.ts`
//!   :748-779, 200 with the sandbox): the sandbox must be `started` or
//!   `stopped` (400 `Sandbox must be in started or stopped state to create
//!   a snapshot`) and not pending (409 `Sandbox state change in
//!   progress`), then it is `snapshotting`, pending (`sandbox.service.ts`
//!   :1308-1316, :1365-1375); the runner's job copies its filesystem; the
//!   snapshot row is inserted **`active`** once the job is done
//!   (`utils/persist-snapshot-from-sandbox.util.ts` :60-67: until then
//!   `GET /snapshots/{name}` is 404), and the sandbox goes back to its
//!   state (`sandbox.service.ts` :1488-1495). A name already taken makes
//!   the job's insert fail (the sandbox goes back all the same).
//! - `GET /api/snapshots/{idOrName}` (`snapshot.controller.ts` :137-162,
//!   `snapshot.service.ts` `getSnapshotWithRegions` :527-545): 404
//!   `Snapshot X not found`.
//! - `GET /api/snapshots?name=&page=&limit=` (partial name match,
//!   `{items,total,page,totalPages}`).
//! - `DELETE /api/snapshots/{id}` (`snapshot.controller.ts` :164-186, an id
//!   through `ParseUUIDPipe`: a name is 400 `Validation failed (uuid is
//!   expected)`): the snapshot goes `removing` (`snapshot.service.ts`
//!   :433-450) and the row is removed once the runners dropped the image
//!   (`snapshot.manager.ts` :970-980); here after `delete_lag`.
//! - A create from a snapshot that is not `active`: 400 `Snapshot X is
//!   removing` (`sandbox.service.ts` :509-511).

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, RawQuery, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::api::find;
use crate::errors;
use crate::isolation::SandboxBox;
use crate::state::{now_rfc3339, AppState};
use crate::SimSnapshot;

pub(crate) struct SnapRecord {
    pub id: String,
    pub name: String,
    pub state: &'static str,
    pub class: &'static str,
    pub files: Arc<SandboxBox>,
    pub created_at: String,
    pub gone_at: Option<Instant>,
}

impl SnapRecord {
    fn live(&self, now: Instant) -> bool {
        self.gone_at.is_none_or(|g| now < g)
    }

    fn dto(&self) -> Value {
        json!({
            "id": self.id,
            "organizationId": crate::ORGANIZATION_ID,
            "general": false,
            "name": self.name,
            "state": self.state,
            "size": 0.1,
            "entrypoint": null,
            "cpu": 1, "gpu": 0, "mem": 1, "disk": 3,
            "errorReason": null,
            "createdAt": self.created_at,
            "updatedAt": self.created_at,
            "lastUsedAt": self.created_at,
            "regionIds": ["us"],
            "initialRunnerId": "sim-runner",
            "ref": format!("sim-registry/daytona/daytona-{}:daytona", self.id),
            "sandboxClass": self.class,
        })
    }
}

/// A snapshot a create may use: its class and its files.
pub(crate) struct Made {
    pub class: &'static str,
    pub files: Arc<SandboxBox>,
}

pub(crate) fn inventory(st: &AppState) -> Vec<SimSnapshot> {
    let now = Instant::now();
    st.snapshots
        .lock()
        .unwrap()
        .iter()
        .filter(|s| s.live(now))
        .map(|s| SimSnapshot {
            id: s.id.clone(),
            name: s.name.clone(),
            state: s.state.to_owned(),
            class: s.class.to_owned(),
        })
        .collect()
}

/// Whether `name` is a snapshot made of a sandbox (in any state).
pub(crate) fn known(st: &AppState, name: &str) -> bool {
    let now = Instant::now();
    st.snapshots
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.live(now) && (s.name == name || s.id == name))
}

/// The made snapshot `name` for a create (`None`: one of the server's own
/// snapshots), or the refusal of one that is not `active`.
pub(crate) fn usable(st: &AppState, name: &str, path: &str) -> Result<Option<Made>, Response> {
    let now = Instant::now();
    let list = st.snapshots.lock().unwrap();
    match list
        .iter()
        .find(|s| s.live(now) && (s.name == name || s.id == name))
    {
        None => Ok(None),
        Some(s) if s.state != "active" => Err(errors::api(
            400,
            path,
            format!("Snapshot {name} is {}", s.state),
        )),
        Some(s) => Ok(Some(Made {
            class: s.class,
            files: s.files.clone(),
        })),
    }
}

pub(crate) async fn snapshot_sandbox(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Response {
    let path = uri.path().to_owned();
    let Some(name) = body
        .as_ref()
        .and_then(|Json(b)| b.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return errors::api(400, &path, "name must be a string");
    };
    let snap_id = uuid::Uuid::new_v4().to_string();
    let (source, files, previous, dto, sandbox_id) = {
        let now = Instant::now();
        let mut list = st.sandboxes.lock().unwrap();
        let Some(rec) = find(&mut list, &id, now) else {
            return errors::api(
                404,
                &path,
                format!("Sandbox with ID or name {id} not found"),
            );
        };
        if rec.deleted_at.is_some() || !matches!(rec.state, "started" | "stopped") {
            return errors::api(
                400,
                &path,
                "Sandbox must be in started or stopped state to create a snapshot",
            );
        }
        if rec.pending {
            return errors::api(409, &path, "Sandbox state change in progress");
        }
        let files = match rec
            .sandbox
            .fork_dir(&st.base_dir, &format!("snapshot-{snap_id}"))
        {
            Ok(b) => Arc::new(b),
            Err(e) => return errors::api(500, &path, format!("Snapshot failed: {e}")),
        };
        let previous = rec.state;
        rec.state = "snapshotting";
        rec.pending = true;
        rec.updated_at = now_rfc3339();
        rec.push_view(now, Some("snapshotting"));
        let dto = rec.dto("snapshotting", &st.toolbox_url());
        (rec.sandbox.clone(), files, previous, dto, rec.id.clone())
    };
    let st2 = st.clone();
    let lag = st.opts.job_lag;
    tokio::spawn(async move {
        let f = files.clone();
        let copied = tokio::task::spawn_blocking(move || f.copy_files_of(&source));
        let (done, ()) = tokio::join!(copied, tokio::time::sleep(lag));
        let now = Instant::now();
        let class = {
            let mut list = st2.sandboxes.lock().unwrap();
            find(&mut list, &sandbox_id, now).map_or("container", |r| r.class)
        };
        match done {
            Ok(Ok(())) => {
                let mut snaps = st2.snapshots.lock().unwrap();
                if snaps.iter().any(|s| s.live(now) && s.name == name) {
                    eprintln!(
                        "rfs-daytona-sim: Snapshot with name \"{name}\" already exists for this organization"
                    );
                    files.destroy();
                } else {
                    snaps.push(SnapRecord {
                        id: snap_id,
                        name,
                        state: "active",
                        class,
                        files,
                        created_at: now_rfc3339(),
                        gone_at: None,
                    });
                }
            }
            other => {
                eprintln!("rfs-daytona-sim: snapshot of {sandbox_id} failed: {other:?}");
                files.destroy();
            }
        }
        let mut list = st2.sandboxes.lock().unwrap();
        if let Some(r) = find(&mut list, &sandbox_id, now) {
            if r.state == "snapshotting" {
                r.state = previous;
                r.pending = false;
                r.updated_at = now_rfc3339();
                r.push_view(now, Some(previous));
            }
        }
    });
    Json(dto).into_response()
}

pub(crate) async fn get_one(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    let now = Instant::now();
    let list = st.snapshots.lock().unwrap();
    match list
        .iter()
        .find(|s| s.live(now) && (s.name == id || s.id == id))
    {
        Some(s) => Json(s.dto()).into_response(),
        None => errors::api(404, uri.path(), format!("Snapshot {id} not found")),
    }
}

pub(crate) async fn list(State(st): State<Arc<AppState>>, RawQuery(q): RawQuery) -> Response {
    let pairs: Vec<(String, String)> = q
        .as_deref()
        .and_then(|q| serde_urlencoded::from_str(q).ok())
        .unwrap_or_default();
    let get = |k: &str| pairs.iter().find(|(pk, _)| pk == k).map(|(_, v)| v.clone());
    let name = get("name").unwrap_or_default().to_lowercase();
    let limit = get("limit")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(100)
        .clamp(1, 200);
    let page = get("page")
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(1)
        .max(1);
    let now = Instant::now();
    let snaps = st.snapshots.lock().unwrap();
    let rows: Vec<Value> = snaps
        .iter()
        .filter(|s| s.live(now) && s.name.to_lowercase().contains(&name))
        .map(SnapRecord::dto)
        .collect();
    let total = rows.len();
    let start = ((page - 1) * limit).min(total);
    let end = (start + limit).min(total);
    Json(json!({
        "items": rows[start..end],
        "total": total,
        "page": page,
        "totalPages": total.div_ceil(limit),
    }))
    .into_response()
}

pub(crate) async fn remove(
    State(st): State<Arc<AppState>>,
    uri: Uri,
    Path(id): Path<String>,
) -> Response {
    if uuid::Uuid::parse_str(&id).is_err() {
        return errors::api(400, uri.path(), "Validation failed (uuid is expected)");
    }
    let now = Instant::now();
    let mut list = st.snapshots.lock().unwrap();
    let Some(s) = list.iter_mut().find(|s| s.live(now) && s.id == id) else {
        return errors::api(404, uri.path(), format!("Snapshot {id} not found"));
    };
    if s.gone_at.is_none() {
        s.state = "removing";
        s.gone_at = Some(now + st.opts.delete_lag);
        let files = s.files.clone();
        std::thread::spawn(move || files.destroy());
    }
    axum::http::StatusCode::OK.into_response()
}
