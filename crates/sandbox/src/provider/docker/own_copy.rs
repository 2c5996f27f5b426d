//! Where a sandbox's copy of rfs's executable is (module `own_exe` says
//! what the copy is made of): linked into the sandbox's stream lane
//! (module `lane`; nothing uploaded, read-only in the sandbox), or
//! uploaded into a fresh directory of its home where there is no lane or
//! the copy does not start from it. Its probe, and its removal.

use std::sync::Arc;
use std::time::Duration;

use super::client::Client;
use super::exec::{self, ExecSpec};
use super::own_exe::ExecutableBundle;
use super::stdin_fifo::Lane;
use super::upload::{self, Owner};
use crate::provider::own_executable as native_check;
use crate::provider::{ProviderError, ProviderResult};

/// How long the probe of a copy, and its removal, may take.
const DEADLINE: Duration = Duration::from_secs(60);

/// A copy of rfs's executable in a sandbox.
#[derive(Clone)]
pub(super) enum Placed {
    /// Uploaded into this directory of the sandbox home.
    Home(String),
    /// Linked into the sandbox's lane, at this directory (as the sandbox
    /// sees it).
    Lane(Arc<Lane>, String),
}

impl Placed {
    /// The copy's directory, as the sandbox sees it.
    pub(super) fn dir(&self) -> &str {
        match self {
            Placed::Home(d) | Placed::Lane(_, d) => d,
        }
    }

    /// Link (or copy, on this machine) `bundle` into `lane`.
    pub(super) fn in_lane(lane: Arc<Lane>, bundle: &ExecutableBundle) -> std::io::Result<Placed> {
        let dir = lane.place(&bundle.files)?;
        Ok(Placed::Lane(lane, dir))
    }

    /// Upload `bundle` into a new directory of `home`, owned by `owner`.
    pub(super) async fn upload(
        client: &Client,
        id: &str,
        home: &str,
        owner: Owner,
        bundle: &ExecutableBundle,
    ) -> ProviderResult<Placed> {
        let home = home.trim_end_matches('/');
        let name = format!(".rfs-exe-{}", uuid::Uuid::new_v4().simple());
        upload::upload_dir(client, id, home, &name, &bundle.files, owner).await?;
        Ok(Placed::Home(format!("{home}/{name}")))
    }

    /// Whether the copy starts in sandbox `id` as `user`: its probe must
    /// answer within [`DEADLINE`]. A copy that does not is removed.
    pub(super) async fn probe(
        &self,
        client: &Client,
        id: &str,
        user: Option<&str>,
        bundle: &ExecutableBundle,
    ) -> Result<(), String> {
        let mut argv = bundle.program(self.dir());
        argv.extend([
            native_check::COMMAND.to_string(),
            native_check::PROBE.to_string(),
        ]);
        let spec = ExecSpec {
            argv,
            cwd: "/",
            env: &[],
            user,
            tty: false,
            stdin: false,
        };
        let probe = tokio::time::timeout(
            DEADLINE,
            exec::run_collect(
                client,
                id,
                spec,
                exec::Helper::small("rfs's executable probe"),
            ),
        )
        .await
        .unwrap_or_else(|_| {
            Err(ProviderError::Timeout(format!(
                "its probe did not answer within {}s",
                DEADLINE.as_secs()
            )))
        });
        let why = match probe {
            Ok((Some(0), out)) if out.stdout == native_check::probe_answer().as_bytes() => {
                return Ok(())
            }
            Ok((code, out)) => format!(
                "{}: {}",
                crate::exit_code::ExitText(code),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => e.to_string(),
        };
        self.remove(client, id, user).await;
        Err(why)
    }

    /// Remove the copy (best effort: the sandbox goes anyway).
    pub(super) async fn remove(&self, client: &Client, id: &str, user: Option<&str>) {
        let dir = match self {
            Placed::Lane(lane, dir) => {
                if let Err(e) = lane.remove_placed(dir) {
                    tracing::warn!(sandbox = id, dir, "could not remove rfs's executable: {e}");
                }
                return;
            }
            Placed::Home(dir) => dir.as_str(),
        };
        let spec = ExecSpec {
            argv: vec!["rm".into(), "-rf".into(), "--".into(), dir.into()],
            cwd: "/",
            env: &[],
            user,
            tty: false,
            stdin: false,
        };
        match tokio::time::timeout(
            DEADLINE,
            exec::run_collect(client, id, spec, exec::Helper::small("rm")),
        )
        .await
        {
            Ok(Ok((Some(0), _))) => {}
            other => tracing::warn!(
                sandbox = id,
                dir,
                "could not remove rfs's executable: {other:?}"
            ),
        }
    }
}
