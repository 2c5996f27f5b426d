//! Setup once, fork per proof on `docker` (#36): a checkpoint is an image
//! committed from the sandbox's container (`POST /commit`), labelled as
//! rfs's (so `rfs gc` finds one a crashed rfs left); a fork is a
//! container of that image. The sandbox's home is a volume, which a
//! commit does not hold: it is copied into the container's own layer
//! (`/.rfs-checkpoint/home`, as root, owners kept) just before the
//! commit, and into the fork's fresh home volume when it starts.

use async_trait::async_trait;
use bollard::query_parameters::{CommitContainerOptions, RemoveImageOptions};

use super::exec::{self, ExecSpec};
use super::{client::status, container, DockerProvider};
use crate::provider::fork::{Checkpoint, Fork, Forked};
use crate::provider::{Base, CreateSpec, Labels, Provider, ProviderError, ProviderResult};

/// Where a checkpoint image holds the sandbox's home.
const KEPT_HOME: &str = "/.rfs-checkpoint/home";
/// The repository name of checkpoint images.
const REPO: &str = "rfs-checkpoint";

impl DockerProvider {
    /// Run `script` (with `$1` = the home) as root in container `id`.
    async fn as_root(&self, id: &str, script: &str, what: &str) -> ProviderResult<()> {
        let spec = ExecSpec {
            argv: vec![
                "/bin/sh".into(),
                "-c".into(),
                script.into(),
                "rfs-checkpoint".into(),
                self.options.home.clone(),
                KEPT_HOME.into(),
            ],
            cwd: "/",
            env: &[],
            user: Some(exec::ROOT),
            tty: false,
            stdin: false,
        };
        let (code, out) = exec::run_collect(
            &self.client,
            id,
            spec,
            exec::Helper::small("the checkpoint script"),
        )
        .await?;
        if code == Some(0) {
            return Ok(());
        }
        Err(ProviderError::Provision(format!(
            "cannot {what} in sandbox {id} ({}): {}",
            crate::exit_code::ExitText(code),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

#[async_trait]
impl Fork for DockerProvider {
    async fn checkpoint(
        &self,
        id: &str,
        name: &str,
        labels: &Labels,
    ) -> ProviderResult<Checkpoint> {
        container::check_id(id)?;
        self.as_root(
            id,
            r#"rm -rf "$2" && mkdir -p "$2" && cp -a "$1"/. "$2"/"#,
            "copy the home into the container's layer",
        )
        .await?;
        let api = self.client.api().await?;
        let options = CommitContainerOptions {
            container: Some(id.to_owned()),
            repo: Some(REPO.into()),
            tag: Some(format!(
                "{name}-{}",
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            )),
            pause: true,
            ..Default::default()
        };
        let config = bollard::models::ContainerConfig {
            labels: Some(labels.clone().into_iter().collect()),
            ..Default::default()
        };
        let made = api.commit_container(options, config).await.map_err(|e| {
            ProviderError::Provision(format!(
                "cannot commit sandbox {id} into an image: {}",
                self.client.error(e)
            ))
        })?;
        let image = made.id;
        // What the checkpoint adds on this machine: its size less the
        // sandbox's image's (whose layers it shares); the whole size where
        // that cannot be read.
        let host_bytes = match api.inspect_image(&image).await {
            Ok(i) => {
                let base = match api
                    .inspect_container(id, None)
                    .await
                    .ok()
                    .and_then(|c| c.image)
                {
                    Some(from) => api.inspect_image(&from).await.ok().and_then(|b| b.size),
                    None => None,
                };
                i.size.map(|s| (s - base.unwrap_or(0)).max(0) as u64)
            }
            Err(e) => {
                let _ = self.remove_checkpoint(&image).await;
                return Err(ProviderError::Provision(format!(
                    "cannot read the size of checkpoint image {image}: {}",
                    self.client.error(e)
                )));
            }
        };
        // The copy in the setup's own layer is not needed any more.
        let _ = self
            .as_root(id, r#"rm -rf "$2""#, "remove the home's copy")
            .await;
        Ok(Checkpoint {
            id: image,
            how: "an image committed from the container (docker commit), its home volume copied into it".into(),
            home: self.options.home.clone(),
            // An image whose size the daemon does not say counts as
            // unbounded: the run's disk limit refuses it.
            host_bytes: Some(host_bytes.unwrap_or(u64::MAX)),
        })
    }

    async fn fork(&self, checkpoint: &Checkpoint, spec: &CreateSpec) -> ProviderResult<Forked> {
        let spec = CreateSpec {
            base: Some(Base::Image(checkpoint.id.clone())),
            ..spec.clone()
        };
        let info = self.create(&spec).await?;
        let restored = self
            .as_root(
                &info.id,
                r#"cp -a "$2"/. "$1"/ && rm -rf /.rfs-checkpoint"#,
                "restore the checkpoint's home",
            )
            .await;
        if let Err(e) = restored {
            let _ = self.destroy(&info.id).await;
            return Err(e);
        }
        Ok(Forked {
            info,
            how: format!(
                "a container of checkpoint image {} (its home restored from the image)",
                checkpoint.id
            ),
        })
    }

    async fn remove_checkpoint(&self, id: &str) -> ProviderResult<()> {
        let api = self.client.api().await?;
        let options = RemoveImageOptions {
            force: true,
            noprune: false,
            ..Default::default()
        };
        match api.remove_image(id, Some(options), None).await {
            Ok(_) => Ok(()),
            Err(e) if status(&e) == Some(404) => Ok(()),
            Err(e) => Err(ProviderError::Api(format!(
                "cannot remove checkpoint image {id}: {}",
                self.client.error(e)
            ))),
        }
    }

    async fn list_checkpoints(&self) -> ProviderResult<Vec<(String, Labels)>> {
        let api = self.client.api().await?;
        let filters = std::collections::HashMap::from([(
            "label".to_string(),
            vec![crate::provider::fork::CHECKPOINT_LABEL.to_string()],
        )]);
        let options = bollard::query_parameters::ListImagesOptions {
            filters: Some(filters),
            ..Default::default()
        };
        let images = api
            .list_images(Some(options))
            .await
            .map_err(|e| self.client.error(e))?;
        Ok(images
            .into_iter()
            .map(|i| (i.id, i.labels.into_iter().collect()))
            .collect())
    }

    async fn checkpoint_exists(&self, id: &str) -> ProviderResult<bool> {
        let api = self.client.api().await?;
        match api.inspect_image(id).await {
            Ok(_) => Ok(true),
            Err(e) if status(&e) == Some(404) => Ok(false),
            Err(e) => Err(self.client.error(e)),
        }
    }
}
