//! Capability: setup once, fork per proof (#36). A provider that has it
//! keeps a sandbox's state as a *checkpoint* (a frozen copy of a local
//! sandbox's folders, a committed docker image, a forked Daytona sandbox)
//! and starts new sandboxes from it, each with writes of its own.
//! Checkpoints carry rfs's labels, so `rfs gc` finds those a crashed rfs
//! left; removing one is verified like a sandbox's teardown.

use async_trait::async_trait;

use super::{CreateSpec, Labels, ProviderResult, SandboxInfo};

/// A sandbox's state kept by the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// The provider's id for it (a folder name, an image id, a sandbox id).
    pub id: String,
    /// How it is kept, in words (journaled).
    pub how: String,
    /// The home of the sandbox it was taken from.
    pub home: String,
    /// The disk it keeps on this machine (`None`: it is kept elsewhere,
    /// as a Daytona fork is): a run's checkpoints count against its disk
    /// limit.
    pub host_bytes: Option<u64>,
}

/// A sandbox started from a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forked {
    pub info: SandboxInfo,
    /// How it was made, in words (journaled): `overlayfs over the
    /// checkpoint`, or a fallback and why.
    pub how: String,
}

/// The label every checkpoint carries, naming the run that made it.
pub const CHECKPOINT_LABEL: &str = "relayflows/checkpoint";

/// Make, fork from and remove checkpoints.
#[async_trait]
pub trait Fork: Send + Sync {
    /// Keep sandbox `id`'s state as a checkpoint named `name`, labelled
    /// `labels`. The sandbox goes on as it was.
    async fn checkpoint(&self, id: &str, name: &str, labels: &Labels)
        -> ProviderResult<Checkpoint>;

    /// A new sandbox as `spec` asks, whose filesystem starts as
    /// `checkpoint`'s; what it writes is its own.
    async fn fork(&self, checkpoint: &Checkpoint, spec: &CreateSpec) -> ProviderResult<Forked>;

    /// Remove checkpoint `id` (gone already is `Ok`).
    async fn remove_checkpoint(&self, id: &str) -> ProviderResult<()>;

    /// Whether checkpoint `id` still exists (to verify a removal).
    async fn checkpoint_exists(&self, id: &str) -> ProviderResult<bool>;

    /// rfs's checkpoints this provider keeps apart from its sandboxes,
    /// with their labels (for `rfs gc`; a provider whose checkpoints are
    /// sandboxes lists none here: they are in its sandbox list).
    async fn list_checkpoints(&self) -> ProviderResult<Vec<(String, Labels)>>;

    /// `Some(why)` when the sandbox `checkpoint` was taken from cannot be
    /// removed before it (a Daytona fork's parent): the run hands that
    /// sandbox's teardown to whoever removes the checkpoint, which
    /// destroys it right after, verified. `None` (every other provider):
    /// the checkpoint stands alone.
    fn holds_its_source(&self, _checkpoint: &Checkpoint) -> Option<String> {
        None
    }
}

/// Why `provider` cannot checkpoint or fork (its refusal).
pub fn unsupported(provider: &str) -> String {
    format!(
        "provider `{provider}` cannot checkpoint a sandbox or start one from a checkpoint (local, docker and daytona can)"
    )
}
