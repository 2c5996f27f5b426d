//! `rfs doctor`: one line per provider.

use crate::settings;
use rfs_evidence::error::Error;
use rfs_evidence::exit_code;
use rfs_sandbox::provider::select;

#[derive(Debug, clap::Args)]
pub(crate) struct DoctorCommand {
    /// The provider to judge the exit code by (default: what a run would use now).
    #[arg(long)]
    provider: Option<String>,
    /// Docker image to look for (default: RFS_DOCKER_IMAGE).
    #[arg(long)]
    image: Option<String>,
}

impl DoctorCommand {
    pub(crate) fn exec(self) -> Result<i32, Error> {
        doctor(self.provider, self.image)
    }
}

/// `rfs doctor`.
fn doctor(provider: Option<String>, image: Option<String>) -> Result<i32, Error> {
    let file = match std::env::current_dir() {
        Ok(d) => {
            crate::repo_config::for_dir(&d).map_err(|e| Error::Usage(format!("refused: {e}")))?
        }
        Err(_) => Default::default(),
    };
    let current = select::choose_with_file(
        provider.as_deref(),
        std::env::var(select::PROVIDER_ENV).ok().as_deref(),
        file.provider.as_deref(),
    )
    .map_err(|e| Error::Usage(e.to_string()))?;
    let image = image
        .filter(|s| !s.trim().is_empty())
        .or_else(rfs_sandbox::provider::docker::image_from_env)
        .or(file.image);
    let rt = tokio::runtime::Runtime::new().map_err(Error::internal)?;
    let all = crate::doctor::check_all(&rt, &settings::state_dir(), image);
    let mut code = exit_code::SUCCESS;
    for h in &all {
        let now = h.provider == current.name;
        outln!(
            "{:<8} {}  {}{}",
            h.provider,
            if h.usable { "ok  " } else { "FAIL" },
            h.detail,
            if now {
                format!("  [what a run would use now: {}]", current.reason)
            } else {
                String::new()
            }
        );
        if now && !h.usable {
            code = exit_code::REFUSED;
        }
    }
    Ok(code)
}
