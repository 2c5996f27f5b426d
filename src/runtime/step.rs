//! `step()`: one command in the shared sandbox, cwd mapped into the synced
//! root, the binding env set last, each attempt journaled. Retries reuse
//! the same sandbox and see the files earlier attempts left behind.

use std::time::{Duration, Instant};

use super::step_attempt::{AttemptCtx, StepResult};
use super::step_wrapper::Placement;
use super::{cwd, Run};
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::ExecRequest;
use rfs_sandbox::source::SourceOptions;

/// Options of `step(name, command, opts)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct StepOptions {
    /// Relative to the synced root; default: the invoking dir, mapped.
    pub cwd: Option<String>,
    pub env: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub retries: u32,
    pub allow_failure: bool,
}

/// The names rfs binds into every command (set after user env).
pub(crate) const BINDING_VARS: [&str; 5] = [
    "RELAYFLOWS_SANDBOX_ID",
    "RELAYFLOWS_SOURCE_COMMIT",
    "RELAYFLOWS_TREE_DIGEST",
    "RELAYFLOWS_SOURCE_WORKDIR",
    "RELAYFLOWS_RUN_ID",
];

impl Run {
    /// The next number of a step's or spawned process's logs
    /// (`003-build.stdout.log`): one sequence for both (attach sessions
    /// are numbered apart).
    pub(crate) fn next_log_seq(&self) -> u32 {
        let mut st = self.state();
        st.step_seq += 1;
        st.step_seq
    }

    /// A command's cwd as rfs writes it (journal, evidence, console):
    /// through the redactor like everything else; the real path is only
    /// run. (Computed apart: `record` takes the state lock itself.)
    pub(crate) fn shown_cwd(&self, pl: &Placement) -> (String, String) {
        let st = self.state();
        (
            st.redactor.redact_str(&pl.rel),
            st.redactor.redact_str(&pl.remote_dir),
        )
    }

    /// Resolve cwd and env for a command (shared by `step()` and
    /// `attach()`), binding the source first if needed. Refusals happen
    /// here, before anything executes.
    pub(crate) fn place_command(
        &self,
        what: &str,
        cwd_opt: Option<&str>,
        user_env: &[(String, String)],
    ) -> Result<Placement> {
        self.check_cancelled()?;
        if let Some(c) = cwd_opt {
            rfs_evidence::validate::path("its cwd", c)
                .map_err(|m| self.refuse(format!("{what} refused before running anything: {m}")))?;
        }
        for (k, v) in user_env {
            rfs_evidence::validate::env_var(k, v)
                .map_err(|m| self.refuse(format!("{what} refused before running anything: {m}")))?;
            if rfs_evidence::secrets::is_secret_name(k) {
                self.state().redactor.add(v);
            }
        }
        if self.state().source.is_none() {
            if let Err(e) =
                self.sync_source(SourceOptions::new(self.cfg.invocation_dir.clone()), true)
            {
                return Err(match e {
                    Error::Refused(m) => {
                        Error::Refused(format!("{what} refused: no source could be bound: {m}"))
                    }
                    other => other,
                });
            }
        }
        let default = match cwd_opt {
            Some(_) => Ok(None),
            None => self.default_cwd(),
        };
        // What the placement needs of the bound source (never its whole
        // manifest: a copy per command grew with the tree).
        let (rel, pin, physical_root) = {
            let st = self.state();
            let src = st.source.as_ref().expect("bound above");
            let rel = match (cwd_opt, default) {
                (Some(c), _) => cwd::resolve(c, &src.manifest),
                (None, Ok(Some(r))) => cwd::resolve(&r, &src.manifest),
                (None, Ok(None)) => Ok(String::new()),
                (None, Err(e)) => Err(e),
            };
            (rel, src.pin.clone(), src.physical_root.clone())
        };
        let rel = rel.map_err(|e| {
            let m = self.state().redactor.redact_str(&e.to_string());
            let _ = self.record(Event::CwdRefused {
                what: what.to_owned(),
                reason: m.clone(),
            });
            self.refuse(format!("{what} refused before running anything: {m}"))
        })?;
        let sb = self.ensure_sandbox()?;
        let remote_dir = if rel.is_empty() {
            pin.workdir.clone()
        } else {
            format!("{}/{}", pin.workdir, rel)
        };
        // Proxy credentials of this command's own (#44): what its
        // processes connect to, however long they outlive it, is said to
        // be theirs. Before the command's own variables, which may
        // override them.
        let mut env = self.proxy_env_of(what);
        env.extend(user_env.iter().cloned());
        env.extend([
            (BINDING_VARS[0].into(), sb.id.clone()),
            (BINDING_VARS[1].into(), pin.commit),
            (BINDING_VARS[2].into(), pin.tree_digest),
            (BINDING_VARS[3].into(), pin.workdir),
            (BINDING_VARS[4].into(), self.cfg.run_id.clone()),
        ]);
        Ok(Placement {
            sandbox_id: sb.id,
            home: sb.home,
            rel,
            remote_dir,
            physical_root,
            env,
        })
    }

