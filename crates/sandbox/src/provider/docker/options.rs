//! How the Docker provider builds its sandboxes: the default image, the
//! user and the home.

pub const IMAGE_ENV: &str = "RFS_DOCKER_IMAGE";
/// Default home directory of the sandbox user.
pub const DEFAULT_HOME: &str = "/home/rfs";

/// How the Docker provider builds its sandboxes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DockerOptions {
    /// Image used when the [`CreateSpec`] names none. Never pulled: it must
    /// exist locally.
    pub image: Option<String>,
    /// User (`name`, `uid` or `uid:gid`) the container and every command run
    /// as; `None` keeps the image's default user.
    pub user: Option<String>,
    /// Home directory created (owned by `user`) in every sandbox.
    pub home: String,
}

impl DockerOptions {
    /// Options with the image taken from `RFS_DOCKER_IMAGE` (if set and not
    /// empty), no user override and the default home.
    pub fn from_env() -> Self {
        DockerOptions {
            image: image_from_env(),
            user: None,
            home: DEFAULT_HOME.to_string(),
        }
    }
}

impl Default for DockerOptions {
    /// Same as [`DockerOptions::from_env`].
    fn default() -> Self {
        Self::from_env()
    }
}

/// `RFS_DOCKER_IMAGE`, unless unset, empty or only whitespace.
pub fn image_from_env() -> Option<String> {
    std::env::var(IMAGE_ENV)
        .ok()
        .filter(|v| !v.trim().is_empty())
}
