//! The one list of providers rfs ships: each provider's name, how it is
//! built from the run's settings, how `rfs doctor` checks it, and which
//! of rfs's settings are its own. Selection (`select`), the doctor and the
//! settings read it instead of matching provider names as strings; a new
//! provider is one more [`ProviderKind`] and its row here.

use std::path::Path;
use std::sync::Arc;

use super::{Provider, ProviderError, ProviderResult};

/// A provider rfs ships.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    /// A directory on this machine, in namespaces where it can.
    Local,
    /// A container of the Docker engine.
    Docker,
    /// A Daytona sandbox (REST and toolbox API).
    Daytona,
}

/// Every provider, in the order `rfs doctor` and completion list them.
pub const ALL: &[ProviderKind] = &[
    ProviderKind::Local,
    ProviderKind::Docker,
    ProviderKind::Daytona,
];

/// What a provider is built from (the run's settings, read once).
#[derive(Debug, Clone, Default)]
pub struct BuildInputs<'a> {
    /// Where `local` keeps its sandboxes.
    pub state_dir: Option<&'a Path>,
    /// `--image` / `RFS_DOCKER_IMAGE` (docker's default image).
    pub image: Option<String>,
    /// `--snapshot` (daytona's default snapshot).
    pub snapshot: Option<String>,
}

impl ProviderKind {
    /// The name `--provider` and `RELAYFLOWS_SANDBOX_PROVIDER` use.
    pub fn name(self) -> &'static str {
        match self {
            ProviderKind::Local => "local",
            ProviderKind::Docker => "docker",
            ProviderKind::Daytona => "daytona",
        }
    }

    /// The provider named `name`, if rfs ships one.
    pub fn parse(name: &str) -> Option<ProviderKind> {
        ALL.iter().copied().find(|k| k.name() == name)
    }

    /// Whether `RFS_LOCAL_ISOLATION` is this provider's setting (only
    /// `local`'s: elsewhere it must not change a run).
    pub fn reads_local_isolation_env(self) -> bool {
        self == ProviderKind::Local
    }

    /// Build the provider (not traced: see [`super::select::build`]).
    pub fn build(self, inputs: BuildInputs<'_>) -> ProviderResult<Arc<dyn Provider>> {
        Ok(match self {
            ProviderKind::Local => {
                let dir = inputs
                    .state_dir
                    .ok_or_else(|| ProviderError::Config("local needs a state directory".into()))?;
                Arc::new(super::local::LocalProvider::new(dir))
            }
            ProviderKind::Docker => Arc::new(super::docker::connect_default(inputs.image)?),
            ProviderKind::Daytona => Arc::new(
                super::daytona::DaytonaProvider::from_env(inputs.snapshot)
                    .map_err(|e| ProviderError::Config(e.to_string()))?,
            ),
        })
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_found_by_its_own_name_and_nothing_else() {
        for k in ALL {
            assert_eq!(ProviderKind::parse(k.name()), Some(*k));
        }
        assert_eq!(ProviderKind::parse("Local"), None);
        assert_eq!(ProviderKind::parse(""), None);
    }
}
