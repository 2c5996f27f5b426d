//! The egress record of the run's sandbox (#34): which step connections
//! belong to, and journaling them as `net.connect` facts.

use std::sync::Arc;

use super::Run;
use crate::events::Event;
use crate::network::EgressLog;

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

    /// Journal every connection `log` recorded since last asked (a refused
    /// one does not fail anything by itself).
    pub(crate) fn record_connections(&self, log: Option<&Arc<EgressLog>>) {
        let Some(log) = log else { return };
        for mut c in log.take() {
            {
                let st = self.state();
                c.name = c.name.map(|n| st.redactor.redact_str(&n));
                c.error = c.error.map(|e| st.redactor.redact_str(&e));
            }
            let _ = self.record(Event::NetConnect(c));
        }
    }
}
