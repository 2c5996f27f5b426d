//! Placement: the run's one shared sandbox, provisioned lazily (on the
//! first sync or step, so its labels carry the source pins) and journaled
//! before anything runs in it.

use super::Run;
use rfs_evidence::error::{Error, Result};
use rfs_evidence::events::Event;
use rfs_sandbox::provider::isolation::{IsolationMode, IsolationRequest};
use rfs_sandbox::provider::labels::{self, Labels};
use rfs_sandbox::provider::{Base, BaseKind, CreateSpec, SandboxInfo};

/// Options of `sandbox(opts)`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SandboxOptions {
    pub image: Option<String>,
    /// Daytona snapshot (beats `--snapshot` and the environment).
    pub snapshot: Option<String>,
    /// Extra labels (cannot override rfs's own `relayflows/*` labels).
    pub labels: Labels,
    /// Overrides `--isolation` / `RFS_LOCAL_ISOLATION`.
    pub isolation: Option<IsolationMode>,
    /// `network: false | true | "host" | #{ allow: [...] }` (#34).
    pub network: Option<rfs_sandbox::network::NetworkPolicy>,
    /// `pids`, `memory`, `cpus`, `disk`: at most the run's ceilings.
    pub limits: rfs_sandbox::provider::limits::Limits,
    /// Caches kept between runs: name → path under the home (`~/...`).
    pub caches: std::collections::BTreeMap<String, String>,
    /// `mount_ro` was given: always refused (only `--mount-ro` mounts a
    /// host folder).
    pub mount_ro: bool,
}

impl SandboxOptions {
    /// Script-like text for messages.
    fn describe(&self) -> String {
        let mut parts = vec![];
        if let Some(i) = &self.image {
            parts.push(format!("image: {i:?}"));
        }
        if let Some(s) = &self.snapshot {
            parts.push(format!("snapshot: {s:?}"));
        }
        if !self.labels.is_empty() {
            let l: Vec<_> = self
                .labels
                .iter()
                .map(|(k, v)| format!("{k:?}: {v:?}"))
                .collect();
            parts.push(format!("labels: #{{ {} }}", l.join(", ")));
        }
        if let Some(i) = self.isolation {
            parts.push(format!("isolation: \"{i}\""));
        }
        if let Some(n) = &self.network {
            parts.push(format!(
                "network: {}",
                rfs_sandbox::network::policy::script_text(n)
            ));
        }
        if !self.limits.is_empty() {
            parts.push(self.limits.describe());
        }
        if !self.caches.is_empty() {
            let c: Vec<_> = self
                .caches
                .iter()
                .map(|(k, v)| format!("{k:?}: {v:?}"))
                .collect();
            parts.push(format!("caches: #{{ {} }}", c.join(", ")));
        }
        format!("#{{ {} }}", parts.join(", "))
    }
}

impl Run {
    /// What the sandbox starts from on a provider whose sandboxes start
    /// from `starts_from`; an `image` or `snapshot` it has no use for is
    /// ignored with a journaled warning.
    fn base(
        &self,
        provider: &str,
        starts_from: BaseKind,
        image: Option<&String>,
        opts: &SandboxOptions,
    ) -> Result<Option<Base>> {
        let named = [
            (BaseKind::Image, image, "images", "image"),
            (
                BaseKind::Snapshot,
                opts.snapshot.as_ref(),
                "snapshots",
                "snapshot",
            ),
        ];
        let mut base = None;
        for (kind, value, plural, what) in named {
            let Some(v) = value else { continue };
            if kind == starts_from {
                base = Some(match kind {
                    BaseKind::Snapshot => Base::Snapshot(v.clone()),
                    _ => Base::Image(v.clone()),
                });
                continue;
            }
            let message = format!("provider `{provider}` has no {plural}; {what} `{v}` is ignored");
            self.record(Event::PlacementWarning { message })?;
        }
        Ok(base)
    }

