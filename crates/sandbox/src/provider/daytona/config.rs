//! Configuration like the official SDKs: `DAYTONA_API_KEY` (or a JWT with
//! `DAYTONA_ORGANIZATION_ID`), `DAYTONA_API_URL`, `DAYTONA_TARGET`, and the
//! default snapshot. The credential is never printed: [`Secret`]'s `Debug`
//! and `Display` say `[REDACTED]`, and [`Config::redact`] scrubs it from any
//! text before that text leaves the provider.

use std::fmt;

/// The public API, used when `DAYTONA_API_URL` is not set.
pub const DEFAULT_API_URL: &str = "https://app.daytona.io/api";
pub const API_KEY_ENV: &str = "DAYTONA_API_KEY";
pub const API_URL_ENV: &str = "DAYTONA_API_URL";
pub const TARGET_ENV: &str = "DAYTONA_TARGET";
pub const JWT_ENV: &str = "DAYTONA_JWT_TOKEN";
pub const ORG_ENV: &str = "DAYTONA_ORGANIZATION_ID";
/// The snapshot used when the script names none (`--snapshot` beats it).
pub const SNAPSHOT_ENV: &str = "RELAYFLOWS_SANDBOX_SNAPSHOT";
/// Minutes of inactivity before Daytona stops an abandoned sandbox (the
/// dead-man switch; default [`AUTO_STOP_MINUTES`], at least 1).
pub const AUTO_STOP_ENV: &str = "RFS_DAYTONA_AUTO_STOP_MINUTES";
/// How often (milliseconds) rfs tells Daytona a live run's sandbox is in
/// use; default: a quarter of the auto-stop interval. For tests against a
/// server whose "minute" is shorter.
pub const KEEP_ALIVE_ENV: &str = "RFS_DAYTONA_KEEP_ALIVE_MS";
/// `off`: run every step in a session of its own instead of the sandbox's
/// step agent (for a toolbox whose command input does not work).
pub const STEP_AGENT_ENV: &str = "RFS_DAYTONA_STEP_AGENT";
/// Default of [`Config::auto_stop_minutes`].
pub const AUTO_STOP_MINUTES: u32 = 15;
/// Default per-request timeout.
pub const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);
/// Default bound on the wait for state `started` after create.
pub const START_WAIT: std::time::Duration = std::time::Duration::from_secs(180);

/// The keep-alive period for an auto-stop interval: a quarter of it, so
/// three beats may be lost before Daytona stops a live sandbox.
pub fn keep_alive_for(auto_stop_minutes: u32) -> std::time::Duration {
    std::time::Duration::from_secs(60) * auto_stop_minutes.max(1) / 4
}

/// A credential. Its only way out is [`Secret::expose`], used to build the
/// `Authorization` header.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(s: impl Into<String>) -> Self {
        Secret(s.into())
    }
    pub(super) fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(crate::secrets::REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(crate::secrets::REDACTED)
    }
}

/// How rfs authenticates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Credential {
    /// An organization-scoped API key.
    ApiKey(Secret),
    /// A JWT, which needs the organization named in a header.
    Jwt { token: Secret, organization: String },
}

impl Credential {
    fn secret(&self) -> &Secret {
        match self {
            Credential::ApiKey(s) | Credential::Jwt { token: s, .. } => s,
        }
    }
}

/// Everything the Daytona provider is configured with.
#[derive(Debug, Clone)]
pub struct Config {
    pub credential: Credential,
    /// API base, e.g. `https://app.daytona.io/api` (no trailing slash).
    pub api_url: String,
    /// Region (`DAYTONA_TARGET`); the organization's default when `None`.
    pub target: Option<String>,
    /// Snapshot used when the script names none; the server's default when
    /// `None`.
    pub default_snapshot: Option<String>,
    /// Timeout of the create call (the API itself waits up to 30 s for
    /// `started`); after it, rfs looks the sandbox up instead of resending.
    pub create_timeout: std::time::Duration,
    /// `autoStopInterval` of the sandboxes rfs creates (minutes idle
    /// before Daytona stops one; it is deleted at stop).
    pub auto_stop_minutes: u32,
    /// How often a live run's sandbox is kept alive
    /// (`POST /sandbox/{id}/last-activity`).
    pub keep_alive_every: std::time::Duration,
    /// Timeout of one request (calls that wait longer set their own).
    pub request_timeout: std::time::Duration,
    /// Bound on the wait for state `started` after create.
    pub start_wait: std::time::Duration,
}

