//! `/files/...`: uploads land in the sandbox (owned by `daytona`), streamed
//! to disk; missing paths answer with an empty body like the daemon.

use super::Tb;
use std::io::Write;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path as FsPath;

use axum::extract::{Multipart, RawQuery};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::errors;
use crate::isolation::{chown, SandboxBox};

fn query(q: &Option<String>, key: &str) -> Option<String> {
    q.as_deref()
        .and_then(|q| serde_urlencoded::from_str::<Vec<(String, String)>>(q).ok())
        .unwrap_or_default()
        .into_iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v)
}

/// Create the parents of a sandbox path like `MkdirAll`, owned by the sandbox user.
fn make_parents(sandbox: &SandboxBox, host: &FsPath) -> std::io::Result<()> {
    let Some(parent) = host.parent() else {
        return Ok(());
    };
    let mut missing = Vec::new();
    let mut cur = parent.to_path_buf();
    while !cur.exists() {
        missing.push(cur.clone());
        if !cur.pop() {
            break;
        }
    }
    let _ = sandbox;
    for dir in missing.into_iter().rev() {
        std::fs::create_dir(&dir)?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
        chown(&dir)?;
    }
    Ok(())
}

/// Stream one multipart field into a sandbox file; flips one byte when `corrupt`.
async fn save_field(
    sandbox: &SandboxBox,
    sandbox_path: &str,
    field: &mut axum::extract::multipart::Field<'_>,
    mut corrupt: bool,
) -> Result<u64, String> {
    let host = sandbox
        .resolve_parent(sandbox_path)
        .ok_or_else(|| format!("invalid path {sandbox_path}"))?;
    make_parents(sandbox, &host).map_err(|e| e.to_string())?;
    let mut file = std::fs::File::create(&host).map_err(|e| e.to_string())?;
    chown(&host).map_err(|e| e.to_string())?;
    let mut total = 0u64;
    while let Some(chunk) = field.chunk().await.map_err(|e| e.to_string())? {
        let mut chunk = chunk.to_vec();
        if corrupt && !chunk.is_empty() {
            let i = chunk.len() / 2;
            chunk[i] ^= 0xff;
            corrupt = false;
        }
        total += chunk.len() as u64;
        file.write_all(&chunk).map_err(|e| e.to_string())?;
    }
    Ok(total)
}

pub(crate) async fn upload(
    tb: Tb,
    RawQuery(q): RawQuery,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let Tb { ctx, st, .. } = tb;
    let Some(path) = query(&q, "path").filter(|p| !p.is_empty()) else {
        return errors::empty(400);
    };
    let Ok(mut multipart) = multipart else {
        return errors::empty(400);
    };
    loop {
        match multipart.next_field().await {
            Ok(Some(mut field)) => {
                if field.name() != Some("file") {
                    continue;
                }
                let corrupt = st.faults.take_corrupt_upload();
                return match save_field(ctx.sandbox(), &path, &mut field, corrupt).await {
                    Ok(_) => StatusCode::OK.into_response(),
                    Err(_) => errors::empty(400),
                };
            }
            Ok(None) => return errors::empty(400),
            Err(_) => return errors::empty(400),
        }
    }
}

pub(crate) async fn bulk_upload(
    tb: Tb,
    multipart: Result<Multipart, axum::extract::multipart::MultipartRejection>,
) -> Response {
    let Tb { ctx, st, .. } = tb;
    let Ok(mut multipart) = multipart else {
        return errors::empty(400);
    };
    let mut paths: std::collections::HashMap<String, String> = std::collections::HashMap::new();
    let mut files: Vec<Value> = Vec::new();
    let mut errs: Vec<Value> = Vec::new();
    loop {
        let mut field = match multipart.next_field().await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(_) => return errors::empty(400),
        };
        let name = field.name().unwrap_or("").to_string();
        if let Some(idx) = name.strip_suffix(".path") {
            let text = field.text().await.unwrap_or_default();
            paths.insert(idx.to_string(), text);
        } else if let Some(idx) = name.strip_suffix(".file") {
            let Some(path) = paths.get(idx).cloned() else {
                errs.push(json!({ "file": name, "error": "path part must precede the file part" }));
                continue;
            };
            let corrupt = st.faults.take_corrupt_upload();
            match save_field(ctx.sandbox(), &path, &mut field, corrupt).await {
                Ok(bytes) => files.push(json!({ "path": path, "bytes": bytes })),
                Err(e) => errs.push(json!({ "path": path, "error": e })),
            }
        }
    }
    if errs.is_empty() {
        Json(json!({ "files": files })).into_response()
    } else {
        (
            StatusCode::BAD_REQUEST,
            Json(json!({ "errors": errs, "files": files })),
        )
            .into_response()
    }
}