    /// Record the options of a `sandbox(opts)` call. A second call must
    /// agree with the first.
    pub(crate) fn sandbox_options(&self, opts: SandboxOptions) -> Result<()> {
        if opts.mount_ro {
            return Err(self.refuse(format!(
                "sandbox(#{{ mount_ro }}) refused: a script cannot mount a folder of this machine into the sandbox; only the person running rfs can: pass {} HOST_DIR:SANDBOX_PATH",
                rfs_sandbox::provider::host_mount::FLAG
            )));
        }
        for (k, v) in &opts.labels {
            if k.starts_with("relayflows/") {
                return Err(self.refuse(format!(
                    "label `{k}` is reserved: rfs stamps relayflows/* labels itself"
                )));
            }
            // Labels are public: the journal, EVIDENCE.md and the
            // provider's own listing show them.
            let holds = {
                let st = self.state();
                st.redactor.holds_secret(k) || st.redactor.holds_secret(v)
            };
            if holds {
                let k = self.state().redactor.redact_str(k);
                return Err(self.refuse(format!(
                    "label `{k}` refused: a label would publish a secret (labels are shown in the journal, EVIDENCE.md and the provider's sandbox list); pass secrets through a step's env instead"
                )));
            }
        }
        // A request to widen the person's isolation or limits, or a limit
        // the provider cannot enforce, is refused here, at the sandbox()
        // call, before anything runs.
        let req = self.isolation_request(&opts)?;
        self.check_caches(&opts, &req)?;
        let p = self.cfg.provider.clone();
        p.limits(&req.limits)
            .map_err(|why| self.refuse(format!("provider `{}` refuses: {why}", p.name())))?;
        let mut st = self.state();
        match &st.sandbox_opts {
            None if st.sandbox.is_some() && opts != SandboxOptions::default() => {
                Err(Error::Refused(
                    "sandbox options given after the run's sandbox was already provisioned"
                        .into(),
                ))
            }
            None => {
                st.sandbox_opts = Some(opts);
                Ok(())
            }
            Some(prev) if *prev == opts || opts == SandboxOptions::default() => Ok(()),
            Some(prev) => Err(Error::Refused(format!(
                "conflicting sandbox options: the run's one sandbox was requested with {}, now with {}",
                prev.describe(),
                opts.describe()
            ))),
        }
    }

    /// The isolation the run's sandbox is asked for: the run's setting,
    /// overridden by `sandbox()` options.
    pub(super) fn isolation_request(&self, opts: &SandboxOptions) -> Result<IsolationRequest> {
        let mut req = self.cfg.isolation.clone();
        if let Some(m) = opts.isolation {
            req = req
                .narrowed(m, "the script's sandbox() option")
                .map_err(|e| self.refuse(e.to_string()))?;
        }
        if let Some(n) = &opts.network {
            for e in n.entries() {
                self.refuse_secret_in("an allow entry", &e)?;
            }
            req = req
                .with_network(n.clone(), "the script's sandbox() option")
                .map_err(|e| self.refuse(e.to_string()))?;
        }
        if !opts.limits.is_empty() {
            req.limits = req
                .limits
                .narrowed(&opts.limits, "the script's sandbox() option")
                .map_err(|e| self.refuse(e.to_string()))?;
        }
        Ok(req)
    }

    /// Check that the provider can work at all and can honour the run's
    /// isolation setting; journaled either way.
    pub(crate) fn preflight(&self) -> Result<()> {
        let p = self.cfg.provider.clone();
        let refused = p
            .isolation(&self.cfg.isolation)
            .map(|_| ())
            .map_err(|e| e.to_string())
            .and_then(|()| {
                p.limits(&self.cfg.isolation.limits)
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            });
        if let Err(why) = refused {
            let msg = format!("provider `{}` refuses: {why}", p.name());
            let _ = self.record(Event::ProviderUnavailable {
                provider: p.name().to_owned(),
                reason: msg.clone(),
            });
            return Err(self.refuse(msg));
        }
        match self.block_on(p.preflight()) {
            Ok(()) => self.record(Event::ProviderReady {
                provider: p.name().to_owned(),
            }),
            Err(e) => {
                let msg = format!("provider `{}` cannot be used: {e}", p.name());
                let _ = self.record(Event::ProviderUnavailable {
                    provider: p.name().to_owned(),
                    reason: msg.clone(),
                });
                Err(self.refuse(msg))
            }
        }
    }

