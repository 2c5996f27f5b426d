//! `service(name, #{ image, env, ready, cmd })`: a container of an image
//! next to the run's sandbox, in its network namespace, so commands in
//! the sandbox reach it on `127.0.0.1:<port>` (docker only: the
//! provider's [`rfs_sandbox::provider::Services`] capability; others refuse it
//! before anything runs, see [`crate::script::services_refusal`]).
//!
//! Its image is pinned by content as the sandbox's is (`service.start`
//! names the image id); like the sandbox's, it must already be on the
//! engine (never pulled), and a script may name any image the sandbox
//! itself could have been made from, no other. Its output goes through a
//! step's sink (redacted into `steps/NNN-service-NAME.*.log`, to the
//! console, and into the handle's bounded tail); `ready` waits as a
//! spawn's `wait_for` does (a port is probed in the sandbox, whose network
//! it shares). It is removed, verified gone, at `stop()` or at the run's
//! end before the sandbox is destroyed (`service.end`); a run that died
//! leaves it to `rfs gc`, which finds it by the sandbox's labels.

use std::sync::Arc;
use std::time::Duration;

use super::background::Background;
use super::output::StepSink;
use super::spawn_wait::{tail_text, WaitFor};
use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::{ExecOutcome, ProviderError, ProviderResult, ServiceSpec};

/// Options of `service(name, opts)`.
#[derive(Debug, Clone, Default)]
pub(crate) struct ServiceOptions {
    pub image: String,
    pub env: Vec<(String, String)>,
    /// Its command (`None`: the image's own).
    pub cmd: Option<Vec<String>>,
    /// What `service()` waits for before it returns.
    pub ready: Option<(WaitFor, Duration)>,
}

/// How long the log stream may take to end once the container was removed.
const FOLLOW_END_BOUND: Duration = Duration::from_secs(10);

type Followed = (ProviderResult<ExecOutcome>, StepSink);

/// How a service ended, once journaled.
#[derive(Debug, Clone)]
pub(crate) struct ServiceEnded {
    pub exit: Option<i32>,
    pub gone: bool,
}

/// One service of the run: its container, followed as a background
/// thing is.
pub(crate) struct Service {
    pub container_id: String,
    followed: Background<Followed, ServiceEnded>,
}

impl std::ops::Deref for Service {
    type Target = Background<Followed, ServiceEnded>;

    fn deref(&self) -> &Self::Target {
        &self.followed
    }
}

