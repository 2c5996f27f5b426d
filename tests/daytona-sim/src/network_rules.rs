//! Daytona's validation of a sandbox's network lists, as
//! `apps/api/src/sandbox/utils/network-validation.util.ts` (v0.190.0)
//! does it (read, not copied): `networkAllowList` holds IPv4 CIDRs only,
//! each with a prefix, at most 10 entries; `domainAllowList` holds names,
//! each optionally `*.`-prefixed, at most 10. Both are comma-separated,
//! entries trimmed, empty ones skipped by the checks (but counted by the
//! length check, as upstream). The caller answers 400 with the message
//! (`sandbox.service.ts` `resolveNetworkAllowList` /
//! `resolveDomainAllowList` wrap it in a `BadRequestError`).

use std::net::Ipv4Addr;

/// `validateNetworkAllowList` (network-validation.util.ts:12-38).
pub(crate) fn network_allow_list(list: &str) -> Result<(), String> {
    let networks: Vec<&str> = list.split(',').map(str::trim).collect();
    for network in &networks {
        if network.is_empty() {
            continue;
        }
        let mut parts = network.split('/');
        let ip = parts.next().unwrap_or_default();
        let prefix = parts.next().unwrap_or_default();
        if ip.parse::<Ipv4Addr>().is_err() {
            return Err(format!(
                "Invalid IP address: \"{ip}\" in network \"{network}\". Must be a valid IPv4 address"
            ));
        }
        if prefix.is_empty() {
            return Err(format!(
                "Invalid network format: \"{network}\". Missing CIDR prefix length (e.g., /24)"
            ));
        }
        // `parseInt`: the leading digits; none is NaN, which passes both
        // comparisons upstream.
        let digits: String = prefix.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(p) = digits.parse::<u64>() {
            if p > 32 {
                return Err(format!(
                    "Invalid CIDR prefix length: {network}. Prefix must be between 0 and 32"
                ));
            }
        }
    }
    if networks.len() > 10 {
        return Err("Network allow list cannot contain more than 10 networks".into());
    }
    Ok(())
}

/// `validateDomainAllowList` (network-validation.util.ts:45-62): the
/// regex `^(\*\.)?([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?\.)+[a-zA-Z]{2,}$`.
pub(crate) fn domain_allow_list(list: &str) -> Result<(), String> {
    let domains: Vec<&str> = list.split(',').map(str::trim).collect();
    for domain in &domains {
        if domain.is_empty() {
            continue;
        }
        if !domain_ok(domain) {
            return Err(format!(
                "Invalid domain: \"{domain}\". Must be a valid domain name"
            ));
        }
    }
    if domains.len() > 10 {
        return Err("Domain allow list cannot contain more than 10 domains".into());
    }
    Ok(())
}

fn domain_ok(domain: &str) -> bool {
    let rest = domain.strip_prefix("*.").unwrap_or(domain);
    let labels: Vec<&str> = rest.split('.').collect();
    let Some((tld, names)) = labels.split_last() else {
        return false;
    };
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        !b.is_empty()
            && b.len() <= 63
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric()
            && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
    };
    !names.is_empty()
        && names.iter().all(|l| label_ok(l))
        && tld.len() >= 2
        && tld.bytes().all(|c| c.is_ascii_alphabetic())
}
