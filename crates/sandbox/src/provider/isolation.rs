//! Isolation options every provider is asked about: `sandbox(#{ isolation,
//! network })`, `--isolation`, `RFS_LOCAL_ISOLATION`. A provider says what
//! it will have in force and why, or refuses an option it cannot honour
//! (never ignores it).

use std::fmt;

/// The env var giving the `local` provider's default isolation mode.
pub const ISOLATION_ENV: &str = "RFS_LOCAL_ISOLATION";

/// Why an isolation setting is refused, before anything runs: the
/// setting is malformed, or a provider cannot honour it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IsolationError {
    #[error("unknown isolation mode `{0}` (known: auto, namespaces, gvisor, none)")]
    UnknownMode(String),
    /// A malformed setting, with where it came from (`--isolation`, ...).
    #[error("{origin}: {error}")]
    Setting {
        origin: &'static str,
        error: Box<IsolationError>,
    },
    #[error("provider `{provider}` cannot honour `network: false` (it cannot cut its sandboxes off the network)")]
    NetworkUnsupported { provider: String },
    /// `why`: what the provider's sandboxes always are.
    #[error("provider `{provider}` cannot honour isolation `{mode}` (requested by {by}){why}")]
    ModeUnsupported {
        provider: String,
        mode: IsolationMode,
        by: String,
        why: String,
    },
    #[error("`network: false` needs namespaces, but isolation `none` was requested by {by}")]
    NetworkNeedsNamespaces { by: String },
    #[error("isolation `namespaces` (requested by {by}) is not available: {why}")]
    NamespacesUnavailable { by: String, why: String },
    #[error("isolation `gvisor` (requested by {by}) is not available: {why}")]
    GvisorUnavailable { by: String, why: String },
    #[error("`network: false` needs namespaces, which are not available: {why}")]
    NetworkWithoutNamespaces { why: String },
    /// A script (or `rfs.toml`, an MCP client) asked for the host's
    /// network, which only the person running rfs may allow.
    #[error("`network: \"host\"` asked by {by} would widen the boundary (the default is the public internet only, through rfs); only the person running rfs can allow it: pass `--allow-host-network` (or RFS_ALLOW_HOST_NETWORK=1)")]
    HostNetworkNotAllowed { by: String },
    /// An allow list names the host itself (its loopback, link-local and
    /// metadata addresses, its own addresses): as wide as the host's
    /// network, and as much the person's to allow.
    #[error("allow entry `{entry}` asked by {by} covers {what}, which would widen the boundary (the default refuses the host itself; a listed private address is fine); only the person running rfs can allow reaching the host: pass `--allow-host-network` (or RFS_ALLOW_HOST_NETWORK=1)")]
    AllowListReachesHost {
        by: String,
        entry: String,
        what: String,
    },
    /// The provider cannot enforce this network policy.
    #[error("provider `{provider}` cannot enforce network policy {policy}: {why}")]
    NetworkPolicyUnsupported {
        provider: String,
        policy: String,
        why: String,
    },
    /// A script (an MCP client, a bundle) asked for more network than the
    /// person running rfs set with `--network`.
    #[error("network {asked} asked by {by} would widen the boundary set by {set_by} (network {set}); only the person running rfs can widen it: pass `--network {flag}` (or RFS_NETWORK={flag})")]
    NetworkWidens {
        asked: String,
        by: String,
        set: String,
        set_by: String,
        /// The `--network` value that would allow it.
        flag: String,
    },
    /// The provider cannot show a host folder the person mounted.
    #[error("provider `{provider}` cannot mount a host folder (--mount-ro {mounts}): {why}")]
    HostMountUnsupported {
        provider: String,
        mounts: String,
        why: String,
    },
    /// A repository's `rfs.toml` or a script asked for weaker isolation
    /// than the person running rfs set: only they may lower it.
    #[error("isolation `{asked}` asked by {by} would widen the boundary set by {set_by} (`{set}`); only the person running rfs can lower it: pass `--isolation {asked}` (or RFS_LOCAL_ISOLATION={asked})")]
    Widens {
        asked: IsolationMode,
        by: String,
        set: IsolationMode,
        set_by: String,
    },
}

