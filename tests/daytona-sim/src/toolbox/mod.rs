//! The toolbox API (`{toolboxProxyUrl}/{sandboxId}/...`), served under `/toolbox/{id}`.

mod execute;
mod files;
mod pty;
mod session;
mod session_log;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, FromRequest, FromRequestParts, Path, Request};
use axum::http::request::Parts;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::errors;
use crate::isolation::{SandboxBox, HOME};
use crate::state::AppState;

/// Per-sandbox daemon state: sessions and PTYs.
pub(crate) struct ToolboxState {
    pub sandbox: Arc<SandboxBox>,
    sessions: Mutex<HashMap<String, session::Session>>,
    ptys: Mutex<HashMap<String, Arc<pty::PtySession>>>,
}

impl ToolboxState {
    pub fn new(sandbox: Arc<SandboxBox>) -> ToolboxState {
        ToolboxState {
            sandbox,
            sessions: Mutex::new(HashMap::new()),
            ptys: Mutex::new(HashMap::new()),
        }
    }

    /// The daemon dies with its sandbox: forget every session and PTY (killing their processes).
    pub fn shutdown(&self) {
        let sessions: Vec<_> = self.sessions.lock().unwrap().drain().collect();
        for (_, mut s) in sessions {
            s.kill();
        }
        let ptys: Vec<_> = self.ptys.lock().unwrap().drain().collect();
        for (_, p) in ptys {
            p.kill();
        }
    }
}

/// What a toolbox handler gets: the sandbox, its daemon state and the sandbox's env.
pub(crate) struct Ctx {
    pub tb: Arc<ToolboxState>,
    pub env: Vec<(String, String)>,
}

impl Ctx {
    pub fn sandbox(&self) -> &SandboxBox {
        &self.tb.sandbox
    }
}

/// Resolve the sandbox of a toolbox request (the proxy's job), bumping its activity.
pub(crate) fn ctx(
    st: &AppState,
    id: &str,
    headers: &HeaderMap,
    method: &Method,
    uri: &Uri,
) -> Result<Ctx, Response> {
    let now = Instant::now();
    let mut list = st.sandboxes.lock().unwrap();
    let Some(rec) = list.iter_mut().find(|r| !r.is_gone(now) && r.id == id) else {
        return Err(errors::toolbox(
            404,
            "NOT_FOUND",
            method.as_str(),
            uri.path(),
            format!("not found: sandbox {id} not found"),
        ));
    };
    if rec.deleted_at.is_some() || rec.state != "started" || !rec.sandbox.is_running() {
        return Err(errors::toolbox(
            400,
            "BAD_REQUEST",
            method.as_str(),
            uri.path(),
            format!(
                "bad request: sandbox {id} is not started (state {})",
                rec.current_state(now).unwrap_or("destroyed")
            ),
        ));
    }
    let skip = headers
        .get("x-daytona-skip-last-activity-update")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("true"));
    if !skip {
        rec.touch();
    }
    Ok(Ctx {
        tb: rec.toolbox.clone(),
        env: rec
            .env
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
    })
}

/// What every toolbox handler starts from: the request's sandbox resolved
/// (the proxy's job: 404 unknown, 400 not started, activity bumped) and
/// the request's method, URI and headers for the daemon's error bodies.
pub(crate) struct Tb {
    pub ctx: Ctx,
    pub st: Arc<AppState>,
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
}

impl FromRequestParts<Arc<AppState>> for Tb {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        st: &Arc<AppState>,
    ) -> Result<Self, Self::Rejection> {
        let Path(params) = Path::<HashMap<String, String>>::from_request_parts(parts, st)
            .await
            .map_err(IntoResponse::into_response)?;
        let id = params.get("id").map(String::as_str).unwrap_or_default();
        let ctx = ctx(st, id, &parts.headers, &parts.method, &parts.uri)?;
        Ok(Tb {
            ctx,
            st: st.clone(),
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
        })
    }
}

/// A JSON request body; one that does not parse is the daemon's bare 400
/// (empty body).
pub(crate) struct JsonBody<T>(pub T);

impl<T: DeserializeOwned, S: Send + Sync> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(req: Request, st: &S) -> Result<Self, Self::Rejection> {
        let body = Bytes::from_request(req, st)
            .await
            .map_err(|_| errors::empty(400))?;
        serde_json::from_slice(&body)
            .map(JsonBody)
            .map_err(|_| errors::empty(400))
    }
}

