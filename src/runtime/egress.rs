//! The egress record of the run's sandbox (#34): which step connections
//! belong to, and journaling them as `net.connect` facts.

use std::sync::Arc;

use super::Run;
use rfs_evidence::events::Event;
use rfs_sandbox::network::EgressLog;

impl Run {
    /// The egress record of the run's sandbox, if it has one (a sandbox
    /// behind rfs's proxy).
    pub(crate) fn egress_log(&self) -> Option<Arc<EgressLog>> {
        let id = self.state().sandbox.as_ref().map(|s| s.id.clone())?;
        self.cfg.provider.egress(&id)
    }

    /// Connections made from now on belong to `step` (`None`: none).
    pub(crate) fn egress_step(&self, step: Option<&str>) {
        if let Some(l) = self.egress_log() {
            l.set_step(step.map(str::to_owned));
        }
    }

    /// The proxy variables of command `what` (`step `build``, `spawn
    /// `server``…) with a proxy user name of its own, when the sandbox is
    /// behind rfs's proxy (else none: the provider's own apply).
    pub(crate) fn proxy_env_of(&self, what: &str) -> Vec<(String, String)> {
        let step = what
            .strip_prefix("step `")
            .and_then(|r| r.strip_suffix('`'));
        self.egress_log()
            .filter(|l| l.served())
            .and_then(|l| l.opener(what, step))
            .map(|user| rfs_sandbox::network::proxy_env_for(&user))
            .unwrap_or_default()
    }

    /// Journal every connection `log` recorded since last asked (a refused
    /// one does not fail anything by itself).
    pub(crate) fn record_connections(&self, log: Option<&Arc<EgressLog>>) {
        let Some(log) = log else { return };
        self.journal_connections(log.take());
    }

    /// [`Run::record_connections`] for a run that ends leaving its
    /// sandbox (`--keep`): the connections still open are journaled too,
    /// as they were when they opened, saying so.
    pub(crate) fn record_connections_kept(&self, log: Option<&Arc<EgressLog>>) {
        let Some(log) = log else { return };
        self.journal_connections(log.take_with_open(
            "still open when the run ended with its sandbox kept (--keep): what it carried is not counted",
        ));
    }

    fn journal_connections(&self, conns: Vec<rfs_sandbox::network::Connection>) {
        for mut c in conns {
            {
                let st = self.state();
                // Names as the proxy keeps them: lower case.
                c.name = c.name.map(|n| st.redactor.redact_str_ignoring_case(&n));
                c.error = c.error.map(|e| st.redactor.redact_str(&e));
                // The opener's label holds a name or a terminal's
                // command: redacted with what the run knows now.
                c.opened_by = c.opened_by.map(|o| st.redactor.redact_str(&o));
            }
            let _ = self.record(Event::NetConnect(c));
        }
    }
}
