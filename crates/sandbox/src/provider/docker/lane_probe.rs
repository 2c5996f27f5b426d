//! Whether a sandbox reads its stream lane: a nonce written into the lane
//! must come back out of the sandbox (see [`super::stdin_fifo`]).

use std::time::Duration;

use super::client::Client;
use super::exec::{self, Feed};
use super::stdin_fifo::Lane;
use crate::provider::{BoundedCollect, ExecRequest, InputStream};

/// How long the probe of a lane may take.
const PROBE_DEADLINE: Duration = Duration::from_secs(10);

impl Lane {
    /// Whether sandbox `id` (as `user`) reads this lane: [`probe`]d on the
    /// first call, however many ask at once; the outcome is kept.
    pub(super) async fn ready(
        &self,
        client: &Client,
        id: &str,
        user: Option<&str>,
    ) -> Result<(), String> {
        self.probed
            .get_or_init(|| async {
                let r = probe(client, id, user, self).await;
                if let Err(why) = &r {
                    tracing::info!(sandbox = id, "streaming over the exec's connection: {why}");
                }
                r
            })
            .await
            .clone()
    }
}

/// Write a nonce into `lane`; sandbox `id` (as `user`) must read it back
/// out within [`PROBE_DEADLINE`]. A daemon that does not share this
/// machine's kernel gives the container a FIFO of its own, which nothing
/// ever writes to: the probe then times out.
async fn probe(client: &Client, id: &str, user: Option<&str>, lane: &Lane) -> Result<(), String> {
    let nonce = format!("rfs-lane-{}\n", uuid::Uuid::new_v4().simple());
    let req = ExecRequest {
        argv: vec![
            "/bin/sh".into(),
            "-c".into(),
            r#"read -r l && printf '%s\n' "$l""#.into(),
        ],
        cwd: "/".into(),
        env: vec![],
        timeout: Some(PROBE_DEADLINE),
        cancel: Default::default(),
    };
    let input = InputStream::new(std::io::Cursor::new(nonce.clone().into_bytes()));
    let mut bounded =
        BoundedCollect::new(exec::SMALL_OUTPUT, exec::SMALL_OUTPUT, req.cancel.clone());
    let outcome = exec::run_with_input(
        client,
        id,
        user,
        &req,
        Some((input, Feed::Lane(lane))),
        &mut bounded,
    )
    .await
    .map_err(|e| format!("its probe failed: {e}"))?;
    if let Some(e) = bounded.error("the stream lane's probe") {
        return Err(e.to_string());
    }
    let out = bounded.out;
    if outcome.timed_out {
        return Err(format!(
            "the sandbox read nothing from it within {}s (the daemon does not share this \
             machine's pipes)",
            PROBE_DEADLINE.as_secs()
        ));
    }
    if !outcome.success() {
        return Err(format!(
            "its probe ended with {}: {}",
            crate::exit_code::ExitText(outcome.exit),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    if out.stdout != nonce.as_bytes() {
        return Err(format!(
            "the sandbox read something else from it ({:?})",
            String::from_utf8_lossy(&out.stdout[..out.stdout.len().min(80)])
        ));
    }
    Ok(())
}