    /// The invocation directory relative to the bound source's root
    /// (`None`: outside it), worked out once per binding: it canonicalizes
    /// host paths, the same for every command.
    fn default_cwd(&self) -> std::result::Result<Option<String>, cwd::CwdError> {
        let key = {
            let st = self.state();
            let r = &st.source.as_ref().expect("bound").request;
            if let Some((root, sub, rel)) = &st.default_cwd {
                if *root == r.repo_root && *sub == r.subdir {
                    return Ok(rel.clone());
                }
            }
            (r.repo_root.clone(), r.subdir.clone())
        };
        let rel = cwd::default_relative(&self.cfg.invocation_dir, &key.0, key.1.as_deref())?;
        self.state().default_cwd = Some((key.0, key.1, rel.clone()));
        Ok(rel)
    }

    /// Run one step.
    pub(crate) fn step(&self, name: &str, command: &str, opts: StepOptions) -> Result<StepResult> {
        rfs_evidence::validate::name("a step name", name)
            .map_err(|e| self.refuse(e.to_string()))?;
        let name = &self.state().redactor.redact_str(name);
        let what = format!("step `{name}`");
        let pl = self.place_step(name, &what, command, &opts)?;
        let seq = self.next_log_seq();
        // What rfs writes about the cwd (journal, evidence, console) passes
        // the redactor like everything else; the real path is only run.
        let (rel_shown, remote_shown) = self.shown_cwd(&pl);
        let stem = format!("{seq:03}-{}", file_stem(name));
        let env_journal: Vec<_> = opts
            .env
            .iter()
            .map(|(k, v)| (k.clone(), self.redact_value(k, v)))
            .collect();
        let command_journal = self.state().redactor.redact_str(command);
        // The pin this step runs under (re-syncs move it between steps).
        let pin = self
            .state()
            .source
            .as_ref()
            .map(|s| (s.pin.commit.clone(), s.pin.tree_digest.clone()));
        self.record(Event::StepStart {
            name: name.to_owned(),
            seq,
            command: command_journal,
            sandbox_id: pl.sandbox_id.clone(),
            cwd: rel_shown.clone(),
            cwd_remote: remote_shown.clone(),
            env: env_journal,
            timeout_s: opts.timeout.map(|t| t.as_secs_f64()),
            retries: opts.retries,
            allow_failure: opts.allow_failure,
            commit: pin.as_ref().map(|p| p.0.clone()),
            tree_digest: pin.map(|p| p.1),
        })?;
        self.egress_step(Some(name));
        let started = Instant::now();
        let nonce = super::step_wrapper::nonce();
        let req = ExecRequest {
            argv: pl.argv(command, &nonce),
            cwd: super::step_wrapper::START_DIR.into(),
            env: pl.env.clone(),
            timeout: opts.timeout,
            cancel: self.cancel_token(),
        };
        let ctx = AttemptCtx {
            name,
            what: &what,
            pl: &pl,
            req: &req,
            nonce: &nonce,
            stem: &stem,
            rel_shown: &rel_shown,
            retries: opts.retries,
            started,
        };
        let provider = &self.cfg.provider;
        let _ = self.block_on(provider.usage(&pl.sandbox_id, true));
        let mut attempt = 0;
        let (result, last_signal) = loop {
            attempt += 1;
            if let Some(done) = self.attempt(&ctx, attempt)? {
                break done;
            }
        };
        let usage = self
            .block_on(provider.usage(&pl.sandbox_id, false))
            .filter(|u| !u.is_empty());
        let summary = describe(&result, last_signal, opts.timeout);
        // The step's connections, just before its end.
        let egress = self.egress_log();
        if let Some(l) = &egress {
            l.set_step(None);
            l.settle(std::time::Duration::from_millis(200));
        }
        self.record_connections(egress.as_ref());
        self.record(Event::StepEnd {
            name: name.to_owned(),
            ok: result.ok,
            exit: result.exit,
            timed_out: result.timed_out,
            attempts: result.attempts,
            duration_ms: super::ms(result.duration_ms),
            sandbox_id: pl.sandbox_id.clone(),
            summary: summary.clone(),
            limit: result.limit.clone(),
            usage,
        })?;
        self.state().last_step = Some((name.to_owned(), summary.clone()));
        if !result.ok && !opts.allow_failure {
            return Err(Error::StepFailed {
                name: name.into(),
                reason: summary,
            });
        }
        Ok(result)
    }

