//! The HTTP front: accepts connections, applies the fault knobs, checks
//! auth, records every request, then hands it to the router.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::http::{header, HeaderValue, Request, Response, StatusCode};
use axum::middleware::Next;
use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tower_service::Service;

use crate::errors;
use crate::faults::Injected;
use crate::state::AppState;
use crate::RequestRecord;

/// The path form fault rules match against: `/api` stripped, toolbox paths as they are.
pub(crate) fn route_path(path: &str) -> &str {
    match path.strip_prefix("/api") {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    }
}

#[derive(Debug)]
struct Dropped;

impl std::fmt::Display for Dropped {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("connection dropped by fault injection")
    }
}

impl std::error::Error for Dropped {}

/// `path` (as [`route_path`] gives it) with the ids in it replaced by `{}`:
/// every segment that follows a collection name.
pub(crate) fn route_template(path: &str) -> String {
    const COLLECTIONS: &[&str] = &["sandbox", "toolbox", "session", "command", "pty"];
    const NAMES: &[&str] = &["paginated", "entrypoint"];
    let mut prev = "";
    let mut out = vec![];
    for seg in route_path(path).split('/') {
        if COLLECTIONS.contains(&prev) && !seg.is_empty() && !NAMES.contains(&seg) {
            out.push("{}");
        } else {
            out.push(seg);
        }
        prev = seg;
    }
    out.join("/")
}

fn record(st: &AppState, method: &str, path: &str, status: u16, started: Instant) {
    let (path, query) = path.split_once('?').unwrap_or((path, ""));
    st.requests.lock().unwrap().push(RequestRecord {
        method: method.to_string(),
        path: route_path(path).to_string(),
        route: route_template(path),
        query: query.to_string(),
        status,
        at: started.duration_since(st.started),
    });
}

async fn handle(
    st: Arc<AppState>,
    mut router: Router,
    req: Request<Incoming>,
) -> Result<Response<Body>, Dropped> {
    let started = Instant::now();
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let route = route_path(&path).to_string();
    let full = match req.uri().query() {
        Some(q) => format!("{path}?{q}"),
        None => path.clone(),
    };
    let mut drop_response = false;
    match st.faults.take(&method, &route) {
        Some(Injected::DropResponse) => drop_response = true,
        Some(Injected::Drop) => {
            record(&st, &method, &full, 0, started);
            return Err(Dropped);
        }
        Some(Injected::Fail { status, body }) => {
            let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut resp = match body {
                Some(b) => {
                    let json = serde_json::from_str::<serde_json::Value>(&b).is_ok();
                    let mut r = Response::new(Body::from(b));
                    let ct = if json {
                        "application/json"
                    } else {
                        "text/plain; charset=utf-8"
                    };
                    r.headers_mut()
                        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ct));
                    r
                }
                None => Response::new(Body::empty()),
            };
            *resp.status_mut() = status;
            record(&st, &method, &full, status.as_u16(), started);
            return Ok(resp);
        }
        Some(Injected::RateLimit { retry_after_secs }) => {
            let mut resp = errors::api(429, &path, "ThrottlerException: Too Many Requests");
            resp.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after_secs));
            record(&st, &method, &full, 429, started);
            return Ok(resp);
        }
        None => {}
    }
    let delay = st.faults.delay(&method, &route) + st.opts.latency;
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let resp = match router.call(req.map(Body::new)).await {
        Ok(r) => r,
        Err(e) => match e {},
    };
    if drop_response {
        record(&st, &method, &full, 0, started);
        return Err(Dropped);
    }
    record(&st, &method, &full, resp.status().as_u16(), started);
    Ok(resp)
}

/// Bearer auth: the API key, or the Sim's JWT with the matching `X-Daytona-Organization-ID`.
pub(crate) async fn auth(
    axum::extract::State(st): axum::extract::State<Arc<AppState>>,
    req: Request<Body>,
    next: Next,
) -> Response<Body> {
    let path = req.uri().path().to_string();
    if path == "/api/config" || path.starts_with("/api/health") {
        return next.run(req).await;
    }
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .unwrap_or("");
    let org = req
        .headers()
        .get("x-daytona-organization-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let toolbox = path.starts_with("/toolbox/");
    let unauthorized = |msg: &str| {
        if toolbox {
            errors::toolbox(
                401,
                "UNAUTHORIZED",
                req.method().as_str(),
                &path,
                format!("unauthorized: {msg}"),
            )
        } else {
            errors::api(401, &path, msg)
        }
    };
    if !token.is_empty() && token == st.opts.api_key {
        return next.run(req).await;
    }
    if !token.is_empty() && token == st.jwt {
        if org == crate::ORGANIZATION_ID {
            return next.run(req).await;
        }
        let msg = "Organization not found or X-Daytona-Organization-ID header missing";
        return if toolbox {
            errors::toolbox(
                403,
                "FORBIDDEN",
                req.method().as_str(),
                &path,
                format!("forbidden: {msg}"),
            )
        } else {
            errors::api(403, &path, msg)
        };
    }
    unauthorized("Unauthorized")
}

pub(crate) async fn serve(
    listener: tokio::net::TcpListener,
    st: Arc<AppState>,
    router: Router,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let mut conns = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let st = st.clone();
                let router = router.clone();
                conns.spawn(async move {
                    let svc = hyper::service::service_fn(move |req| handle(st.clone(), router.clone(), req));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), svc)
                        .with_upgrades()
                        .await;
                });
            }
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    conns.abort_all();
    let _: Result<(), Infallible> = Ok(());
}
