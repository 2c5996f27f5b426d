//! Choosing the provider: `--provider` beats `RELAYFLOWS_SANDBOX_PROVIDER`,
//! which beats the embedded default (`local`). An empty or whitespace-only
//! value counts as unset. The reason is kept: it is journaled as placement.

use std::fmt;

/// The env var naming the provider.
pub const PROVIDER_ENV: &str = "RELAYFLOWS_SANDBOX_PROVIDER";
/// The provider used when nothing else says.
pub const DEFAULT_PROVIDER: &str = "local";
/// Provider names rfs knows (the registry's).
pub fn known() -> Vec<&'static str> {
    super::registry::ALL.iter().map(|k| k.name()).collect()
}

/// Why this provider was chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChoiceReason {
    Flag,
    Env,
    /// The repository's `rfs.toml`.
    File,
    Default,
}

impl fmt::Display for ChoiceReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ChoiceReason::Flag => "--provider flag",
            ChoiceReason::Env => "RELAYFLOWS_SANDBOX_PROVIDER environment variable",
            ChoiceReason::File => "rfs.toml",
            ChoiceReason::Default => "default",
        })
    }
}

/// The chosen provider's name and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderChoice {
    pub name: String,
    pub reason: ChoiceReason,
}

impl ProviderChoice {
    /// The registry's provider of that name (`None`: not one rfs ships).
    pub fn kind(&self) -> Option<super::registry::ProviderKind> {
        super::registry::ProviderKind::parse(&self.name)
    }
}

/// A provider name rfs does not know, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown provider `{name}` (from {reason}); known providers: {}", known().join(", "))]
pub struct UnknownProvider {
    pub name: String,
    pub reason: ChoiceReason,
}

/// Pick the provider from the flag and the environment value.
pub fn choose(flag: Option<&str>, env: Option<&str>) -> Result<ProviderChoice, UnknownProvider> {
    choose_with_file(flag, env, None)
}

/// [`choose`] with the repository's `rfs.toml` after the environment.
pub fn choose_with_file(
    flag: Option<&str>,
    env: Option<&str>,
    file: Option<&str>,
) -> Result<ProviderChoice, UnknownProvider> {
    let clean = |v: Option<&str>| {
        v.map(str::trim)
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
    };
    let (name, reason) = if let Some(f) = clean(flag) {
        (f, ChoiceReason::Flag)
    } else if let Some(e) = clean(env) {
        (e, ChoiceReason::Env)
    } else if let Some(f) = clean(file) {
        (f, ChoiceReason::File)
    } else {
        (DEFAULT_PROVIDER.to_owned(), ChoiceReason::Default)
    };
    if super::registry::ProviderKind::parse(&name).is_none() {
        return Err(UnknownProvider { name, reason });
    }
    Ok(ProviderChoice { name, reason })
}

/// Construct the chosen provider. `state_dir` holds local sandboxes.
pub fn build(
    choice: &ProviderChoice,
    state_dir: &std::path::Path,
    image: Option<String>,
) -> super::ProviderResult<std::sync::Arc<dyn super::Provider>> {
    build_with_snapshot(choice, state_dir, image, None)
}

/// [`build`] with the `--snapshot` flag (daytona's default snapshot; it
/// beats `RELAYFLOWS_SANDBOX_SNAPSHOT`).
pub fn build_with_snapshot(
    choice: &ProviderChoice,
    state_dir: &std::path::Path,
    image: Option<String>,
    snapshot: Option<String>,
) -> super::ProviderResult<std::sync::Arc<dyn super::Provider>> {
    let kind = choice.kind().ok_or_else(|| {
        super::ProviderError::Config(
            UnknownProvider {
                name: choice.name.clone(),
                reason: choice.reason,
            }
            .to_string(),
        )
    })?;
    let built = kind.build(super::registry::BuildInputs {
        state_dir: Some(state_dir),
        image,
        snapshot,
    });
    built.map(super::traced::traced)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_env_beats_default() {
        assert_eq!(
            choose(Some("docker"), Some("local")).unwrap().reason,
            ChoiceReason::Flag
        );
        let c = choose(None, Some("docker")).unwrap();
        assert_eq!((c.name.as_str(), c.reason), ("docker", ChoiceReason::Env));
        assert_eq!(
            choose(None, Some("  ")).unwrap().reason,
            ChoiceReason::Default
        );
        let e = choose(Some("nope"), None).unwrap_err();
        assert_eq!(
            e,
            UnknownProvider {
                name: "nope".into(),
                reason: ChoiceReason::Flag
            }
        );
        assert!(e.to_string().contains("unknown provider `nope`"));
    }
}
