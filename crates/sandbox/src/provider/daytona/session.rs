//! Toolbox sessions and their commands' resources: creating a session
//! (and one made ahead for the next step), a command's status and log,
//! and the exit status the wrapper records in `/tmp`.

use std::time::Duration;

use reqwest::Method;
use serde::Deserialize;
use serde_json::json;

use super::http::enc;
use super::http::{Call, HttpError};
use super::logs::{parse_logs, Logs};
use super::shell_text;
use super::{lock, Api};
use crate::provider::{ProviderError, ProviderResult};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommandStatus {
    #[serde(default)]
    exit_code: Option<i32>,
}

/// An exit status the wrapper recorded itself.
#[derive(Debug, Clone, Copy)]
pub struct RecordedExit {
    pub code: i32,
    /// The toolbox's log is still there (held open by a process the
    /// command left running), as opposed to removed by the command.
    pub log_kept: bool,
}

impl Api {
    pub(super) async fn session_call<T: serde::de::DeserializeOwned>(
        &self,
        call: Call<'_>,
        body: Option<serde_json::Value>,
    ) -> Result<T, HttpError> {
        self.http
            .json(&call, |r| match &body {
                Some(b) => r.json(b),
                None => r,
            })
            .await
    }

    /// Current output of a session command; `None` when the toolbox no
    /// longer has its log (the command removed `$HOME/.daytona`).
    pub(super) async fn logs(
        &self,
        base: &str,
        id: &str,
        sid: &str,
        cmd: &str,
    ) -> ProviderResult<Option<Logs>> {
        let call = command_get("read command output", base, id, sid, cmd, "/logs");
        let resp = match self.http.send(&call, |r| r).await {
            Ok(r) => r,
            Err(e) if e.status() == Some(404) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        let body = resp.bytes().await.map_err(|e| {
            ProviderError::Api(format!(
                "daytona: read command output (sandbox {id}) failed: {e}"
            ))
        })?;
        Ok(Some(parse_logs(&body)))
    }

    /// The exit status the wrapper recorded in `/tmp` (see
    /// [`shell_text::exit_status_line`]), once it has one.
    pub async fn recorded_exit(
        &self,
        id: &str,
        sid: &str,
        token: &str,
    ) -> ProviderResult<Option<RecordedExit>> {
        let session_dir = self.session_dir(id, sid);
        let r = self
            .execute(
                id,
                "read a command's recorded exit status",
                &shell_text::exit_status_line(token, session_dir.as_deref()),
                Duration::from_secs(30),
            )
            .await?;
        Ok(match r.exit_code {
            Some(0) => r.result.as_deref().and_then(|s| {
                let mut lines = s.lines();
                let code = lines.next()?.trim().parse().ok()?;
                let log_kept = lines.next().is_some_and(|l| l.trim() == "kept");
                Some(RecordedExit { code, log_kept })
            }),
            _ => None,
        })
    }

    /// Where the toolbox keeps session `sid` (its daemon's config dir is
    /// `$HOME/.daytona`), if the sandbox's home is known.
    pub(super) fn session_dir(&self, id: &str, sid: &str) -> Option<String> {
        lock(&self.homes)
            .get(id)
            .map(|h| format!("{}/.daytona/sessions/{sid}", h.trim_end_matches('/')))
    }

    /// A session command's exit code, once it has one.
    pub async fn status(
        &self,
        base: &str,
        id: &str,
        sid: &str,
        cmd: &str,
    ) -> ProviderResult<Option<i32>> {
        let call = command_get("read command status", base, id, sid, cmd, "");
        let s: CommandStatus = self.session_call(call, None).await?;
        Ok(s.exit_code)
    }

    /// Create session `sid` in sandbox `id`.
    pub(super) async fn create_session(
        &self,
        base: &str,
        id: &str,
        sid: &str,
    ) -> ProviderResult<()> {
        let create = Call::new(
            "create session",
            Some(id),
            Method::POST,
            format!("{base}/process/session"),
        );
        // The toolbox's proxy answers 404 for a sandbox that is gone; a
        // 404 is named so only when get-by-id agrees.
        match self
            .http
            .send(&create, |r| r.json(&json!({ "sessionId": sid })))
            .await
        {
            Err(e) if e.status() == Some(404) => Err(match self.get_dto(id).await {
                Ok(None) => ProviderError::NotFound { id: id.to_owned() },
                _ => e.into(),
            }),
            r => r.map(|_| ()).map_err(Into::into),
        }
    }

    /// The session made ahead for sandbox `id`, if one is ready.
    pub(super) fn take_spare(&self, id: &str) -> Option<String> {
        lock(&self.agents).get_mut(id).and_then(|p| p.spare.take())
    }

    /// Make a session ahead for the next step of sandbox `id` (in the
    /// background; none when one is ready or coming).
    pub(super) fn make_spare(&self, base: &str, id: &str) {
        {
            let mut pools = lock(&self.agents);
            let pool = pools.entry(id.to_owned()).or_default();
            if pool.spare.is_some() || pool.spare_coming {
                return;
            }
            pool.spare_coming = true;
        }
        let api = self.clone();
        let (base, id) = (base.to_owned(), id.to_owned());
        tokio::spawn(async move {
            let sid = format!("rfs-{}", shell_text::token());
            let made = api.create_session(&base, &id, &sid).await.is_ok();
            let mut pools = lock(&api.agents);
            // No pool: the sandbox is gone (its sessions with it).
            if let Some(pool) = pools.get_mut(&id) {
                pool.spare_coming = false;
                if made {
                    pool.spare = Some(sid);
                }
            }
        });
    }
}

/// A GET of session command `cmd`'s resource (`suffix`: `""` for its
/// status, `/logs` for its output).
fn command_get<'a>(
    what: &'static str,
    base: &str,
    id: &'a str,
    sid: &str,
    cmd: &str,
    suffix: &str,
) -> Call<'a> {
    Call::new(
        what,
        Some(id),
        Method::GET,
        format!(
            "{base}/process/session/{}/command/{}{suffix}",
            enc(sid),
            enc(cmd)
        ),
    )
}