impl Run {
    /// Start a service; returns once it is ready (when `ready` is given).
    pub(crate) fn service(&self, name: &str, opts: ServiceOptions) -> Result<Arc<Service>> {
        rfs_evidence::validate::name("a service name", name)
            .map_err(|e| self.refuse(e.to_string()))?;
        let name = &self.state().redactor.redact_str(name);
        let what = format!("service `{name}`");
        let p = self.cfg.provider.clone();
        if p.services().is_none() {
            return Err(self.refuse(unsupported(p.name())));
        }
        let image = opts.image.trim();
        if image.is_empty() || image.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(self.refuse(format!(
                "{what} refused before running anything: `image` must name one image (no spaces or control characters), not {:?}",
                opts.image
            )));
        }
        if self.state().services.iter().any(|s| s.name == *name) {
            return Err(self.refuse(format!(
                "{what} refused before running anything: this run already started a service named `{name}`"
            )));
        }
        // Its env and the sandbox: checked and bound as a step's are.
        let pl = self.place_command(&what, Some("."), &opts.env)?;
        let labels = self
            .state()
            .sandbox
            .as_ref()
            .map(|s| s.labels.clone())
            .unwrap_or_default();
        let services = p.services().expect("checked above");
        let pin = self
            .block_on(services.service_image(image, name))
            .map_err(|e| self.start_error(&what, e))?;
        self.check_replayed_service(name, &pin)?;
        let mut env: Vec<(String, String)> =
            self.withheld_service_env(image)?.into_iter().collect();
        env.extend(opts.env.iter().cloned());
        let spec = ServiceSpec {
            name: name.clone(),
            image: pin.id.clone(),
            env,
            cmd: opts.cmd.clone(),
            labels,
        };
        let started = self
            .block_on(services.start_service(&pl.sandbox_id, &spec))
            .map_err(|e| self.start_error(&what, e))?;
        let seq = self.next_log_seq();
        let redact = |s: &str| self.state().redactor.redact_str(s);
        self.record(Event::ServiceStart {
            name: name.clone(),
            seq,
            image: redact(image),
            image_pin: started.image.clone(),
            container_id: started.id.clone(),
            sandbox_id: pl.sandbox_id.clone(),
            network: started.network.clone(),
            env: opts
                .env
                .iter()
                .map(|(k, v)| (k.clone(), self.redact_value(k, v)))
                .collect(),
            cmd: opts
                .cmd
                .as_ref()
                .map(|c| c.iter().map(|a| redact(a)).collect()),
        })?;
        let sv = self.follow_service(name, &started.id, &pl.sandbox_id, seq);
        self.state().services.push(sv.clone());
        if let Some((wait, timeout)) = &opts.ready {
            self.await_ready(&sv, wait, *timeout)?;
        }
        Ok(sv)
    }

    /// Start following the service's output on the run's runtime.
    fn follow_service(&self, name: &str, id: &str, sandbox_id: &str, seq: u32) -> Arc<Service> {
        let stem = format!("{seq:03}-service-{}", super::step::file_stem(name));
        let (sink, shared) = self.background_sink(name, &stem, &super::step_wrapper::nonce());
        let mut sink = sink.without_wrapper();
        let cancel = self.cancel_token().child_token();
        let (provider, cid, c) = (self.cfg.provider.clone(), id.to_owned(), cancel.clone());
        let task = self.rt.spawn(async move {
            let r = match provider.services() {
                Some(s) => s.follow_service(&cid, &mut sink, c).await,
                None => Err(ProviderError::Unsupported("no services".into())),
            };
            (r, sink)
        });
        Arc::new(Service {
            container_id: id.to_owned(),
            followed: Background::new(name, sandbox_id, stem, cancel, task, shared),
        })
    }

    /// In a replay, the service's image against the original's service of
    /// that name (as the sandbox's image is checked), before it starts: a
    /// different one is refused unless `--allow-other-image`.
    fn check_replayed_service(
        &self,
        name: &str,
        now: &rfs_evidence::events::ImagePin,
    ) -> Result<()> {
        let Some(of) = &self.cfg.replay_of else {
            return Ok(());
        };
        let check = super::replay_check::service_image_check(of, name, now);
        for message in check.warnings {
            self.record(Event::PlacementWarning { message })?;
        }
        match check.refused {
            Some(why) => Err(self.refuse(why)),
            None => Ok(()),
        }
    }

    /// A provider's failure to start a service: an image that is not
    /// there is refused (nothing ran), anything else fails the script.
    fn start_error(&self, what: &str, e: ProviderError) -> Error {
        let e = e.map_message(|m| self.state().redactor.redact_str(m));
        match e {
            ProviderError::Provision(m) | ProviderError::Invalid(m) => {
                self.refuse(format!("{what} refused: {m}"))
            }
            other => Error::ScriptFailed(format!("{what} could not start: {other}")),
        }
    }

    /// Wait until the service is ready; when it is not, it is removed
    /// (verified) and the script fails naming it and the timeout.
    fn await_ready(&self, sv: &Arc<Service>, what: &WaitFor, timeout: Duration) -> Result<()> {
        let target = self.state().redactor.redact_str(&what.target());
        match self.watch_until(sv, what, timeout)? {
            Ok(after_ms) => self.record(Event::ServiceReady {
                name: sv.name.clone(),
                on: what.on().into(),
                target,
                after_ms,
            }),
            Err(why) => {
                let tail = sv.shared.lines().tail();
                self.record(Event::ServiceWaitFailed {
                    name: sv.name.clone(),
                    on: what.on().into(),
                    target,
                    timeout_s: timeout.as_secs_f64(),
                    why: why.clone(),
                    output_tail: tail.clone(),
                })?;
                let _ = self.end_service(sv, "not ready");
                let msg = format!(
                    "service `{}` was not ready within its timeout of {}: waited for {}: {why}{}",
                    sv.name,
                    super::spawn_wait::secs(timeout),
                    what.shown(),
                    tail_text(sv.shared.lines().tail().as_ref())
                );
                Err(Error::ScriptFailed(self.state().redactor.redact_str(&msg)))
            }
        }
    }

    /// `stop()`: remove the service (verified) and journal it.
    pub(crate) fn stop_service(&self, sv: &Arc<Service>) -> Result<ServiceEnded> {
        self.end_service(sv, "stop()")
    }

    /// Remove every service still there (teardown, before the sandbox);
    /// what could not be proven gone.
    pub(crate) fn stop_all_services(&self) -> Option<String> {
        let all = self.state().services.clone();
        let problems: Vec<String> = all
            .iter()
            .filter(|sv| sv.ended().is_none())
            .filter_map(|sv| match self.end_service(sv, "teardown") {
                Ok(e) if e.gone => None,
                Ok(_) => Some(format!(
                    "service `{}`: its container {} was not verified gone",
                    sv.name, sv.container_id
                )),
                Err(e) => Some(format!("service `{}`: {e}", sv.name)),
            })
            .collect();
        (!problems.is_empty()).then(|| problems.join("; "))
    }

    /// Remove the container (stopped first, so its last output is
    /// logged), close its logs and journal `service.end`.
    fn end_service(&self, sv: &Arc<Service>, by: &str) -> Result<ServiceEnded> {
        if let Some(e) = sv.ended() {
            return Ok(e);
        }
        let by = if self.is_cancelled() { "interrupt" } else { by };
        let p = self.cfg.provider.clone();
        let removed = match p.services() {
            Some(s) => self.block_on(s.remove_service(&sv.container_id)),
            None => Err(ProviderError::Unsupported(unsupported(p.name()))),
        };
        let task = sv.take_task();
        let followed = task.and_then(|t| {
            let joined = self.block_on(async {
                let mut t = t;
                match tokio::time::timeout(FOLLOW_END_BOUND, &mut t).await {
                    Ok(j) => j.ok(),
                    Err(_) => {
                        sv.cancel();
                        t.await.ok()
                    }
                }
            });
            joined
        });
        let followed_exit = followed
            .as_ref()
            .and_then(|(r, _)| r.as_ref().ok().and_then(|o| o.exit));
        let output_cut = match followed {
            Some((_, sink)) => sink.finish().map_err(|e| {
                Error::Internal(format!(
                    "cannot write the log of service `{}`: {e}",
                    sv.name
                ))
            })?,
            None => None,
        };
        let (exit, gone, error) = match &removed {
            Ok(o) => (o.exit.or(followed_exit), true, None),
            Err(e) => (followed_exit, false, Some(e.to_string())),
        };
        let ended = ServiceEnded { exit, gone };
        sv.set_ended(ended.clone());
        let (stdout_log, stderr_log) = self.background_logs(sv)?;
        self.record(Event::ServiceEnd {
            name: sv.name.clone(),
            by: by.to_owned(),
            exit,
            gone,
            duration_ms: sv.duration_ms(),
            stdout_log,
            stderr_log,
            output_tail: sv.shared.lines().tail(),
            output_cut,
            error: error.map(|e| self.state().redactor.redact_str(&e)),
        })?;
        match removed {
            Ok(_) => Ok(ended),
            Err(e) => Err(Error::ScriptFailed(format!(
                "service `{}`: its container {} could not be removed: {e}",
                sv.name, sv.container_id
            ))),
        }
    }
}

/// Why a provider without the capability refuses `service()`.
pub(crate) fn unsupported(provider: &str) -> String {
    format!(
        "service() refused: provider `{provider}` cannot start service containers (only `docker` can: a service is a container sharing the sandbox's network); use --provider docker, or start the service in the sandbox with spawn()"
    )
}
