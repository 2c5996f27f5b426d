//! The HTTP client under every Daytona call: per-request timeouts, retries
//! with exponential backoff and full jitter for idempotent calls only (on
//! 429 honouring `Retry-After`, on 5xx and on connection errors), and the
//! mapping of every failure to an error naming the operation, the sandbox,
//! the status and Daytona's message (bodies may be empty). Every message
//! passes through [`Config::redact`] so the credential never leaks.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, RETRY_AFTER};
use reqwest::{Method, RequestBuilder, Response, StatusCode};

use super::config::{Config, ConfigError};
use crate::provider::ProviderError;

/// The toolbox changes its response shapes by this header; rfs pins the
/// version it parses (split stdout/stderr, JSON logs) and accepts the older
/// shapes too.
pub const SDK_VERSION: &str = "0.190.0";
/// Default per-request timeout ([`Config::request_timeout`] sets it).
pub use super::config::REQUEST_TIMEOUT;
/// Attempts of an idempotent call (the first included).
pub const ATTEMPTS: u32 = 5;
/// First backoff step; doubles per attempt up to [`BACKOFF_CAP`].
const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_CAP: Duration = Duration::from_secs(5);
/// A `Retry-After` longer than this is cut to it.
const RETRY_AFTER_CAP: Duration = Duration::from_secs(120);
/// At most this much of an error body goes into a message.
const MESSAGE_LIMIT: usize = 500;

/// Whether a call may be sent again when its outcome is unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Sending it twice has the effect of sending it once.
    Idempotent,
    /// Never resent (create, command exec): a second one could leak a
    /// sandbox or run a command twice.
    Never,
}

/// One API call, for messages and policy.
#[derive(Debug, Clone)]
pub struct Call<'a> {
    /// What rfs was doing, e.g. "create sandbox", "delete sandbox".
    pub op: &'a str,
    pub sandbox: Option<&'a str>,
    pub method: Method,
    pub url: String,
    pub retry: Retry,
    /// This call's own timeout; `None`: the configured request timeout.
    pub timeout: Option<Duration>,
}

impl<'a> Call<'a> {
    pub fn new(op: &'a str, sandbox: Option<&'a str>, method: Method, url: String) -> Self {
        let retry = if matches!(
            method,
            Method::GET | Method::DELETE | Method::PUT | Method::HEAD
        ) {
            Retry::Idempotent
        } else {
            Retry::Never
        };
        Call {
            op,
            sandbox,
            method,
            url,
            retry,
            timeout: None,
        }
    }
    pub fn retry(mut self, r: Retry) -> Self {
        self.retry = r;
        self
    }
    pub fn timeout(mut self, t: Duration) -> Self {
        self.timeout = Some(t);
        self
    }
}

/// Why a call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The server answered with a non-success status.
    Status {
        status: u16,
        /// Daytona's message, when the body had one.
        message: Option<String>,
    },
    /// No answer: connection refused/reset/dropped, or the timeout.
    Transport { message: String, timed_out: bool },
}

/// A failed call with its context.
#[derive(Debug, Clone)]
pub struct HttpError {
    pub op: String,
    pub sandbox: Option<String>,
    pub failure: Failure,
    /// How many times the call was sent.
    pub attempts: u32,
}

impl HttpError {
    pub fn status(&self) -> Option<u16> {
        match self.failure {
            Failure::Status { status, .. } => Some(status),
            Failure::Transport { .. } => None,
        }
    }
    pub fn message(&self) -> Option<&str> {
        match &self.failure {
            Failure::Status { message, .. } => message.as_deref(),
            Failure::Transport { .. } => None,
        }
    }
    /// True when the server may or may not have acted on the call.
    pub fn ambiguous(&self) -> bool {
        match self.failure {
            Failure::Transport { .. } => true,
            Failure::Status { status, .. } => status >= 500 || status == 408,
        }
    }
}