    /// The run's sandbox, provisioning it on first use (its source labels
    /// then say `unbound`; `sync_source` provisions with its pins instead).
    pub(crate) fn ensure_sandbox(&self) -> Result<SandboxInfo> {
        self.sandbox_with_pins(None)
    }

    /// The run's sandbox; provisioned with `pins` (commit, tree digest) as
    /// its source labels when it does not exist yet. A sandbox that already
    /// exists keeps its labels (journaled when pins were asked for).
    pub(crate) fn sandbox_with_pins(&self, pins: Option<(&str, &str)>) -> Result<SandboxInfo> {
        self.check_cancelled()?;
        let (existing, opts) = {
            let st = self.state();
            if st.destroyed {
                return Err(Error::Refused(
                    "the run's sandbox was already destroyed (after a failed source sync or at run end); a run never provisions a second one".into(),
                ));
            }
            (
                st.sandbox.clone(),
                st.sandbox_opts.clone().unwrap_or_default(),
            )
        };
        match (existing, pins) {
            (Some(s), None) => Ok(s),
            (Some(s), Some(_)) => {
                self.record(Event::PlacementLabelsUnbound {
                    sandbox_id: s.id.clone(),
                    reason: "the sandbox was provisioned before the source was bound; its source labels say `unbound`, the pin is in this journal".into(),
                })?;
                Ok(s)
            }
            (None, pins) => self.provision(
                opts,
                pins.map(|(c, _)| c.to_owned()),
                pins.map(|(_, t)| t.to_owned()),
            ),
        }
    }

    /// Provision with the given source labels (known pins, or `unbound`).
    fn provision(
        &self,
        opts: SandboxOptions,
        commit: Option<String>,
        tree: Option<String>,
    ) -> Result<SandboxInfo> {
        let p = self.cfg.provider.clone();
        let l = self.placement_labels(&opts, commit, tree);
        let image = opts.image.clone().or_else(|| self.cfg.image.clone());
        let reason = self.cfg.choice.reason.to_string();
        let base = self.base(p.name(), p.profile().starts_from, image.as_ref(), &opts)?;
        let request = self.isolation_request(&opts)?;
        let in_force = p.isolation(&request).map_err(|why| {
            self.placement_failed(p.name(), format!("provider `{}` refuses: {why}", p.name()))
        })?;
        let mut isolation = in_force.fact(&request);
        let limits = p.limits(&request.limits).map_err(|why| {
            self.placement_failed(p.name(), format!("provider `{}` refuses: {why}", p.name()))
        })?;
        for n in &limits.not_enforced {
            self.record(Event::PlacementWarning {
                message: format!("not enforced: {n}"),
            })?;
        }
        isolation.limits = Some(rfs_sandbox::provider::limits::LimitsFact {
            ceilings: request.limits.ceilings.clone(),
            ..limits
        });
        if in_force.mode == "none" {
            // SAFETY: geteuid cannot fail.
            let uid = unsafe { libc::geteuid() };
            let who = if uid == 0 {
                "root".to_owned()
            } else {
                format!("uid {uid}")
            };
            self.record(Event::PlacementWarning {
                message: format!(
                    "isolation `none` ({}): steps run on the host as {who}, with everything it can reach",
                    in_force.reason
                ),
            })?;
        }
        // Journal the intent first: a crash during create still leaves the
        // labels that find the sandbox.
        self.record(Event::PlacementIntent {
            provider: p.name().to_owned(),
            reason: reason.clone(),
            labels: l.clone(),
            image: image.clone(),
            isolation: Some(isolation.clone()),
        })?;
        self.block_on(p.preflight())
            .map_err(|e| self.refuse(format!("provider `{}` cannot be used: {e}", p.name())))?;
        self.digest_host_mounts(&request)?;
        let caches = self.open_caches(&opts, &request)?;
        let env = self.withheld_image_env(&opts, base.as_ref())?;
        let spec = CreateSpec {
            run_id: self.cfg.run_id.clone(),
            labels: l.clone(),
            env,
            base,
            max_lifetime: self.cfg.max_lifetime,
            isolation: request,
            caches,
        };
        let info = self.create_or_fork(&spec).map_err(|e| {
            let msg = format!(
                "could not provision a sandbox on provider `{}`: {e}",
                p.name()
            );
            self.placement_failed(p.name(), msg)
        })?;
        {
            let mut st = self.state();
            st.sandbox = Some(info.clone());
        }
        let environment = self.environment_of(&info.id)?;
        self.record(Event::Placement {
            provider: p.name().to_owned(),
            sandbox_id: info.id.clone(),
            reason,
            labels: info.labels.clone(),
            home: info.home.clone(),
            image,
            isolation: Some(isolation),
            environment: environment.clone().map(Box::new),
        })?;
        self.check_replayed_environment(environment.as_ref())?;
        Ok(info)
    }