/// Requested isolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IsolationMode {
    /// Namespaces where the kernel permits them, else none (local).
    #[default]
    Auto,
    /// Namespaces, or refuse before anything runs.
    Namespaces,
    /// No isolation: commands run on the host (local's old behaviour).
    None,
    /// gVisor's user-space kernel (`runsc`) over the namespaces sandbox,
    /// or refuse before anything runs (local).
    Gvisor,
}

impl IsolationMode {
    pub fn parse(s: &str) -> Result<Self, IsolationError> {
        match s.trim() {
            "auto" => Ok(IsolationMode::Auto),
            "namespaces" => Ok(IsolationMode::Namespaces),
            "none" => Ok(IsolationMode::None),
            "gvisor" => Ok(IsolationMode::Gvisor),
            other => Err(IsolationError::UnknownMode(other.to_owned())),
        }
    }
}

impl IsolationMode {
    /// How much of the host a mode keeps out: `none` < `auto` (namespaces
    /// where the kernel permits, else none) < `namespaces` < `gvisor`
    /// (the host kernel is not shared either).
    fn strength(self) -> u8 {
        match self {
            IsolationMode::None => 0,
            IsolationMode::Auto => 1,
            IsolationMode::Namespaces => 2,
            IsolationMode::Gvisor => 3,
        }
    }
}

impl fmt::Display for IsolationMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IsolationMode::Auto => "auto",
            IsolationMode::Namespaces => "namespaces",
            IsolationMode::None => "none",
            IsolationMode::Gvisor => "gvisor",
        })
    }
}

/// What the run asks a provider for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationRequest {
    pub mode: IsolationMode,
    /// Where the mode came from (`default`, `--isolation flag`, ...).
    pub source: String,
    /// What the sandbox may connect to (#34).
    pub network: crate::network::NetworkPolicy,
    /// Who set the network policy (`default`, `the script's sandbox()
    /// option`).
    pub network_by: String,
    /// Who let scripts ask for `network: "host"` (`--allow-host-network`,
    /// `RFS_ALLOW_HOST_NETWORK`); `None`: nobody, it is refused.
    pub host_network_allowed_by: Option<String>,
    /// The network the person running rfs set (`--network`,
    /// `RFS_NETWORK`) with who set it: the most a script may ask for;
    /// `None`: the default's rules (anything but the host itself).
    pub network_ceiling: Option<(crate::network::NetworkPolicy, String)>,
    /// Resource limits, each with who set it (rfs's default process cap
    /// when nobody named one).
    pub limits: super::limits::LimitsRequest,
    /// Host folders the person mounted read-only (`--mount-ro`); only
    /// their flag sets these.
    pub host_mounts: Vec<super::host_mount::HostMount>,
}

impl Default for IsolationRequest {
    fn default() -> Self {
        IsolationRequest {
            mode: IsolationMode::Auto,
            source: "default".into(),
            network: Default::default(),
            network_by: DEFAULT_BY.into(),
            host_network_allowed_by: None,
            network_ceiling: None,
            limits: Default::default(),
            host_mounts: vec![],
        }
    }
}

impl IsolationRequest {
    /// For a provider whose network filter runs on this host (rfs's
    /// egress proxy, in the host's network namespace): an allow list
    /// naming the host itself — its loopback, link-local and metadata
    /// addresses, its own addresses, `0.0.0.0/0` — is as wide as the
    /// host's network, so it is refused unless the person running rfs
    /// allowed reaching the host (`--allow-host-network`). (On a remote
    /// provider those addresses are the remote machine's.)
    pub fn check_host_reach(&self) -> Result<(), IsolationError> {
        if self.host_network_allowed_by.is_some() {
            return Ok(());
        }
        let own = crate::network::ranges::own_addresses();
        match self.network.reaches_host(&own) {
            Some((entry, what)) => Err(IsolationError::AllowListReachesHost {
                by: self.network_by.clone(),
                entry,
                what,
            }),
            None => Ok(()),
        }
    }