impl Config {
    /// A configuration with every default for `credential` at `api_url`.
    pub fn new(credential: Credential, api_url: impl Into<String>) -> Config {
        Config {
            credential,
            api_url: api_url.into(),
            target: None,
            default_snapshot: None,
            create_timeout: CREATE_TIMEOUT,
            auto_stop_minutes: AUTO_STOP_MINUTES,
            keep_alive_every: keep_alive_for(AUTO_STOP_MINUTES),
            request_timeout: REQUEST_TIMEOUT,
            start_wait: START_WAIT,
        }
    }
}

/// Default of [`Config::create_timeout`].
/// Why the provider cannot be configured (nothing was sent yet).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{API_KEY_ENV} is not set: the daytona provider needs an API key (or {JWT_ENV} with {ORG_ENV})")]
    MissingCredential,
    #[error("{JWT_ENV} is set but {ORG_ENV} is not: a JWT needs the organization id (or set {API_KEY_ENV} instead)")]
    JwtWithoutOrganization,
    #[error("{API_URL_ENV} `{0}` is not an http(s) URL")]
    NotHttpUrl(String),
    #[error("the Daytona credential contains characters not allowed in a header")]
    CredentialNotAHeader,
    #[error("{ORG_ENV} is not a valid header value")]
    OrganizationNotAHeader,
    #[error("{0} `{1}` is not a positive whole number")]
    NotANumber(&'static str, String),
    #[error("cannot build the HTTP client: {0}")]
    HttpClient(String),
}

pub const CREATE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(75);

impl Config {
    /// Read the configuration from the environment; `snapshot_flag`
    /// (`--snapshot`) beats `RELAYFLOWS_SANDBOX_SNAPSHOT`.
    pub fn from_env(snapshot_flag: Option<String>) -> Result<Config, ConfigError> {
        Self::from_lookup(|k| std::env::var(k).ok(), snapshot_flag)
    }

    /// [`Config::from_env`] over any lookup (for tests).
    pub fn from_lookup(
        get: impl Fn(&str) -> Option<String>,
        snapshot_flag: Option<String>,
    ) -> Result<Config, ConfigError> {
        let get = |k: &str| {
            get(k)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let credential = match (get(API_KEY_ENV), get(JWT_ENV), get(ORG_ENV)) {
            (Some(key), _, _) => Credential::ApiKey(Secret::new(key)),
            (None, Some(jwt), Some(org)) => Credential::Jwt {
                token: Secret::new(jwt),
                organization: org,
            },
            (None, Some(_), None) => return Err(ConfigError::JwtWithoutOrganization),
            (None, None, _) => return Err(ConfigError::MissingCredential),
        };
        let api_url = get(API_URL_ENV)
            .unwrap_or_else(|| DEFAULT_API_URL.to_owned())
            .trim_end_matches('/')
            .to_owned();
        match reqwest::Url::parse(&api_url) {
            Ok(u) if matches!(u.scheme(), "http" | "https") => {}
            _ => return Err(ConfigError::NotHttpUrl(api_url)),
        }
        let default_snapshot = snapshot_flag
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .or_else(|| get(SNAPSHOT_ENV));
        let number = |k: &'static str| -> Result<Option<u64>, ConfigError> {
            match get(k) {
                None => Ok(None),
                Some(v) => match v.parse::<u64>() {
                    Ok(n) if n > 0 => Ok(Some(n)),
                    _ => Err(ConfigError::NotANumber(k, v)),
                },
            }
        };
        let auto_stop_minutes = number(AUTO_STOP_ENV)?
            .map(|n| n.min(u32::MAX as u64) as u32)
            .unwrap_or(AUTO_STOP_MINUTES);
        let keep_alive_every = number(KEEP_ALIVE_ENV)?
            .map(std::time::Duration::from_millis)
            .unwrap_or_else(|| keep_alive_for(auto_stop_minutes));
        Ok(Config {
            target: get(TARGET_ENV),
            default_snapshot,
            auto_stop_minutes,
            keep_alive_every,
            ..Config::new(credential, api_url)
        })
    }

    /// The `Authorization` header value.
    pub(super) fn bearer(&self) -> String {
        format!("Bearer {}", self.credential.secret().expose())
    }

