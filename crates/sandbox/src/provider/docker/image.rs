//! The image a sandbox container was created from, by content: the
//! image id the daemon resolved the name to when it created the container
//! (not what the name points to now), with the repository digests the
//! daemon knows for it.

use bollard::query_parameters::InspectContainerOptions;

use super::client::Client;
use super::container::check_id;
use crate::events::ImagePin;
use crate::provider::{ProviderError, ProviderResult};

/// True for an image id as the daemon reports it (`sha256:` and 64
/// lowercase hex digits).
pub(super) fn is_image_id(id: &str) -> bool {
    id.strip_prefix("sha256:").is_some_and(|h| {
        h.len() == 64
            && h.bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// The image container `id` was created from.
pub(super) async fn pin(client: &Client, id: &str) -> ProviderResult<ImagePin> {
    check_id(id)?;
    let api = client.api().await?;
    let c = api
        .inspect_container(id, None::<InspectContainerOptions>)
        .await
        .map_err(|e| client.error(e))?;
    let image = c.image.filter(|i| is_image_id(i)).ok_or_else(|| {
        ProviderError::Provision(format!(
            "the docker daemon at {} does not say which image sandbox container {id} was created from",
            client.host()
        ))
    })?;
    // The repository digests: by id, so a retag since cannot change them.
    let mut repo_digests = api
        .inspect_image(&image)
        .await
        .map_err(|e| client.error(e))?
        .repo_digests
        .unwrap_or_default();
    repo_digests.sort();
    Ok(ImagePin {
        id: image,
        repo_digests,
    })
}

/// The names of the variables image `name` bakes into its containers'
/// environment (its `Env`); none when the daemon does not have it (the
/// creation then refuses, saying so).
pub(super) async fn baked_env_names(client: &Client, name: &str) -> ProviderResult<Vec<String>> {
    let api = client.api().await?;
    let Ok(info) = api.inspect_image(name).await else {
        return Ok(vec![]);
    };
    Ok(info
        .config
        .and_then(|c| c.env)
        .unwrap_or_default()
        .iter()
        .map(|kv| {
            kv.split_once('=')
                .map_or(kv.as_str(), |(k, _)| k)
                .to_owned()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_full_sha256_ids_are_image_ids() {
        assert!(is_image_id(&format!("sha256:{}", "3a".repeat(32))));
        assert!(!is_image_id(&"3a".repeat(32)));
        assert!(!is_image_id("sha256:3aed"));
        assert!(!is_image_id("busybox:latest"));
    }
}
