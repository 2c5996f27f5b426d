//! Capability: a service container next to a sandbox (`service(name,
//! #{ image, env, ready, cmd })`), sharing the sandbox's network
//! namespace so commands in the sandbox reach it on `127.0.0.1`. Only a
//! provider whose sandboxes are containers of an engine it drives offers
//! it ([`super::Provider::services`]); the others refuse `service()`
//! before anything runs.

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{ExecOutcome, Labels, OutputSink, ProviderResult};
use crate::events::ImagePin;

/// What a service is started from.
#[derive(Debug, Clone, Default)]
pub struct ServiceSpec {
    /// Its name in the script (for messages and a label).
    pub name: String,
    /// An image present on the engine (never pulled): the id
    /// [`Services::service_image`] gave.
    pub image: String,
    /// Environment, in order.
    pub env: Vec<(String, String)>,
    /// Its command; `None`: the image's own.
    pub cmd: Option<Vec<String>>,
    /// The sandbox's labels (so `rfs sandboxes` and `rfs gc` find it as
    /// they find the sandbox), plus the service's own.
    pub labels: Labels,
}

/// A started service.
#[derive(Debug, Clone)]
pub struct ServiceStarted {
    /// The engine's id of its container.
    pub id: String,
    /// The image it was created from, by content.
    pub image: ImagePin,
    /// The network it has, in the engine's words (always the sandbox's:
    /// `container:<sandbox id>`).
    pub network: String,
}

/// Label naming the service of a container (its name in the script).
pub const SERVICE_LABEL: &str = "relayflows/service";
/// Label naming the sandbox whose network a service shares.
pub const SERVICE_OF_LABEL: &str = "relayflows/service-of";

/// Capability: service containers sharing a sandbox's network.
#[async_trait]
pub trait Services: Send + Sync {
    /// Create and start a service for sandbox `sandbox_id`, in its network
    /// namespace (no other network) and within the sandbox's resource
    /// limits. Nothing is left behind when it fails.
    async fn start_service(
        &self,
        sandbox_id: &str,
        spec: &ServiceSpec,
    ) -> ProviderResult<ServiceStarted>;

    /// Stream the service's output into `sink` until it ends or `cancel`;
    /// how it ended (`exit`), or `cancelled` when it still ran.
    async fn follow_service(
        &self,
        id: &str,
        sink: &mut dyn OutputSink,
        cancel: CancellationToken,
    ) -> ProviderResult<ExecOutcome>;

    /// The image `image` names on the engine, by content (a service is
    /// then started from its id, so what was checked is what runs);
    /// refused when it is not there (never pulled). `service`: its name,
    /// for the message.
    async fn service_image(&self, image: &str, service: &str) -> ProviderResult<ImagePin>;

    /// Stop and remove the service's container (its anonymous volumes
    /// with it) and verify the engine no longer knows it; how it ended.
    async fn remove_service(&self, id: &str) -> ProviderResult<ExecOutcome>;
}