    /// The labels of the run's sandbox: the script's, rfs's own, the
    /// source it will hold (`commit`, `tree`, or `unbound`) and its owner.
    fn placement_labels(
        &self,
        opts: &SandboxOptions,
        commit: Option<String>,
        tree: Option<String>,
    ) -> rfs_sandbox::provider::Labels {
        let mut l = opts.labels.clone();
        l.insert(labels::CREATED_BY.into(), labels::CREATED_BY_VALUE.into());
        l.insert(labels::RUN_ID.into(), self.cfg.run_id.clone());
        l.insert(
            labels::SOURCE_COMMIT.into(),
            commit.unwrap_or_else(|| labels::UNBOUND.into()),
        );
        l.insert(
            labels::TREE_DIGEST.into(),
            tree.unwrap_or_else(|| labels::UNBOUND.into()),
        );
        l.extend(rfs_sandbox::provider::owner::owner_labels());
        l.insert(
            labels::STARTED_AT.into(),
            rfs_evidence::journal::now_rfc3339(),
        );
        l
    }

    /// Journal `placement.failed` and refuse the run with `msg`.
    fn placement_failed(&self, provider: &str, msg: String) -> Error {
        let _ = self.record(Event::PlacementFailed {
            provider: provider.to_owned(),
            reason: msg.clone(),
        });
        self.refuse(msg)
    }

    /// The sandbox's environment by content (fails closed: a provider
    /// that pins environments and cannot say this one's refuses the run).
    fn environment_of(&self, id: &str) -> Result<Option<rfs_evidence::events::Environment>> {
        let p = self.cfg.provider.clone();
        self.block_on(p.environment(id)).map_err(|e| {
            self.refuse(format!(
                "provider `{}` cannot say what sandbox {id} runs on: {e}",
                p.name()
            ))
        })
    }

    /// A replay's environment against the original's: a different image
    /// is refused (unless `--allow-other-image`), a different host warned
    /// about; before anything runs in the sandbox.
    fn check_replayed_environment(
        &self,
        now: Option<&rfs_evidence::events::Environment>,
    ) -> Result<()> {
        let Some(of) = &self.cfg.replay_of else {
            return Ok(());
        };
        let check = super::replay_check::environment_check(of, now);
        for message in check.warnings {
            self.record(Event::PlacementWarning { message })?;
        }
        match check.refused {
            Some(why) => Err(self.refuse(why)),
            None => Ok(()),
        }
    }
}
