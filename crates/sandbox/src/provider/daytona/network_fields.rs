//! The network fields of Daytona's create request for a network policy,
//! held to the rules Daytona v0.190.0 validates them by
//! (`apps/api/src/sandbox/utils/network-validation.util.ts`): rfs refuses
//! what the server would, before anything runs, naming the rule.

/// What a network policy asks of Daytona's create request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum NetworkFields {
    /// `networkBlockAll: true` (`network: false`).
    BlockAll,
    /// An allow list: `networkAllowList` (comma-separated IPv4 CIDRs)
    /// and `domainAllowList` (comma-separated names, `*.`-wildcards);
    /// at least one is set.
    Allow {
        cidrs: Option<String>,
        domains: Option<String>,
    },
    /// Neither: Daytona's own network (the default, `true`, `"host"`).
    Open,
}

impl NetworkFields {
    /// How it is held, in words (the placement's `enforced_by`).
    pub(crate) fn describe(&self) -> Option<String> {
        match self {
            NetworkFields::BlockAll => Some("Daytona networkBlockAll".into()),
            NetworkFields::Allow { cidrs, domains } => {
                let mut parts = vec![];
                if let Some(c) = cidrs {
                    parts.push(format!("Daytona networkAllowList ({c})"));
                }
                if let Some(d) = domains {
                    parts.push(format!("Daytona domainAllowList ({d})"));
                }
                Some(parts.join(" and "))
            }
            NetworkFields::Open => None,
        }
    }
}

/// Daytona's bound on each list (network-validation.util.ts:36, :59).
pub(crate) const MAX_ENTRIES: usize = 10;

/// The create request's network fields for `policy`, or why Daytona
/// cannot hold it: a port; an IPv6 address (`networkAllowList` takes IPv4
/// CIDRs only); a name Daytona's `domainAllowList` does not take; more
/// than 10 entries in either list.
pub(crate) fn network_fields(
    policy: &crate::network::NetworkPolicy,
) -> Result<NetworkFields, String> {
    use crate::network::{policy::Target, NetworkPolicy};
    const RULES: &str = "apps/api/src/sandbox/utils/network-validation.util.ts";
    match policy {
        NetworkPolicy::Off => Ok(NetworkFields::BlockAll),
        NetworkPolicy::Public | NetworkPolicy::Host => Ok(NetworkFields::Open),
        NetworkPolicy::Allow(rules) => {
            let mut cidrs = vec![];
            let mut domains = vec![];
            for r in rules {
                if r.port.is_some() {
                    return Err(format!(
                        "`{}`: Daytona's allow lists hold addresses and names without ports, so a port cannot be enforced",
                        r.text
                    ));
                }
                match &r.target {
                    Target::Net(c) if c.addr.is_ipv4() => {
                        cidrs.push(format!("{}/{}", c.addr, c.prefix))
                    }
                    Target::Net(_) => {
                        return Err(format!(
                            "`{}`: Daytona's networkAllowList holds IPv4 CIDRs only (an IPv6 address is a 400 there, {RULES}), so an IPv6 address cannot be enforced",
                            r.text
                        ))
                    }
                    Target::Domain(d) => domains.push(checked_domain(&r.text, d.clone())?),
                    Target::Wildcard(s) => {
                        domains.push(checked_domain(&r.text, format!("*.{s}"))?)
                    }
                }
            }
            for (what, n) in [
                ("networkAllowList", cidrs.len()),
                ("domainAllowList", domains.len()),
            ] {
                if n > MAX_ENTRIES {
                    return Err(format!(
                        "Daytona's {what} holds at most {MAX_ENTRIES} entries ({RULES}) and this policy needs {n}: list fewer, or use the local or docker provider"
                    ));
                }
            }
            let join = |v: Vec<String>| (!v.is_empty()).then(|| v.join(","));
            match (join(cidrs), join(domains)) {
                (None, None) => Ok(NetworkFields::BlockAll),
                (cidrs, domains) => Ok(NetworkFields::Allow { cidrs, domains }),
            }
        }
    }
}

/// `name` as Daytona's `domainAllowList` takes it (network-validation.util.ts:50:
/// dot-separated labels of letters, digits and inner hyphens, a final
/// label of two or more letters, optionally `*.` in front), or why not.
fn checked_domain(text: &str, name: String) -> Result<String, String> {
    let rest = name.strip_prefix("*.").unwrap_or(&name);
    let labels: Vec<&str> = rest.split('.').collect();
    let label_ok = |l: &&str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    let ok = match labels.split_last() {
        Some((tld, names)) => {
            !names.is_empty()
                && names.iter().all(label_ok)
                && tld.len() >= 2
                && tld.bytes().all(|c| c.is_ascii_alphabetic())
        }
        None => false,
    };
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "`{text}`: Daytona's domainAllowList takes names like `example.com` or `*.example.com` (at least two labels, the last of letters only), so `{name}` cannot be enforced there"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::network::NetworkPolicy;

    fn fields(entries: &[&str]) -> Result<NetworkFields, String> {
        let list: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        network_fields(&NetworkPolicy::allow(&list).unwrap())
    }

    #[test]
    fn names_and_wildcards_go_to_the_domain_allow_list() {
        assert_eq!(
            fields(&["10.1.2.3", "pypi.org", "*.example.com"]).unwrap(),
            NetworkFields::Allow {
                cidrs: Some("10.1.2.3/32".into()),
                domains: Some("pypi.org,*.example.com".into()),
            }
        );
    }

    #[test]
    fn an_ipv6_entry_or_an_eleventh_cidr_is_refused_naming_the_rule() {
        let e = fields(&["2001:db8::/32"]).unwrap_err();
        assert!(
            e.contains("IPv4 CIDRs only") && e.contains("network-validation.util.ts"),
            "{e}"
        );
        let many: Vec<String> = (1..=11).map(|i| format!("10.0.0.{i}")).collect();
        let refs: Vec<&str> = many.iter().map(String::as_str).collect();
        let e = fields(&refs).unwrap_err();
        assert!(e.contains("at most 10") && e.contains("needs 11"), "{e}");
        assert!(fields(&refs[..10]).is_ok());
        let e = fields(&["localhost"]).unwrap_err();
        assert!(e.contains("domainAllowList takes names"), "{e}");
    }
}