    /// Where step `name` runs `command`: refused (and journaled) before
    /// anything runs when the command is empty or holds a NUL byte, or when
    /// its cwd or env is refused.
    fn place_step(
        &self,
        name: &str,
        what: &str,
        command: &str,
        opts: &StepOptions,
    ) -> Result<Placement> {
        if command.contains('\0') || command.trim().is_empty() {
            let m = format!(
                "{what} refused before running anything: its command is empty or contains a NUL byte"
            );
            self.record_refused_step(name, opts.cwd.as_deref().unwrap_or("."), &m);
            return Err(self.refuse(m));
        }
        self.place_command(what, opts.cwd.as_deref(), &opts.env)
            .inspect_err(|e| {
                if let Error::Refused(m) = e {
                    self.record_refused_step(name, opts.cwd.as_deref().unwrap_or("."), m);
                }
            })
    }
}

/// One line for a step's end. A missing exit code is never success: it
/// names the signal when the provider reported one, and otherwise says
/// that the provider reported no exit code (nothing is assumed).
fn describe(r: &StepResult, signal: Option<i32>, timeout: Option<Duration>) -> String {
    let how = describe_end(r, signal, timeout);
    match &r.limit {
        Some(l) => format!("{l} ({how})"),
        None => how,
    }
}

/// How the command ended, without a limit it reached.
fn describe_end(r: &StepResult, signal: Option<i32>, timeout: Option<Duration>) -> String {
    let tries = if r.attempts > 1 {
        format!(" after {} attempts", r.attempts)
    } else {
        String::new()
    };
    if r.timed_out {
        format!(
            "timed out after {}s{tries}",
            timeout.map(|t| t.as_secs_f64()).unwrap_or_default()
        )
    } else {
        match r.exit {
            Some(c) => format!("exit {c}, {} ms{tries}", r.duration_ms),
            None => match signal {
                Some(sig) => format!("no exit code (killed by signal {sig}){tries}"),
                None => format!(
                    "the provider reported no exit code (the command's outcome is unknown, never success){tries}"
                ),
            },
        }
    }
}

/// A step name as part of a file name.
pub(crate) fn file_stem(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    if s.is_empty() {
        "step".into()
    } else {
        s
    }
}