    /// The mode from `--isolation`, else `RFS_LOCAL_ISOLATION` (empty =
    /// unset), else `auto`.
    pub fn from_settings(flag: Option<&str>, env: Option<&str>) -> Result<Self, IsolationError> {
        let from = |origin: &'static str| {
            move |e: IsolationError| IsolationError::Setting {
                origin,
                error: Box::new(e),
            }
        };
        fn clean(v: Option<&str>) -> Option<&str> {
            v.map(str::trim).filter(|v| !v.is_empty())
        }
        let (mode, source) = if let Some(f) = clean(flag) {
            (
                IsolationMode::parse(f).map_err(from("--isolation"))?,
                "--isolation flag",
            )
        } else if let Some(e) = clean(env) {
            (
                IsolationMode::parse(e).map_err(from(ISOLATION_ENV))?,
                "RFS_LOCAL_ISOLATION environment variable",
            )
        } else {
            (IsolationMode::Auto, "default")
        };
        Ok(IsolationRequest {
            mode,
            source: source.into(),
            ..IsolationRequest::default()
        })
    }
}

impl IsolationRequest {
    /// The request narrowed by `mode`, asked by `by` (a repository's
    /// `rfs.toml`, a script's `sandbox()` option): a stronger mode replaces
    /// the person's, the same mode keeps it, and a weaker one is refused
    /// (the trust model: what the repository or a script says can only
    /// narrow what the person running rfs set).
    pub fn narrowed(&self, mode: IsolationMode, by: &str) -> Result<Self, IsolationError> {
        match mode.strength().cmp(&self.mode.strength()) {
            std::cmp::Ordering::Less => Err(IsolationError::Widens {
                asked: mode,
                by: by.to_owned(),
                set: self.mode,
                set_by: self.source.clone(),
            }),
            std::cmp::Ordering::Equal => Ok(self.clone()),
            std::cmp::Ordering::Greater => Ok(IsolationRequest {
                mode,
                source: by.to_owned(),
                ..self.clone()
            }),
        }
    }
}

pub use rfs_evidence::events::sandbox_facts::IsolationFact;

impl IsolationRequest {
    /// The request with the network policy `policy`, asked by `by` (a
    /// script's `sandbox()` option, a repository's `rfs.toml`). `false`
    /// and allow lists only narrow and are always accepted here (an allow
    /// list naming this host is checked by the providers whose filter
    /// runs on it: [`IsolationRequest::check_host_reach`]); `"host"`
    /// widens the default and is refused unless the person running rfs
    /// allowed it (`--allow-host-network`).
    pub fn with_network(
        &self,
        policy: crate::network::NetworkPolicy,
        by: &str,
    ) -> Result<Self, IsolationError> {
        if policy == crate::network::NetworkPolicy::Host && self.host_network_allowed_by.is_none() {
            return Err(IsolationError::HostNetworkNotAllowed { by: by.to_owned() });
        }
        if let Some((ceiling, set_by)) = &self.network_ceiling {
            let own = crate::network::ranges::own_addresses();
            if !crate::network::policy::within(&policy, ceiling, &own) {
                let describe = |p: &crate::network::NetworkPolicy| match p {
                    crate::network::NetworkPolicy::Allow(_) => {
                        format!("allow [{}]", p.entries().join(", "))
                    }
                    other => format!("`{}`", other.kind()),
                };
                return Err(IsolationError::NetworkWidens {
                    asked: describe(&policy),
                    by: by.to_owned(),
                    set: describe(ceiling),
                    set_by: set_by.clone(),
                    flag: crate::network::policy::flag_text(&policy),
                });
            }
        }
        Ok(IsolationRequest {
            network: policy,
            network_by: by.to_owned(),
            ..self.clone()
        })
    }
}

