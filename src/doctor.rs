//! `rfs doctor`: one line per provider saying whether a run could use it
//! now, and why not. The provider a run would use now (flag, else
//! `RELAYFLOWS_SANDBOX_PROVIDER`, else `local`) decides the exit code.

use std::path::Path;

use rfs_sandbox::provider::registry::{self, ProviderKind};

/// One provider's health.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Health {
    pub provider: String,
    pub usable: bool,
    /// What was checked and found, for humans.
    pub detail: String,
}

/// Check every known provider.
pub(crate) fn check_all(
    rt: &tokio::runtime::Runtime,
    state_dir: &Path,
    image: Option<String>,
) -> Vec<Health> {
    registry::ALL
        .iter()
        .map(|kind| match kind {
            ProviderKind::Local => local(state_dir),
            ProviderKind::Docker => rt.block_on(docker(image.clone())),
            ProviderKind::Daytona => rt.block_on(daytona()),
        })
        .collect()
}

/// local: the state directory exists or can be created, and is writable;
/// the isolation a run would get (`RFS_LOCAL_ISOLATION`), or why that mode
/// would refuse to run.
pub(crate) fn local(state_dir: &Path) -> Health {
    let probe = || -> std::io::Result<()> {
        std::fs::create_dir_all(state_dir)?;
        let f = tempfile::Builder::new()
            .prefix(".rfs-doctor-")
            .tempfile_in(state_dir)?;
        drop(f);
        Ok(())
    };
    let (usable, detail) = match probe() {
        Ok(()) => (
            true,
            format!("state directory {} is usable", state_dir.display()),
        ),
        Err(e) => (
            false,
            format!(
                "state directory {} is not usable: {e} (set RFS_STATE_DIR)",
                state_dir.display()
            ),
        ),
    };
    let (usable, detail) = match rfs_sandbox::provider::local::doctor_line(None) {
        Ok(iso) => (usable, format!("{detail}; {iso}")),
        Err(why) => (false, format!("{detail}; {why}")),
    };
    // gVisor, tried for real (a throwaway sandbox running a command):
    // whether `--isolation gvisor` would work here, and why not.
    let (usable, detail) = match rfs_sandbox::provider::local::gvisor::doctor_probe() {
        Ok(works) => (usable, format!("{detail}; {works}")),
        Err(why) => {
            let wanted = std::env::var(rfs_sandbox::provider::isolation::ISOLATION_ENV)
                .is_ok_and(|m| m.trim() == "gvisor");
            (
                usable && !wanted,
                format!("{detail}; gVisor does not work here: {why}"),
            )
        }
    };
    Health {
        provider: ProviderKind::Local.name().into(),
        usable,
        detail,
    }
}

/// docker: the engine answers; its API version; the default image is
/// present locally.
async fn docker(image: Option<String>) -> Health {
    let fail = |detail: String| Health {
        provider: ProviderKind::Docker.name().into(),
        usable: false,
        detail,
    };
    let docker = match bollard::Docker::connect_with_local_defaults() {
        Ok(d) => d,
        Err(e) => return fail(format!("cannot connect to the Docker engine: {e}")),
    };
    let version =
        match tokio::time::timeout(std::time::Duration::from_secs(5), docker.version()).await {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return fail(format!("Docker engine not reachable: {e}")),
            Err(_) => return fail("Docker engine did not answer within 5 s".into()),
        };
    let api = version.api_version.unwrap_or_else(|| "?".into());
    let engine = version.version.unwrap_or_else(|| "?".into());
    let image_line = match &image {
        None => {
            "no default image (set RFS_DOCKER_IMAGE or --image, or sandbox(#{ image }))".to_string()
        }
        Some(i) => match docker.inspect_image(i).await {
            Ok(_) => format!("image {i} present"),
            Err(e) => {
                return fail(format!(
                    "engine {engine} (API {api}) reachable, but image {i} is not present: {e}"
                ))
            }
        },
    };
    Health {
        provider: ProviderKind::Docker.name().into(),
        usable: true,
        detail: format!("engine {engine} (API {api}) reachable; {image_line}"),
    }
}

/// daytona: key and URL configured, and the API answers.
async fn daytona() -> Health {
    let fail = |detail: String| Health {
        provider: ProviderKind::Daytona.name().into(),
        usable: false,
        detail,
    };
    let config = match rfs_sandbox::provider::daytona::config::Config::from_env(None) {
        Ok(c) => c,
        Err(e) => return fail(e.to_string()),
    };
    let url = config.api_url.clone();
    let provider = match rfs_sandbox::provider::daytona::DaytonaProvider::new(config) {
        Ok(p) => p,
        Err(e) => return fail(e.to_string()),
    };
    use rfs_sandbox::provider::Provider;
    match tokio::time::timeout(std::time::Duration::from_secs(15), provider.preflight()).await {
        Ok(Ok(())) => Health {
            provider: ProviderKind::Daytona.name().into(),
            usable: true,
            detail: format!("credentials set; API at {url} answering"),
        },
        Ok(Err(e)) => fail(format!("credentials set; API at {url} not usable: {e}")),
        Err(_) => fail(format!(
            "credentials set; API at {url} did not answer within 15 s"
        )),
    }
}
