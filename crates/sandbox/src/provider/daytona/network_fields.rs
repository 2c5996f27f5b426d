//! The network fields of Daytona's create request for a network policy.

/// What a network policy asks of Daytona's create request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NetworkFields {
    /// `networkBlockAll: true` (`network: false`).
    BlockAll,
    /// `networkAllowList`: comma-separated CIDRs (an allow list of
    /// addresses and ranges).
    AllowList(String),
    /// Neither: Daytona's own network (the default, `true`, `"host"`).
    Open,
}

/// The create request's network fields for `policy`, or why Daytona
/// cannot enforce it (names, ports: its allow list holds CIDRs only).
pub(crate) fn network_fields(
    policy: &crate::network::NetworkPolicy,
) -> Result<NetworkFields, String> {
    use crate::network::{policy::Target, NetworkPolicy};
    match policy {
        NetworkPolicy::Off => Ok(NetworkFields::BlockAll),
        NetworkPolicy::Public | NetworkPolicy::Host => Ok(NetworkFields::Open),
        NetworkPolicy::Allow(rules) => {
            let mut cidrs = vec![];
            for r in rules {
                match (&r.target, r.port) {
                    (Target::Net(c), None) => cidrs.push(format!("{}/{}", c.addr, c.prefix)),
                    (Target::Net(_), Some(_)) => {
                        return Err(format!(
                            "`{}`: Daytona's networkAllowList holds CIDRs without ports, so a port cannot be enforced",
                            r.text
                        ))
                    }
                    _ => {
                        return Err(format!(
                            "`{}`: Daytona's networkAllowList holds CIDRs only, so a host name cannot be enforced there (list its addresses, or use the local provider)",
                            r.text
                        ))
                    }
                }
            }
            if cidrs.is_empty() {
                return Ok(NetworkFields::BlockAll);
            }
            Ok(NetworkFields::AllowList(cidrs.join(",")))
        }
    }
}