impl std::fmt::Display for HttpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "daytona: {}", self.op)?;
        if let Some(id) = &self.sandbox {
            write!(f, " (sandbox {id})")?;
        }
        write!(f, " failed")?;
        match &self.failure {
            Failure::Status { status, message } => {
                let reason = StatusCode::from_u16(*status)
                    .ok()
                    .and_then(|s| s.canonical_reason())
                    .unwrap_or("");
                write!(f, ": HTTP {status} {reason}")?;
                match message {
                    Some(m) => write!(f, ": {m}")?,
                    None => write!(f, " (empty body)")?,
                }
            }
            Failure::Transport { message, timed_out } => {
                if *timed_out {
                    write!(f, ": no answer in time ({message})")?;
                } else {
                    write!(f, ": {message}")?;
                }
            }
        }
        if self.attempts > 1 {
            write!(f, " after {} attempts", self.attempts)?;
        }
        Ok(())
    }
}

impl From<HttpError> for ProviderError {
    fn from(e: HttpError) -> Self {
        ProviderError::Api(e.to_string())
    }
}

/// Daytona's message from an error body: JSON `message` (string or list)
/// or `error`, else the text itself; `None` when the body is empty.
pub fn body_message(body: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let from_json = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| {
            let field = |k: &str| match v.get(k) {
                Some(serde_json::Value::String(s)) if !s.trim().is_empty() => {
                    Some(s.trim().to_owned())
                }
                Some(serde_json::Value::Array(a)) if !a.is_empty() => Some(
                    a.iter()
                        .map(|x| {
                            x.as_str()
                                .map(str::to_owned)
                                .unwrap_or_else(|| x.to_string())
                        })
                        .collect::<Vec<_>>()
                        .join("; "),
                ),
                _ => None,
            };
            field("message").or_else(|| field("error"))
        });
    let mut m = from_json.unwrap_or_else(|| text.to_owned());
    if m.len() > MESSAGE_LIMIT {
        let mut cut = MESSAGE_LIMIT;
        while !m.is_char_boundary(cut) {
            cut -= 1;
        }
        m.truncate(cut);
        m.push('…');
    }
    Some(m)
}

/// Whether a failed attempt may be retried under `retry`.
pub fn retryable(retry: Retry, failure: &Failure) -> bool {
    retry == Retry::Idempotent
        && match failure {
            Failure::Transport { .. } => true,
            Failure::Status { status, .. } => *status == 429 || *status >= 500,
        }
}

/// The wait before attempt `attempt + 1` (attempt counts from 1): the
/// server's `Retry-After` when it gave one, else full jitter over an
/// exponential step. `unit` in [0, 1) is the random draw.
pub fn backoff(attempt: u32, retry_after: Option<Duration>, unit: f64) -> Duration {
    if let Some(ra) = retry_after {
        return ra.min(RETRY_AFTER_CAP);
    }
    let exp = BACKOFF_BASE.saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
    exp.min(BACKOFF_CAP).mul_f64(unit.clamp(0.0, 1.0))
}

/// `Retry-After` in seconds (the HTTP-date form is ignored).
fn retry_after(h: &HeaderMap) -> Option<Duration> {
    h.get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse::<u64>()
        .ok()
        .map(Duration::from_secs)
}

/// A uniform draw in [0, 1).
fn unit() -> f64 {
    (uuid::Uuid::new_v4().as_u128() >> 75) as f64 / (1u64 << 53) as f64
}

/// The client: one connection pool, the credential, the pinned headers.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    cfg: Arc<Config>,
}