impl IsolationRequest {
    /// Refuse the person's host folders (`--mount-ro`) on `provider`,
    /// which cannot show them, saying `why`; none asked: fine.
    pub fn refuse_host_mounts(&self, provider: &str, why: &str) -> Result<(), IsolationError> {
        if self.host_mounts.is_empty() {
            return Ok(());
        }
        let mounts: Vec<String> = self
            .host_mounts
            .iter()
            .map(|m| format!("{}:{}", m.host_dir.display(), m.target))
            .collect();
        Err(IsolationError::HostMountUnsupported {
            provider: provider.to_owned(),
            mounts: mounts.join(" --mount-ro "),
            why: why.to_owned(),
        })
    }

    /// Whether nobody named the network: rfs's default (`public`).
    pub fn network_is_default(&self) -> bool {
        self.network == crate::network::NetworkPolicy::Public && self.network_by == DEFAULT_BY
    }

    /// The request with the network the person running rfs set
    /// (`--network POLICY`, `RFS_NETWORK`), by `by`: the run's network when
    /// the script names none, and the most it may ask for (see
    /// [`IsolationRequest::with_network`]). `host` also lets scripts ask
    /// for the host's network, as `--allow-host-network` does.
    pub fn with_person_network(mut self, policy: crate::network::NetworkPolicy, by: &str) -> Self {
        // The person named the host's network (`host`): they allowed
        // reaching it. An allow list of theirs that happens to cover the
        // host (`0.0.0.0/0`, a private range holding the host's own
        // address) does not say so: it needs `--allow-host-network` as a
        // script's would, and is refused naming it.
        let host = policy == crate::network::NetworkPolicy::Host;
        if host && self.host_network_allowed_by.is_none() {
            self.host_network_allowed_by = Some(by.to_owned());
        }
        self.network = policy.clone();
        self.network_by = by.to_owned();
        self.network_ceiling = Some((policy, by.to_owned()));
        self
    }
}

/// Who set what nobody named: rfs's default.
pub const DEFAULT_BY: &str = "default";

/// What a provider will have in force, and why (journaled with the
/// placement, shown in EVIDENCE.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsolationInForce {
    /// `namespaces`, `none`, `container`, ...
    pub mode: String,
    pub reason: String,
    /// The network policy in force and what enforces it.
    pub network: crate::network::NetworkFact,
}

impl IsolationInForce {
    /// One line for EVIDENCE.md and messages.
    pub fn describe(&self) -> String {
        format!(
            "{} ({}); network {}",
            self.mode,
            self.reason,
            self.network.describe()
        )
    }

    /// The journal's record of it (in `placement.intent` and `placement`).
    pub fn fact(&self, req: &IsolationRequest) -> IsolationFact {
        IsolationFact {
            mode: self.mode.clone(),
            requested: req.mode.to_string(),
            requested_by: req.source.clone(),
            reason: self.reason.clone(),
            network: self.network.policy != "off",
            network_policy: Some(self.network.clone()),
            limits: None,
        }
    }
}