pub(crate) async fn download(tb: Tb, RawQuery(q): RawQuery) -> Response {
    let Tb { ctx, .. } = tb;
    let Some(path) = query(&q, "path") else {
        return errors::empty(400);
    };
    match ctx.sandbox().resolve(&path) {
        Some(p) if p.is_dir() => errors::empty(400),
        Some(p) if p.is_file() => match std::fs::read(&p) {
            Ok(b) => ([(header::CONTENT_TYPE, "application/octet-stream")], b).into_response(),
            Err(_) => errors::empty(403),
        },
        _ => errors::empty(404),
    }
}

pub(crate) async fn folder(tb: Tb, RawQuery(q): RawQuery) -> Response {
    let Tb { ctx, .. } = tb;
    let Some(path) = query(&q, "path").filter(|p| !p.is_empty()) else {
        return errors::empty(400);
    };
    let mode = match query(&q, "mode") {
        Some(m) => match u32::from_str_radix(&m, 8) {
            Ok(m) => m,
            Err(_) => return errors::empty(400),
        },
        None => 0o755,
    };
    let Some(target) = ctx.sandbox().resolve_parent(path.trim_end_matches('/')) else {
        return StatusCode::CREATED.into_response();
    };
    let made = make_parents(ctx.sandbox(), &target.join("x"))
        .and_then(|_| std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)));
    match made {
        Ok(()) => StatusCode::CREATED.into_response(),
        Err(_) => errors::empty(400),
    }
}

fn file_info(host: &FsPath, name: &str) -> Option<Value> {
    let meta = std::fs::symlink_metadata(host).ok()?;
    let modified = meta
        .modified()
        .ok()
        .map(|t| {
            time::OffsetDateTime::from(t)
                .format(&time::format_description::well_known::Rfc3339)
                .unwrap_or_default()
        })
        .unwrap_or_default();
    let owner = if meta.uid() == 0 { "root" } else { "daytona" };
    Some(json!({
        "name": name,
        "size": meta.len(),
        "mode": format!("{:o}", meta.mode() & 0o7777),
        "permissions": format!("{:#o}", meta.mode() & 0o7777),
        "isDir": meta.is_dir(),
        "modTime": modified,
        "modifiedAt": modified,
        "owner": owner,
        "group": owner,
    }))
}

pub(crate) async fn info(tb: Tb, RawQuery(q): RawQuery) -> Response {
    let Tb { ctx, .. } = tb;
    let path = query(&q, "path").unwrap_or_default();
    let name = FsPath::new(&path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    match ctx
        .sandbox()
        .resolve(&path)
        .and_then(|p| file_info(&p, &name))
    {
        Some(v) => Json(v).into_response(),
        None => errors::empty(404),
    }
}

pub(crate) async fn list(tb: Tb, RawQuery(q): RawQuery) -> Response {
    let Tb { ctx, .. } = tb;
    let path = query(&q, "path")
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| ".".into());
    let Some(dir) = ctx.sandbox().resolve(&path).filter(|p| p.is_dir()) else {
        return errors::empty(404);
    };
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return errors::empty(403);
    };
    let mut out: Vec<Value> = entries
        .flatten()
        .filter_map(|e| file_info(&e.path(), &e.file_name().to_string_lossy()))
        .collect();
    out.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    Json(Value::Array(out)).into_response()
}

pub(crate) async fn delete(tb: Tb, RawQuery(q): RawQuery) -> Response {
    let Tb { ctx, .. } = tb;
    let path = query(&q, "path").unwrap_or_default();
    let recursive = query(&q, "recursive").is_some_and(|r| r == "true");
    let Some(host) = ctx.sandbox().resolve_parent(&path) else {
        return errors::empty(404);
    };
    let Ok(meta) = std::fs::symlink_metadata(&host) else {
        return errors::empty(404);
    };
    let removed = if meta.is_dir() {
        if !recursive {
            return errors::empty(400);
        }
        std::fs::remove_dir_all(&host)
    } else {
        std::fs::remove_file(&host)
    };
    match removed {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(_) => errors::empty(403),
    }
}
