//! Isolation options every provider is asked about: `sandbox(#{ isolation,
//! network })`, `--isolation`, `RFS_LOCAL_ISOLATION`. A provider says what
//! it will have in force and why, or refuses an option it cannot honour
//! (never ignores it).

use std::fmt;

use serde::{Deserialize, Serialize};

/// The env var giving the `local` provider's default isolation mode.
pub const ISOLATION_ENV: &str = "RFS_LOCAL_ISOLATION";

/// Requested isolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationMode {
    /// Namespaces where the kernel permits them, else none (local).
    #[default]
    Auto,
    /// Namespaces, or refuse before anything runs.
    Namespaces,
    /// No isolation: commands run on the host (local's old behaviour).
    None,
}

impl IsolationMode {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s.trim() {
            "auto" => Ok(IsolationMode::Auto),
            "namespaces" => Ok(IsolationMode::Namespaces),
            "none" => Ok(IsolationMode::None),
            other => Err(format!(
                "unknown isolation mode `{other}` (known: auto, namespaces, none)"
            )),
        }
    }
}

impl fmt::Display for IsolationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IsolationMode::Auto => "auto",
            IsolationMode::Namespaces => "namespaces",
            IsolationMode::None => "none",
        })
    }
}

/// What the run asks a provider for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationRequest {
    pub mode: IsolationMode,
    /// Where the mode came from (`default`, `--isolation flag`, ...).
    pub source: String,
    /// `false`: the sandbox must have no network (only its own loopback).
    pub network: bool,
}

impl Default for IsolationRequest {
    fn default() -> Self {
        IsolationRequest {
            mode: IsolationMode::Auto,
            source: "default".into(),
            network: true,
        }
    }
}

impl IsolationRequest {
    /// The mode from `--isolation`, else `RFS_LOCAL_ISOLATION` (empty =
    /// unset), else `auto`.
    pub fn from_settings(flag: Option<&str>, env: Option<&str>) -> Result<Self, String> {
        fn clean(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        let (mode, source) = if let Some(f) = clean(flag) {
            (
                IsolationMode::parse(f).map_err(|e| format!("--isolation: {e}"))?,
                "--isolation flag",
            )
        } else if let Some(e) = clean(env) {
            (
                IsolationMode::parse(e).map_err(|m| format!("{ISOLATION_ENV}: {m}"))?,
                "RFS_LOCAL_ISOLATION environment variable",
            )
        } else {
            (IsolationMode::Auto, "default")
        };
        Ok(IsolationRequest {
            mode,
            source: source.into(),
            network: true,
        })
    }
}

/// What a provider will have in force, and why (journaled with the
/// placement, shown in EVIDENCE.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationInForce {
    /// `namespaces`, `none`, `container`, ...
    pub mode: String,
    pub reason: String,
    pub network: bool,
}

impl IsolationInForce {
    /// One line for EVIDENCE.md and messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}); network {}",
            self.mode,
            self.reason,
            if self.network {
                "on"
            } else {
                "off (own loopback only)"
            }
        )
    }

    /// The journal's record of it (in `placement.intent` and `placement`).
    pub fn fact(&self, req: &IsolationRequest) -> IsolationFact {
        IsolationFact {
            mode: self.mode.clone(),
            requested: req.mode.to_string(),
            requested_by: req.source.clone(),
            reason: self.reason.clone(),
            network: self.network,
        }
    }
}

/// The isolation in force, as journaled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IsolationFact {
    /// `namespaces`, `none`, `container`, `provider`.
    pub mode: String,
    /// The mode asked for (`auto`, `namespaces`, `none`).
    pub requested: String,
    /// Who asked (`default`, `--isolation flag`, ...).
    pub requested_by: String,
    pub reason: String,
    /// `false`: only the sandbox's own loopback.
    pub network: bool,
}

impl IsolationFact {
    /// One line for EVIDENCE.md and messages.
    pub fn describe(&self) -> String {
        IsolationInForce {
            mode: self.mode.clone(),
            reason: self.reason.clone(),
            network: self.network,
        }
        .describe()
    }
}

/// The answer of a provider that has no isolation options: the defaults
/// are fine, anything else is refused.
pub fn only_defaults(provider: &str, req: &IsolationRequest) -> Result<IsolationInForce, String> {
    if !req.network {
        return Err(format!(
            "provider `{provider}` cannot honour `network: false` (it cannot cut its sandboxes off the network)"
        ));
    }
    if req.mode != IsolationMode::Auto {
        return Err(format!(
            "provider `{provider}` cannot honour isolation `{}` (requested by {})",
            req.mode, req.source
        ));
    }
    Ok(IsolationInForce {
        mode: "provider".into(),
        reason: format!("whatever provider `{provider}` gives its sandboxes"),
        network: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_env_beats_default() {
        let r = IsolationRequest::from_settings(Some("none"), Some("namespaces")).unwrap();
        assert_eq!(r.mode, IsolationMode::None);
        let r = IsolationRequest::from_settings(None, Some("namespaces")).unwrap();
        assert_eq!(r.mode, IsolationMode::Namespaces);
        assert!(r.source.contains("RFS_LOCAL_ISOLATION"));
        let r = IsolationRequest::from_settings(None, Some(" ")).unwrap();
        assert_eq!(
            (r.mode, r.source.as_str()),
            (IsolationMode::Auto, "default")
        );
        assert!(IsolationRequest::from_settings(Some("vm"), None)
            .unwrap_err()
            .contains("unknown isolation mode `vm`"));
    }

    #[test]
    fn providers_without_options_refuse_them() {
        let mut r = IsolationRequest::default();
        assert!(only_defaults("x", &r).is_ok());
        r.network = false;
        assert!(only_defaults("x", &r)
            .unwrap_err()
            .contains("network: false"));
    }
}
