//! Docker provider (bollard). Implemented in its own change.

/// Placeholder until the Docker provider lands.
pub struct DockerProvider;

pub fn connect_default(_image: Option<String>) -> Result<super::local::LocalProvider, String> {
    Err("the docker provider is not available in this build yet".into())
}
