//! Error bodies exactly as Daytona shapes them.
//!
//! - REST API (NestJS filter): `{path, timestamp, statusCode, error, message}`.
//! - Toolbox daemon (gin middleware): `{statusCode, message, code, timestamp, path, method}`,
//!   except where a handler aborts with only a status line: then the body is empty.
//! - PTY handlers answer `{"error": "..."}`.

use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::state::now_rfc3339;

fn reason(status: StatusCode) -> &'static str {
    status.canonical_reason().unwrap_or("Error")
}

/// A REST API error.
pub(crate) fn api(status: u16, path: &str, message: impl Into<String>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "path": path,
        "timestamp": now_rfc3339(),
        "statusCode": status.as_u16(),
        "error": reason(status),
        "message": message.into(),
    });
    (status, axum::Json(body)).into_response()
}

/// A toolbox error with Daytona's `ErrorResponse` body; `code` like `NOT_FOUND`.
pub(crate) fn toolbox(
    status: u16,
    code: &str,
    method: &str,
    path: &str,
    message: impl Into<String>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "statusCode": status.as_u16(),
        "message": message.into(),
        "code": code,
        "timestamp": now_rfc3339(),
        "path": path,
        "method": method,
    });
    (status, axum::Json(body)).into_response()
}

/// A status line with an empty body (gin's `AbortWithError`).
pub(crate) fn empty(status: u16) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = status.into_response();
    r.headers_mut().remove(header::CONTENT_TYPE);
    r
}

/// A PTY handler error (`gin.H{"error": ...}`).
pub(crate) fn pty(status: u16, message: impl Into<String>) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(json!({ "error": message.into() }))).into_response()
}
