//! Toolbox calls that are not sessions or PTYs: the base URL
//! (`{toolboxProxyUrl}/{id}`), the home directory, the streamed upload and
//! a one-shot `process/execute` (used for kills).

use std::path::Path;
use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::http::enc;
use super::http::{Call, Retry};
use super::Api;
use crate::provider::{ProviderError, ProviderResult};

/// Upload timeout: the whole archive goes through one request.
const UPLOAD_TIMEOUT: Duration = Duration::from_secs(30 * 60);

#[derive(Deserialize)]
struct Dir {
    dir: String,
}

/// `process/execute` answer.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecuteResponse {
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub result: Option<String>,
}

impl Api {
    /// The toolbox base of sandbox `id`, from the cache or the API.
    pub async fn toolbox(&self, id: &str) -> ProviderResult<String> {
        if let Some(b) = self.cached_toolbox(id) {
            return Ok(b);
        }
        let dto = self
            .get_dto(id)
            .await?
            .ok_or_else(|| ProviderError::NotFound { id: id.to_owned() })?;
        self.remember(&dto);
        self.cached_toolbox(id).ok_or_else(|| {
            ProviderError::Protocol(format!(
                "daytona: sandbox {id} has no toolboxProxyUrl; rfs cannot reach its toolbox"
            ))
        })
    }

    /// `GET /user-home-dir` → the sandbox user's home.
    pub async fn home_dir(&self, id: &str) -> ProviderResult<String> {
        let base = self.toolbox(id).await?;
        let call = Call::new(
            "read the home directory",
            Some(id),
            Method::GET,
            format!("{base}/user-home-dir"),
        );
        let d: Dir = self.http.json(&call, |r| r).await?;
        if !d.dir.starts_with('/') {
            return Err(ProviderError::Protocol(format!(
                "daytona: sandbox {id} reports home directory `{}`, not an absolute path",
                d.dir
            )));
        }
        Ok(d.dir)
    }

    /// Stream the local file to `remote_path` (`POST /files/upload`,
    /// multipart part `file`). The file is read in chunks, never whole;
    /// a retried attempt reopens it.
    pub async fn upload(&self, id: &str, local: &Path, remote_path: &str) -> ProviderResult<()> {
        let len = std::fs::metadata(local)
            .map_err(|e| ProviderError::Io(format!("cannot read {}: {e}", local.display())))?
            .len();
        let local = local.to_path_buf();
        self.upload_body(id, remote_path, len, move || {
            match std::fs::File::open(&local) {
                Ok(f) => {
                    let f = tokio::fs::File::from_std(f);
                    reqwest::Body::wrap_stream(tokio_util::io::ReaderStream::with_capacity(
                        f,
                        256 * 1024,
                    ))
                }
                // Surfaces as a transport error naming the upload.
                Err(e) => reqwest::Body::wrap_stream(futures_util::stream::once(async move {
                    Err::<bytes::Bytes, _>(e)
                })),
            }
        })
        .await
    }

    /// Write `bytes` to `remote_path` (a small file rfs generates).
    pub async fn upload_bytes(
        &self,
        id: &str,
        bytes: Vec<u8>,
        remote_path: &str,
    ) -> ProviderResult<()> {
        let bytes = bytes::Bytes::from(bytes);
        let len = bytes.len() as u64;
        self.upload_body(id, remote_path, len, move || {
            reqwest::Body::from(bytes.clone())
        })
        .await
    }

    /// `POST /files/upload` of one file whose body `body` makes (once per
    /// attempt: an upload overwriting the same bytes is retried).
    async fn upload_body(
        &self,
        id: &str,
        remote_path: &str,
        len: u64,
        body: impl Fn() -> reqwest::Body,
    ) -> ProviderResult<()> {
        if !remote_path.starts_with('/') {
            return Err(ProviderError::Invalid(format!(
                "upload destination `{remote_path}` is not an absolute path"
            )));
        }
        let base = self.toolbox(id).await?;
        // Overwriting a file with the same bytes is idempotent.
        let call = Call::new(
            "upload file",
            Some(id),
            Method::POST,
            format!("{base}/files/upload"),
        )
        .retry(Retry::Idempotent)
        .timeout(UPLOAD_TIMEOUT);
        let file_name = Path::new(remote_path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "upload".into());
        self.http
            .send(&call, |r| {
                let part = reqwest::multipart::Part::stream_with_length(body(), len)
                    .file_name(file_name.clone())
                    .mime_str("application/octet-stream")
                    .expect("static mime type");
                r.query(&[("path", remote_path)])
                    .multipart(reqwest::multipart::Form::new().part("file", part))
            })
            .await?;
        Ok(())
    }

    /// `DELETE /files?path=`; a file already gone is fine.
    pub async fn delete_file(&self, id: &str, remote_path: &str) -> ProviderResult<()> {
        let base = self.toolbox(id).await?;
        let call = Call::new(
            "delete file",
            Some(id),
            Method::DELETE,
            format!("{base}/files"),
        );
        self.delete_gone_ok(&call, |r| r.query(&[("path", remote_path)]))
            .await
    }

    /// `POST /process/execute` (short internal commands only; its output
    /// is combined and it has no streaming).
    pub async fn execute(
        &self,
        id: &str,
        op: &str,
        command: &str,
        timeout: Duration,
    ) -> ProviderResult<ExecuteResponse> {
        let base = self.toolbox(id).await?;
        let call = Call::new(
            op,
            Some(id),
            Method::POST,
            format!("{base}/process/execute"),
        )
        .timeout(timeout + Duration::from_secs(10));
        let body = json!({ "command": command, "timeout": timeout.as_secs().max(1) });
        Ok(self.http.json(&call, |r| r.json(&body)).await?)
    }

    /// Kill the process group recorded for `token`; `Ok(true)` when a group
    /// was found and killed.
    pub async fn kill_group(&self, id: &str, token: &str) -> ProviderResult<bool> {
        let r = self
            .execute(
                id,
                "kill a command's process group",
                &super::shell_text::kill_line(token),
                Duration::from_secs(30),
            )
            .await?;
        match r.exit_code {
            Some(0) => Ok(true),
            Some(super::shell_text::KILL_NOTHING_RECORDED) => Ok(false),
            other => Err(ProviderError::Kill(format!(
                "could not kill a command's process group in sandbox {id} (kill: {}): {}",
                crate::exit_code::ExitText(other),
                r.result.unwrap_or_default().trim()
            ))),
        }
    }

    /// Remove a session (best effort is the caller's choice).
    pub async fn delete_session(&self, id: &str, session: &str) -> ProviderResult<()> {
        let base = self.toolbox(id).await?;
        let call = Call::new(
            "delete session",
            Some(id),
            Method::DELETE,
            format!("{base}/process/session/{}", enc(session)),
        );
        self.delete_gone_ok(&call, |r| r).await
    }

    /// Send a toolbox `DELETE`; what is already gone (404) is fine.
    pub(super) async fn delete_gone_ok(
        &self,
        call: &Call<'_>,
        request: impl Fn(reqwest::RequestBuilder) -> reqwest::RequestBuilder,
    ) -> ProviderResult<()> {
        match self.http.send(call, request).await {
            Ok(_) => Ok(()),
            Err(e) if e.status() == Some(404) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}