pub(crate) fn router() -> Router<Arc<AppState>> {
    Router::new()
        .route("/toolbox/{id}/work-dir", get(work_dir))
        .route("/toolbox/{id}/user-home-dir", get(work_dir))
        .route("/toolbox/{id}/project-dir", get(work_dir))
        .route("/toolbox/{id}/version", get(version))
        .route("/toolbox/{id}/process/execute", post(execute::execute))
        .route(
            "/toolbox/{id}/process/session",
            post(session::create).get(session::list),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}",
            get(session::get).delete(session::delete),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}/exec",
            post(session::exec),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}/command/{cid}",
            get(session::command),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}/command/{cid}/logs",
            get(session::logs),
        )
        .route(
            "/toolbox/{id}/process/session/{sid}/command/{cid}/input",
            post(session::input),
        )
        .route(
            "/toolbox/{id}/process/pty",
            post(pty::create).get(pty::list),
        )
        .route(
            "/toolbox/{id}/process/pty/{pid}",
            get(pty::get).delete(pty::delete),
        )
        .route("/toolbox/{id}/process/pty/{pid}/connect", get(pty::connect))
        .route("/toolbox/{id}/process/pty/{pid}/resize", post(pty::resize))
        .route(
            "/toolbox/{id}/files",
            get(files::list).delete(files::delete),
        )
        .route("/toolbox/{id}/files/info", get(files::info))
        .route("/toolbox/{id}/files/folder", post(files::folder))
        // The daemon (gin) puts no size limit on uploads (large parts
        // spill to disk); axum's default 2 MB limit would refuse them.
        .route(
            "/toolbox/{id}/files/upload",
            post(files::upload).layer(DefaultBodyLimit::disable()),
        )
        .route(
            "/toolbox/{id}/files/bulk-upload",
            post(files::bulk_upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/toolbox/{id}/files/download", get(files::download))
}

async fn work_dir(_: Tb) -> Response {
    Json(json!({ "dir": HOME })).into_response()
}

async fn version(_: Tb) -> Response {
    Json(json!({ "version": crate::DAEMON_VERSION })).into_response()
}

/// How the daemon shapes session output for this request (`X-Daytona-SDK-Version`, `X-Daytona-Split-Output`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OutputMode {
    /// Markers stripped, `output` only.
    pub combined: bool,
    /// `stdout`/`stderr` split by the server (JSON logs).
    pub demux: bool,
}

fn parse_version(v: &str) -> Option<(u64, u64, u64, bool)> {
    let v = v.trim().trim_start_matches('v');
    let (core, pre) = match v.split_once('-') {
        Some((c, _)) => (c, true),
        None => (v, false),
    };
    let core = core.split('+').next()?;
    let mut it = core.split('.').map(|p| p.parse::<u64>());
    Some((
        it.next()?.ok()?,
        it.next()?.ok()?,
        it.next().unwrap_or(Ok(0)).ok()?,
        pre,
    ))
}

/// Compare with a `x.y.z-0` minimum: any release or prerelease of x.y.z counts as >=.
fn at_least(v: &str, min: (u64, u64, u64)) -> Option<bool> {
    let (a, b, c, _) = parse_version(v)?;
    Some((a, b, c) >= min)
}

pub(crate) fn output_mode(headers: &HeaderMap) -> OutputMode {
    let sdk = headers
        .get("x-daytona-sdk-version")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let split = headers
        .get("x-daytona-split-output")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v == "true");
    let dev = sdk.contains("dev");
    let below_027 = at_least(&sdk, (0, 27, 0)).map(|ok| !ok).unwrap_or(false);
    let combined = (below_027 && !dev) || (sdk.is_empty() && !split);
    let skip_demux = if sdk.is_empty() {
        true
    } else if dev {
        false
    } else {
        at_least(&sdk, (0, 167, 0)).map(|ok| !ok).unwrap_or(true)
    };
    OutputMode {
        combined,
        demux: !skip_demux,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(sdk: Option<&str>, split: bool) -> OutputMode {
        let mut h = HeaderMap::new();
        if let Some(v) = sdk {
            h.insert("x-daytona-sdk-version", v.parse().unwrap());
        }
        if split {
            h.insert("x-daytona-split-output", "true".parse().unwrap());
        }
        output_mode(&h)
    }

    #[test]
    fn output_shapes_follow_the_sdk_version_header() {
        assert_eq!(
            mode(None, false),
            OutputMode {
                combined: true,
                demux: false
            }
        );
        assert_eq!(
            mode(None, true),
            OutputMode {
                combined: false,
                demux: false
            }
        );
        assert_eq!(
            mode(Some("0.100.0"), false),
            OutputMode {
                combined: false,
                demux: false
            }
        );
        assert_eq!(
            mode(Some("0.167.0"), false),
            OutputMode {
                combined: false,
                demux: true
            }
        );
        assert_eq!(
            mode(Some("0.190.0"), false),
            OutputMode {
                combined: false,
                demux: true
            }
        );
        assert_eq!(
            mode(Some("0.20.0"), false),
            OutputMode {
                combined: true,
                demux: false
            }
        );
    }
}
