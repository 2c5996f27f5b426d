//! An image a repository chose does not hand its baked credentials to the
//! steps (#44). `image = "…"` in `rfs.toml` or `sandbox(#{ image })` is
//! the repository's choice, not the person's: a locally built image may
//! bake a `DEPLOY_TOKEN` into its `Env`, and the repository's steps could
//! send it anywhere the network allows. Each baked variable whose name
//! looks secret (the redaction rule, [`rfs_evidence::secrets::is_secret_name`])
//! is emptied in the sandbox, named (never its value) in a placement
//! warning; the person keeps them by naming the image themselves
//! (`--image`, `RFS_DOCKER_IMAGE`).

use std::collections::BTreeMap;

use super::placement::SandboxOptions;
use super::Run;
use rfs_evidence::error::Result;
use rfs_evidence::events::Event;
use rfs_sandbox::provider::Base;

impl Run {
    /// Who chose the image of a sandbox with `opts`, when it is not the
    /// person running rfs (`None`: the person, or no image).
    fn image_chosen_by(&self, opts: &SandboxOptions) -> Option<&'static str> {
        match (&opts.image, &self.cfg.image) {
            (Some(i), Some(person)) if i == person && !self.cfg.image_by_repository => None,
            (Some(_), _) => Some("the script's sandbox() option"),
            (None, Some(_)) if self.cfg.image_by_repository => Some("rfs.toml"),
            _ => None,
        }
    }

    /// The variables to empty in a sandbox starting from `base` (each
    /// mapped to the empty value), journaling which and why.
    pub(super) fn withheld_image_env(
        &self,
        opts: &SandboxOptions,
        base: Option<&Base>,
    ) -> Result<BTreeMap<String, String>> {
        match self.image_chosen_by(opts) {
            Some(by) => self.withheld_env_of(base, by),
            None => Ok(BTreeMap::new()),
        }
    }

    /// [`Run::withheld_image_env`] for a `service()`'s image `image`
    /// (always the script's choice, unless the person named it too).
    pub(super) fn withheld_service_env(&self, image: &str) -> Result<BTreeMap<String, String>> {
        if self.cfg.image.as_deref() == Some(image) && !self.cfg.image_by_repository {
            return Ok(BTreeMap::new());
        }
        let base = Base::Image(image.to_owned());
        self.withheld_env_of(Some(&base), "the script's service() call")
    }

    fn withheld_env_of(&self, base: Option<&Base>, by: &str) -> Result<BTreeMap<String, String>> {
        let p = self.cfg.provider.clone();
        let names = self.block_on(p.baked_env_names(base)).map_err(|e| {
            self.refuse(format!(
                "provider `{}` cannot say what the image chosen by {by} bakes into its environment: {e}",
                p.name()
            ))
        })?;
        let withheld: BTreeMap<String, String> = names
            .into_iter()
            .filter(|n| rfs_evidence::secrets::is_secret_name(n))
            .map(|n| (n, String::new()))
            .collect();
        if !withheld.is_empty() {
            let image = base.and_then(|b| b.image()).unwrap_or("?");
            let image = self.state().redactor.redact_str(image);
            let names: Vec<&str> = withheld.keys().map(String::as_str).collect();
            self.record(Event::PlacementWarning {
                message: format!(
                    "image `{image}` was chosen by {by}, not by you: the value it bakes into {} is withheld (emptied in the sandbox), since a repository's choice of image does not hand the image's credentials to its steps; name the image yourself (--image {image} or RFS_DOCKER_IMAGE) to keep them",
                    names.join(", ")
                ),
            })?;
        }
        Ok(withheld)
    }
}
