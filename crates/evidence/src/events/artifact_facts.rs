//! `artifact.absent`: a `collect()` that found nothing where the script
//! said a report would be.

use serde::{Deserialize, Serialize};

/// `collect(path)` found nothing at `path`. `optional: true` (the
/// script's `#{ optional: true }`): recorded as absent and the run went
/// on. Else it is the failure of `step`, the step that ran last (which
/// wrote no such file), when one did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactAbsent {
    pub path: String,
    pub optional: bool,
    pub step: Option<String>,
}