    /// The organization header, needed with a JWT only.
    pub(super) fn organization(&self) -> Option<&str> {
        match &self.credential {
            Credential::Jwt { organization, .. } => Some(organization),
            Credential::ApiKey(_) => None,
        }
    }

    /// `text` with every occurrence of the credential replaced.
    pub fn redact(&self, text: &str) -> String {
        let s = self.credential.secret().expose();
        if s.is_empty() {
            text.to_owned()
        } else {
            text.replace(s, crate::secrets::REDACTED)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn missing_key_is_refused_naming_the_variable() {
        let e = Config::from_lookup(env(&[]), None).unwrap_err().to_string();
        assert!(e.contains("DAYTONA_API_KEY is not set"), "{e}");
        let e = Config::from_lookup(env(&[(JWT_ENV, "jwt-abc")]), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("DAYTONA_ORGANIZATION_ID"), "{e}");
        assert!(!e.contains("jwt-abc"));
    }

    #[test]
    fn defaults_and_precedence() {
        let c = Config::from_lookup(
            env(&[(API_KEY_ENV, "dtn_secret123"), (SNAPSHOT_ENV, "from-env")]),
            Some("from-flag".into()),
        )
        .unwrap();
        assert_eq!(c.api_url, DEFAULT_API_URL);
        assert_eq!(c.default_snapshot.as_deref(), Some("from-flag"));
        let c = Config::from_lookup(
            env(&[
                (API_KEY_ENV, "dtn_secret123"),
                (SNAPSHOT_ENV, "from-env"),
                (API_URL_ENV, "http://127.0.0.1:9/api/"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(c.default_snapshot.as_deref(), Some("from-env"));
        assert_eq!(c.api_url, "http://127.0.0.1:9/api");
        let jwt = Config::from_lookup(env(&[(JWT_ENV, "j.w.t"), (ORG_ENV, "org1")]), None).unwrap();
        assert_eq!(jwt.organization(), Some("org1"));
        assert_eq!(jwt.bearer(), "Bearer j.w.t");
    }

    #[test]
    fn keep_alive_derives_from_auto_stop_unless_set() {
        let c = Config::from_lookup(env(&[(API_KEY_ENV, "k1234")]), None).unwrap();
        assert_eq!(c.auto_stop_minutes, 15);
        assert_eq!(c.keep_alive_every, std::time::Duration::from_secs(225));
        let c = Config::from_lookup(env(&[(API_KEY_ENV, "k1234"), (AUTO_STOP_ENV, "2")]), None)
            .unwrap();
        assert_eq!(c.auto_stop_minutes, 2);
        assert_eq!(c.keep_alive_every, std::time::Duration::from_secs(30));
        let c = Config::from_lookup(
            env(&[
                (API_KEY_ENV, "k1234"),
                (AUTO_STOP_ENV, "2"),
                (KEEP_ALIVE_ENV, "250"),
            ]),
            None,
        )
        .unwrap();
        assert_eq!(c.keep_alive_every, std::time::Duration::from_millis(250));
        for bad in ["0", "-1", "soon"] {
            let e = Config::from_lookup(env(&[(API_KEY_ENV, "k1234"), (AUTO_STOP_ENV, bad)]), None)
                .unwrap_err();
            assert_eq!(e, ConfigError::NotANumber(AUTO_STOP_ENV, bad.into()));
        }
    }

    #[test]
    fn bad_url_is_refused() {
        let e = Config::from_lookup(
            env(&[(API_KEY_ENV, "k1234"), (API_URL_ENV, "ftp://x")]),
            None,
        )
        .unwrap_err();
        assert_eq!(e, ConfigError::NotHttpUrl("ftp://x".into()));
        assert!(e.to_string().contains("not an http(s) URL"));
    }

    #[test]
    fn the_key_never_shows_in_debug_or_redacted_text() {
        let c = Config::from_lookup(env(&[(API_KEY_ENV, "dtn_supersecretvalue")]), None).unwrap();
        let dbg = format!("{c:?} {:?} {}", c.credential, c.credential.secret());
        assert!(!dbg.contains("dtn_supersecretvalue"), "{dbg}");
        assert!(dbg.contains("[REDACTED]"));
        assert_eq!(
            c.redact("echo: Bearer dtn_supersecretvalue!"),
            "echo: Bearer [REDACTED]!"
        );
    }
}