impl Http {
    pub fn new(cfg: Arc<Config>) -> Result<Http, ConfigError> {
        let mut headers = HeaderMap::new();
        let mut auth =
            HeaderValue::from_str(&cfg.bearer()).map_err(|_| ConfigError::CredentialNotAHeader)?;
        auth.set_sensitive(true);
        headers.insert(AUTHORIZATION, auth);
        headers.insert(
            "X-Daytona-SDK-Version",
            HeaderValue::from_static(SDK_VERSION),
        );
        headers.insert("X-Daytona-Source", HeaderValue::from_static("rfs"));
        if let Some(org) = cfg.organization() {
            headers.insert(
                "X-Daytona-Organization-ID",
                HeaderValue::from_str(org).map_err(|_| ConfigError::OrganizationNotAHeader)?,
            );
        }
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!("rfs/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| ConfigError::HttpClient(e.to_string()))?;
        Ok(Http { client, cfg })
    }

    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Send `call` (building the request with `body` per attempt) until it
    /// succeeds or the retry policy gives up. Non-success statuses are
    /// errors carrying Daytona's message.
    pub async fn send(
        &self,
        call: &Call<'_>,
        body: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<Response, HttpError> {
        let mut attempt = 0;
        let timeout = call.timeout.unwrap_or(self.cfg.request_timeout);
        let route = route_template(&call.url, call.sandbox);
        loop {
            attempt += 1;
            let req = body(
                self.client
                    .request(call.method.clone(), &call.url)
                    .timeout(timeout),
            );
            let sent = std::time::Instant::now();
            let answer = req.send().await;
            let elapsed_ms = sent.elapsed().as_millis() as u64;
            match &answer {
                Ok(resp) => tracing::debug!(
                    target: "rfs::daytona",
                    method = %call.method,
                    route = %route,
                    status = resp.status().as_u16(),
                    attempt,
                    elapsed_ms,
                    "{}",
                    call.op
                ),
                Err(e) => tracing::debug!(
                    target: "rfs::daytona",
                    method = %call.method,
                    route = %route,
                    status = "none",
                    timed_out = e.is_timeout(),
                    attempt,
                    elapsed_ms,
                    "{}",
                    call.op
                ),
            }
            let (failure, wait_hint) = match answer {
                Ok(resp) if resp.status().is_success() => return Ok(resp),
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let hint = retry_after(resp.headers());
                    let body = resp.bytes().await.unwrap_or_default();
                    let message = body_message(&body).map(|m| self.cfg.redact(&m));
                    (Failure::Status { status, message }, hint)
                }
                Err(e) => (
                    Failure::Transport {
                        message: self.cfg.redact(&transport_message(&e)),
                        timed_out: e.is_timeout(),
                    },
                    None,
                ),
            };
            if attempt >= ATTEMPTS || !retryable(call.retry, &failure) {
                return Err(HttpError {
                    op: call.op.to_owned(),
                    sandbox: call.sandbox.map(str::to_owned),
                    failure,
                    attempts: attempt,
                });
            }
            let delay = backoff(attempt, wait_hint, unit());
            tracing::debug!(
                target: "rfs::daytona",
                method = %call.method,
                route = %route,
                attempt,
                delay_ms = delay.as_millis() as u64,
                "{}: retrying",
                call.op
            );
            tokio::time::sleep(delay).await;
        }
    }

    /// [`Http::send`] and parse a JSON answer.
    pub async fn json<T: serde::de::DeserializeOwned>(
        &self,
        call: &Call<'_>,
        body: impl Fn(RequestBuilder) -> RequestBuilder,
    ) -> Result<T, HttpError> {
        let resp = self.send(call, body).await?;
        let bytes = resp.bytes().await.map_err(|e| HttpError {
            op: call.op.to_owned(),
            sandbox: call.sandbox.map(str::to_owned),
            failure: Failure::Transport {
                message: self.cfg.redact(&transport_message(&e)),
                timed_out: e.is_timeout(),
            },
            attempts: 1,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| HttpError {
            op: call.op.to_owned(),
            sandbox: call.sandbox.map(str::to_owned),
            failure: Failure::Status {
                status: 200,
                message: Some(format!(
                    "unexpected answer ({e}): {}",
                    body_message(&bytes)
                        .map(|m| self.cfg.redact(&m))
                        .unwrap_or_default()
                )),
            },
            attempts: 1,
        })
    }
}

/// The path of `url` with every id replaced by `{}`: no host, no query,
/// no sandbox/session/command id (what the debug log names a call by).
pub fn route_template(url: &str, sandbox: Option<&str>) -> String {
    let path = match reqwest::Url::parse(url) {
        Ok(u) => u.path().to_owned(),
        Err(_) => return "(unparsable URL)".into(),
    };
    let sandbox = sandbox.map(enc);
    path.split('/')
        .map(|seg| {
            if Some(seg) == sandbox.as_deref() || seg.bytes().any(|b| b.is_ascii_digit()) {
                "{}"
            } else {
                seg
            }
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// A transport error's text with its causes (reqwest's top line alone says
/// little), without the URL's query.
fn transport_message(e: &reqwest::Error) -> String {
    let mut parts = vec![];
    let mut src: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = src {
        let t = s.to_string();
        if !parts.iter().any(|p: &String| p.contains(&t)) {
            parts.push(t);
        }
        src = s.source();
    }
    parts.join(": ")
}

/// Percent-encode one path segment.
pub fn enc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_from_both_body_shapes_and_empty_bodies() {
        let api = br#"{"path":"/api/sandbox","timestamp":"t","statusCode":400,"error":"Bad Request","message":"Snapshot nope not found"}"#;
        assert_eq!(
            body_message(api).as_deref(),
            Some("Snapshot nope not found")
        );
        let tb = br#"{"statusCode":409,"message":"session exists","code":"CONFLICT"}"#;
        assert_eq!(body_message(tb).as_deref(), Some("session exists"));
        let list = br#"{"message":["a must be set","b too"]}"#;
        assert_eq!(body_message(list).as_deref(), Some("a must be set; b too"));
        assert_eq!(body_message(b"").as_deref(), None);
        assert_eq!(body_message(b"  \n").as_deref(), None);
        assert_eq!(body_message(b"plain text").as_deref(), Some("plain text"));
        assert!(body_message(&[b'x'; 2000]).unwrap().len() < 600);
    }

    #[test]
    fn http_failures_name_operation_sandbox_status_and_message() {
        let e = HttpError {
            op: "delete sandbox".into(),
            sandbox: Some("sb-1".into()),
            failure: Failure::Status {
                status: 500,
                message: None,
            },
            attempts: 5,
        };
        assert_eq!(
            e.to_string(),
            "daytona: delete sandbox (sandbox sb-1) failed: HTTP 500 Internal Server Error (empty body) after 5 attempts"
        );
        let e = HttpError {
            op: "create sandbox".into(),
            sandbox: None,
            failure: Failure::Status {
                status: 400,
                message: Some("Snapshot x not found".into()),
            },
            attempts: 1,
        };
        assert_eq!(
            e.to_string(),
            "daytona: create sandbox failed: HTTP 400 Bad Request: Snapshot x not found"
        );
    }

    #[test]
    fn only_idempotent_calls_retry_and_only_on_429_5xx_and_transport() {
        let st = |s| Failure::Status {
            status: s,
            message: None,
        };
        let tr = Failure::Transport {
            message: "reset".into(),
            timed_out: false,
        };
        for f in [st(429), st(500), st(502), st(503), tr.clone()] {
            assert!(retryable(Retry::Idempotent, &f), "{f:?}");
            assert!(!retryable(Retry::Never, &f), "{f:?}");
        }
        for s in [400, 401, 403, 404, 408, 409] {
            assert!(!retryable(Retry::Idempotent, &st(s)), "{s}");
        }
        assert_eq!(
            Call::new("x", None, Method::GET, "u".into()).retry,
            Retry::Idempotent
        );
        assert_eq!(
            Call::new("x", None, Method::DELETE, "u".into()).retry,
            Retry::Idempotent
        );
        assert_eq!(
            Call::new("x", None, Method::POST, "u".into()).retry,
            Retry::Never
        );
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(enc("a/b c"), "a%2Fb%20c");
    }

    #[test]
    fn routes_name_no_host_query_or_id() {
        assert_eq!(
            route_template(
                "http://127.0.0.1:4000/api/sandbox/1b2c-aa/last-activity?labels=x",
                Some("1b2c-aa")
            ),
            "/api/sandbox/{}/last-activity"
        );
        assert_eq!(
            route_template(
                "https://proxy.example/toolbox/sb/process/session/rfs-ab12/command/9f0e/logs",
                Some("sb")
            ),
            "/toolbox/{}/process/session/{}/command/{}/logs"
        );
        assert_eq!(route_template("http://h/api/sandbox", None), "/api/sandbox");
    }

    #[test]
    fn backoff_honours_retry_after_and_jitters_within_the_exponential_step() {
        assert_eq!(
            backoff(1, Some(Duration::from_secs(3)), 0.5),
            Duration::from_secs(3)
        );
        assert_eq!(
            backoff(1, Some(Duration::from_secs(9999)), 0.5),
            RETRY_AFTER_CAP
        );
        assert_eq!(backoff(1, None, 0.0), Duration::ZERO);
        assert!(backoff(1, None, 0.999) <= BACKOFF_BASE);
        assert!(backoff(3, None, 0.999) <= BACKOFF_BASE * 4);
        assert!(backoff(3, None, 0.999) > BACKOFF_BASE * 2);
        assert!(backoff(30, None, 0.999) <= BACKOFF_CAP);
        let u = unit();
        assert!((0.0..1.0).contains(&u));
    }
}
