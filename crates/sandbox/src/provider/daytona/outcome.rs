//! How a command's end becomes its outcome: its exit code, or rfs's own
//! error for the toolbox's misleading failures and the wrapper's refusals.

use std::time::Duration;

use super::relay::Relay;
use super::shell_text::{self, Refusal};
use super::Api;
use crate::provider::{ExecOutcome, ExecRequest, OutputSink, ProviderError, ProviderResult};

/// SIGKILL, reported for a command rfs killed.
pub const SIGKILL: i32 = 9;
/// How long a killed command may take to report its end.
pub const KILL_GRACE: Duration = Duration::from_secs(10);

/// rfs's error for the toolbox's exit code -1 (the command never started).
pub(super) fn toolbox_start_error(id: &str, output: &str) -> ProviderError {
    let out = output.trim();
    if out.contains("fork/exec") {
        ProviderError::NotStarted(format!(
            "the Daytona toolbox could not start a shell in sandbox {id}: it says `{out}`, \
             which means the working directory it was given does not exist (not that the shell is missing)"
        ))
    } else if out.is_empty() {
        ProviderError::NotStarted(format!(
            "the Daytona toolbox reported exit code -1 with no output in sandbox {id}: \
             the command could not be started (rfs never reads this as a result)"
        ))
    } else {
        ProviderError::NotStarted(format!(
            "the Daytona toolbox could not run the command in sandbox {id} (exit code -1): {out}"
        ))
    }
}

/// rfs's error for a refusal of the wrapper.
fn refusal_error(r: Refusal, id: &str, cwd: &str) -> ProviderError {
    ProviderError::NotStarted(match r {
        Refusal::Cwd => format!("working directory `{cwd}` does not exist in sandbox {id}"),
        Refusal::Env => format!("sandbox {id} refused an environment variable of the command"),
        Refusal::Setsid => format!(
            "sandbox {id} has no `setsid`, which rfs needs to kill a command's process group"
        ),
        Refusal::PgidFile => format!(
            "cannot record a command's process group in /tmp of sandbox {id} (is /tmp writable?)"
        ),
    })
}

impl Api {
    /// The outcome of a command that ended by itself.
    pub(super) fn finish(
        &self,
        id: &str,
        req: &ExecRequest,
        token: &str,
        exit: Option<i32>,
        relay: &mut Relay,
        sink: &mut dyn OutputSink,
    ) -> ProviderResult<ExecOutcome> {
        match exit {
            Some(-1) => {
                relay.flush(sink);
                return Err(toolbox_start_error(id, &relay.head()));
            }
            Some(shell_text::EXIT_SETUP) => {
                if let Some(r) = relay.refusal(token) {
                    return Err(refusal_error(r, id, &req.cwd));
                }
            }
            _ => {}
        }
        relay.flush(sink);
        Ok(ExecOutcome {
            exit,
            ..ExecOutcome::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_zsh_fork_exec_error_and_empty_output_become_rfs_errors() {
        let e = toolbox_start_error("sb1", "fork/exec /usr/bin/zsh: no such file or directory")
            .to_string();
        assert!(
            e.contains("working directory it was given does not exist"),
            "{e}"
        );
        assert!(e.contains("sb1"));
        let e = toolbox_start_error("sb1", "  ").to_string();
        assert!(e.contains("exit code -1 with no output"), "{e}");
    }
}