/// The answer of a provider that has no isolation options: the defaults
/// are fine, anything else is refused.
pub fn only_defaults(
    provider: &str,
    req: &IsolationRequest,
) -> Result<IsolationInForce, IsolationError> {
    // Nobody asked: the provider's own network, said as unfiltered in
    // every view. Asked for anything but the host's network: refused.
    let default = req.network_is_default();
    if req.network != crate::network::NetworkPolicy::Host && !default {
        return Err(IsolationError::NetworkPolicyUnsupported {
            provider: provider.to_owned(),
            policy: req.network.to_string(),
            why: "it has no network options; only `network: \"host\"` (whatever its sandboxes get) can be honoured".into(),
        });
    }
    if req.mode != IsolationMode::Auto {
        return Err(IsolationError::ModeUnsupported {
            provider: provider.to_owned(),
            mode: req.mode,
            by: req.source.clone(),
            why: String::new(),
        });
    }
    req.refuse_host_mounts(provider, "it has no way to show a folder of this machine")?;
    Ok(IsolationInForce {
        mode: "provider".into(),
        reason: format!("whatever provider `{provider}` gives its sandboxes"),
        network: crate::network::NetworkFact {
            policy: "host".into(),
            allow: vec![],
            requested_by: req.network_by.clone(),
            enforced_by: format!("nothing: whatever provider `{provider}` gives"),
            unfiltered: true,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_beats_env_beats_default() {
        let r = IsolationRequest::from_settings(Some("none"), Some("namespaces")).unwrap();
        assert_eq!(r.mode, IsolationMode::None);
        let r = IsolationRequest::from_settings(None, Some("namespaces")).unwrap();
        assert_eq!(r.mode, IsolationMode::Namespaces);
        assert!(r.source.contains("RFS_LOCAL_ISOLATION"));
        let r = IsolationRequest::from_settings(None, Some(" ")).unwrap();
        assert_eq!(
            (r.mode, r.source.as_str()),
            (IsolationMode::Auto, "default")
        );
        let e = IsolationRequest::from_settings(Some("vm"), None).unwrap_err();
        assert_eq!(
            e,
            IsolationError::Setting {
                origin: "--isolation",
                error: Box::new(IsolationError::UnknownMode("vm".into())),
            }
        );
        assert_eq!(
            e.to_string(),
            "--isolation: unknown isolation mode `vm` (known: auto, namespaces, gvisor, none)"
        );
    }

    #[test]
    fn a_script_or_rfs_toml_may_narrow_isolation_but_never_widen_it() {
        let person = IsolationRequest::default();
        let n = person
            .narrowed(IsolationMode::Namespaces, "sandbox() option")
            .unwrap();
        assert_eq!(n.mode, IsolationMode::Namespaces);
        assert_eq!(person.narrowed(IsolationMode::Auto, "x").unwrap(), person);
        let e = person
            .narrowed(IsolationMode::None, "sandbox() option")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--isolation none"), "{e}");
        let e = n.narrowed(IsolationMode::Auto, "rfs.toml").unwrap_err();
        assert!(e.to_string().contains("--isolation auto"), "{e}");
        let none = IsolationRequest::from_settings(Some("none"), None).unwrap();
        assert_eq!(none.narrowed(IsolationMode::None, "x").unwrap(), none);
    }

    #[test]
    fn gvisor_is_the_strongest_mode_a_script_may_ask_for_and_never_weaken() {
        let person = IsolationRequest::from_settings(None, Some("namespaces")).unwrap();
        let g = person
            .narrowed(IsolationMode::Gvisor, "sandbox() option")
            .unwrap();
        assert_eq!(
            (g.mode, g.source.as_str()),
            (IsolationMode::Gvisor, "sandbox() option")
        );
        let flag = IsolationRequest::from_settings(Some("gvisor"), None).unwrap();
        assert_eq!(flag.narrowed(IsolationMode::Gvisor, "x").unwrap(), flag);
        for weaker in [
            IsolationMode::Namespaces,
            IsolationMode::Auto,
            IsolationMode::None,
        ] {
            let e = flag.narrowed(weaker, "rfs.toml").unwrap_err().to_string();
            assert!(e.contains(&format!("--isolation {weaker}")), "{e}");
            assert!(e.contains("--isolation flag (`gvisor`)"), "{e}");
        }
    }

    #[test]
    fn providers_without_options_refuse_them() {
        let mut r = IsolationRequest::default();
        assert!(only_defaults("x", &r).unwrap().network.unfiltered);
        r.network_by = "the script's sandbox() option".into();
        let e = only_defaults("x", &r).unwrap_err().to_string();
        assert!(e.contains("cannot enforce network policy public"), "{e}");
        r.network = crate::network::NetworkPolicy::Host;
        assert!(only_defaults("x", &r).unwrap().network.unfiltered);
        r.network = crate::network::NetworkPolicy::Off;
        assert!(only_defaults("x", &r).is_err());
    }
}
