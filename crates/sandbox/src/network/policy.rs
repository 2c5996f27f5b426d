//! What a sandbox may connect to: `sandbox(#{ network })`, parsed and
//! validated before anything runs, and the decision for one destination.

use std::fmt;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use super::ranges::{self, Cidr};

/// The network policy of one sandbox.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum NetworkPolicy {
    /// `network: false`: no route at all (only the sandbox's own loopback).
    Off,
    /// The default and `network: true`: the public internet only, through
    /// rfs (loopback, link-local, private ranges and the host's own
    /// addresses are refused).
    #[default]
    Public,
    /// `network: #{ allow: [...] }`: only what is listed.
    Allow(Vec<AllowRule>),
    /// `network: "host"`: the host's network, unfiltered.
    Host,
}

/// Whether `asked` is no wider than `ceiling` (the person's `--network`):
/// `off` is within everything; an allow list is within `host`, within
/// `public` when none of its addresses or ranges reaches past the public
/// internet (a listed private or link-local address is let through by an
/// allow list, never by `public`; `own`: the host's addresses), and
/// within an allow list holding each of its entries; `public` is within
/// `public` and `host`; `host` only within `host`.
pub fn within(asked: &NetworkPolicy, ceiling: &NetworkPolicy, own: &[IpAddr]) -> bool {
    use NetworkPolicy::*;
    match (asked, ceiling) {
        (Off, _) | (_, Host) | (Public, Public) => true,
        (Allow(a), Public) => !a
            .iter()
            .any(|r| matches!(&r.target, Target::Net(c) if ranges::beyond_public(c, own))),
        (Allow(a), Allow(c)) => a.iter().all(|r| c.iter().any(|x| x.covers(r))),
        _ => false,
    }
}

/// The `--network` value that names `p`: `off`, `public`, `host`, or the
/// allow list's entries joined by commas.
pub fn flag_text(p: &NetworkPolicy) -> String {
    match p {
        NetworkPolicy::Allow(_) => p.entries().join(","),
        other => other.kind().to_owned(),
    }
}

/// `--network`'s value (`RFS_NETWORK`): `off`, `public`, `host`, or a
/// comma-separated allow list.
pub fn parse_flag(v: &str) -> Result<NetworkPolicy, PolicyError> {
    match v.trim() {
        "off" | "false" | "none" => Ok(NetworkPolicy::Off),
        "public" | "true" => Ok(NetworkPolicy::Public),
        "host" => Ok(NetworkPolicy::Host),
        list => {
            let entries: Vec<String> = list
                .split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect();
            if entries.is_empty() {
                return Err(PolicyError {
                    entry: v.to_owned(),
                    why: "not a network (off, public, host, or a comma-separated allow list)"
                        .into(),
                });
            }
            NetworkPolicy::allow(&entries)
        }
    }
}

/// One entry of an allow list: a name, `*.suffix`, an address or a CIDR,
/// each optionally with `:port`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowRule {
    /// The entry as written.
    pub text: String,
    pub target: Target,
    pub port: Option<u16>,
}

/// What an allow entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A host name (lower case, no trailing dot).
    Domain(String),
    /// `*.suffix`: every name below `suffix` (not `suffix` itself).
    Wildcard(String),
    /// An address or a range of them.
    Net(Cidr),
}

/// Why an allow entry is malformed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("network allow entry `{entry}`: {why}")]
pub struct PolicyError {
    pub entry: String,
    pub why: String,
}

impl NetworkPolicy {
    /// Whether the sandbox has any way out (`false` only for `Off`).
    pub fn has_route(&self) -> bool {
        !matches!(self, NetworkPolicy::Off)
    }

    /// Whether connections go through rfs's egress proxy.
    pub fn filtered(&self) -> bool {
        matches!(self, NetworkPolicy::Public | NetworkPolicy::Allow(_))
    }

    /// Parse an allow list (every entry checked; the first bad one
    /// refused).
    pub fn allow(entries: &[String]) -> Result<NetworkPolicy, PolicyError> {
        let rules = entries
            .iter()
            .map(|e| AllowRule::parse(e))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(NetworkPolicy::Allow(rules))
    }

    /// The policy a journaled or stored [`super::NetworkFact`] describes.
    pub fn from_fact(f: &super::NetworkFact) -> Result<NetworkPolicy, PolicyError> {
        match f.policy.as_str() {
            "off" => Ok(NetworkPolicy::Off),
            "public" => Ok(NetworkPolicy::Public),
            "host" => Ok(NetworkPolicy::Host),
            "allow" => NetworkPolicy::allow(&f.allow),
            other => Err(PolicyError {
                entry: other.to_owned(),
                why: "not a network policy (off, public, allow, host)".into(),
            }),
        }
    }

    /// The entries of an allow list as written (empty otherwise).
    /// The first allow-list entry that names the host itself (see
    /// [`ranges::covers_host`]) with what of the host it covers.
    pub fn reaches_host(&self, own: &[IpAddr]) -> Option<(String, String)> {
        let NetworkPolicy::Allow(rules) = self else {
            return None;
        };
        rules.iter().find_map(|r| match &r.target {
            Target::Net(c) => ranges::covers_host(c, own).map(|why| (r.text.clone(), why)),
            _ => None,
        })
    }

    pub fn entries(&self) -> Vec<String> {
        match self {
            NetworkPolicy::Allow(r) => r.iter().map(|r| r.text.clone()).collect(),
            _ => vec![],
        }
    }

    /// `off`, `public`, `allow`, `host`: the journal's name of the kind.
    pub fn kind(&self) -> &'static str {
        match self {
            NetworkPolicy::Off => "off",
            NetworkPolicy::Public => "public",
            NetworkPolicy::Allow(_) => "allow",
            NetworkPolicy::Host => "host",
        }
    }
}

impl fmt::Display for NetworkPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetworkPolicy::Off => f.write_str("off (own loopback only)"),
            NetworkPolicy::Public => f.write_str(
                "public internet only, through rfs (loopback, link-local, private ranges and the host's own addresses refused)",
            ),
            NetworkPolicy::Allow(r) => write!(
                f,
                "only {}, through rfs",
                r.iter()
                    .map(|r| r.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            NetworkPolicy::Host => f.write_str("host network (UNFILTERED)"),
        }
    }
}

impl AllowRule {
    /// Parse one entry: `pypi.org`, `*.pythonhosted.org`, `10.1.2.3`,
    /// `10.0.0.0/8`, `host:8080`, `[fd00::1]:443`, `fd00::/8`.
    pub fn parse(entry: &str) -> Result<AllowRule, PolicyError> {
        let bad = |why: &str| PolicyError {
            entry: entry.to_owned(),
            why: why.to_owned(),
        };
        let text = entry.trim();
        if text.is_empty() {
            return Err(bad("empty"));
        }
        let (host, port) = split_port(text).map_err(|w| bad(&w))?;
        if host.is_empty() {
            return Err(bad("no host before the port"));
        }
        let target = if host.contains('/') || host.parse::<IpAddr>().is_ok() {
            Target::Net(Cidr::parse(host).map_err(|w| bad(&w))?)
        } else if let Some(suffix) = host.strip_prefix("*.") {
            Target::Wildcard(domain(suffix).map_err(|w| bad(&w))?)
        } else {
            Target::Domain(domain(host).map_err(|w| bad(&w))?)
        };
        Ok(AllowRule {
            text: text.to_owned(),
            target,
            port,
        })
    }

    /// Whether this entry lets `name` (when the connection named one) at
    /// `addr`, `port` through.
    fn matches(&self, name: Option<&str>, addr: IpAddr, port: u16) -> bool {
        if self.port.is_some_and(|p| p != port) {
            return false;
        }
        let name = name.map(normal_name);
        match &self.target {
            Target::Domain(d) => name.as_deref() == Some(d.as_str()),
            Target::Wildcard(s) => name
                .as_deref()
                .and_then(|n| n.strip_suffix(s.as_str()))
                .is_some_and(|head| head.len() > 1 && head.ends_with('.')),
            Target::Net(c) => c.contains(addr),
        }
    }

    /// Whether everything entry `r` lets through, this one does: a range
    /// inside this one's, a name this one names or is below its
    /// wildcard, on this one's port or any port where this one has none.
    fn covers(&self, r: &AllowRule) -> bool {
        let below = |name: &str, suffix: &str| {
            name.strip_suffix(suffix)
                .is_some_and(|head| head.len() > 1 && head.ends_with('.'))
        };
        let port = self.port.is_none() || self.port == r.port;
        port && match (&self.target, &r.target) {
            (Target::Net(x), Target::Net(c)) => {
                x.addr.is_ipv4() == c.addr.is_ipv4() && x.prefix <= c.prefix && x.contains(c.addr)
            }
            (Target::Domain(x), Target::Domain(d)) => x == d,
            (Target::Wildcard(x), Target::Domain(d)) => below(d, x),
            (Target::Wildcard(x), Target::Wildcard(w)) => x == w || below(w, x),
            _ => false,
        }
    }

    /// Whether this entry names the address itself (an address or CIDR),
    /// which lets a listed private address through.
    fn lists_address(&self, addr: IpAddr, port: u16) -> bool {
        matches!(&self.target, Target::Net(c) if c.contains(addr))
            && self.port.is_none_or(|p| p == port)
    }
}

/// The policy as a script writes it (for messages).
pub fn script_text(p: &NetworkPolicy) -> String {
    match p {
        NetworkPolicy::Off => "false".into(),
        NetworkPolicy::Public => "true".into(),
        NetworkPolicy::Host => "\"host\"".into(),
        NetworkPolicy::Allow(r) => format!(
            "#{{ allow: [{}] }}",
            r.iter()
                .map(|r| format!("{:?}", r.text))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// `host[:port]`; an IPv6 address in brackets may have a port, a bare one
/// (several colons) has none.
fn split_port(text: &str) -> Result<(&str, Option<u16>), String> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest
            .split_once(']')
            .ok_or_else(|| "`[` without its `]`".to_owned())?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((host, Some(port(p)?))),
            None if after.is_empty() => Ok((host, None)),
            None => Err(format!("unexpected `{after}` after `]`")),
        };
    }
    match text.rsplit_once(':') {
        Some((host, p)) if !host.contains(':') => Ok((host, Some(port(p)?))),
        _ => Ok((text, None)),
    }
}

fn port(p: &str) -> Result<u16, String> {
    match p.parse::<u32>() {
        Ok(n) if (1..=65535).contains(&n) => Ok(n as u16),
        Ok(n) => Err(format!("port {n} is out of range (1-65535)")),
        Err(_) => Err(format!("port `{p}` is not a number")),
    }
}

/// A host name: labels of letters, digits, `-` and `_`, 1 to 63
/// characters each, 253 in all.
fn domain(d: &str) -> Result<String, String> {
    let d = normal_name(d);
    if d.is_empty() || d.len() > 253 {
        return Err("not a host name (empty or longer than 253 characters)".into());
    }
    for label in d.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !ok {
            return Err(format!(
                "`{label}` is not a host name label (letters, digits, `-`; `*.` only as the first label)"
            ));
        }
    }
    Ok(d)
}

fn normal_name(n: &str) -> String {
    n.trim_end_matches('.').to_ascii_lowercase()
}

/// Whether a connection is let through, and the rule that decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub allowed: bool,
    pub rule: String,
}

/// The decision for a connection to `addr`:`port` (named `name`, when
/// the program named one), with `own` the host's own addresses.
pub fn decide(
    policy: &NetworkPolicy,
    name: Option<&str>,
    addr: IpAddr,
    port: u16,
    own: &[IpAddr],
) -> Decision {
    let d = |allowed: bool, rule: String| Decision { allowed, rule };
    let addr = ranges::canonical(addr);
    match policy {
        NetworkPolicy::Off => d(false, "network: false".into()),
        NetworkPolicy::Host => d(true, "network: \"host\" (unfiltered)".into()),
        NetworkPolicy::Public => match refused_range(addr, own) {
            Some(why) => d(false, format!("default: {why}")),
            None => d(true, "default: public address".into()),
        },
        NetworkPolicy::Allow(rules) => {
            let Some(rule) = rules.iter().find(|r| r.matches(name, addr, port)) else {
                return d(false, "not in the allow list".into());
            };
            match refused_range(addr, own) {
                Some(why) if !rules.iter().any(|r| r.lists_address(addr, port)) => d(
                    false,
                    format!(
                        "allow `{}` names it, but {addr} is {why} (list the address to allow it)",
                        rule.text
                    ),
                ),
                _ => d(true, format!("allow `{}`", rule.text)),
            }
        }
    }
}

/// A refusal decided by the name alone, before it is resolved: under
/// `network: false`, and under an allow list where no name entry lists
/// it (resolving a name nobody listed would itself carry data out; an
/// address entry lets through connections made to that address).
pub fn refuse_before_resolving(policy: &NetworkPolicy, name: &str, port: u16) -> Option<Decision> {
    let refused = |rule: &str| {
        Some(Decision {
            allowed: false,
            rule: rule.to_owned(),
        })
    };
    match policy {
        NetworkPolicy::Off => refused("network: false"),
        NetworkPolicy::Public | NetworkPolicy::Host => None,
        NetworkPolicy::Allow(rules) => {
            let by_name = rules.iter().any(|r| {
                !matches!(r.target, Target::Net(_))
                    && r.matches(Some(name), IpAddr::from([0, 0, 0, 0]), port)
            });
            if by_name {
                None
            } else {
                refused("not in the allow list")
            }
        }
    }
}

/// Why `addr` is not public (a refused range, or one of the host's own
/// addresses).
fn refused_range(addr: IpAddr, own: &[IpAddr]) -> Option<String> {
    if let Some(r) = ranges::refused(addr) {
        return Some(r.to_owned());
    }
    own.iter()
        .any(|o| ranges::canonical(*o) == addr)
        .then(|| "the host's own address".to_owned())
}

#[cfg(test)]
mod tests {

    /// The person's `--network` is the most a script may ask for.
    #[test]
    fn a_policy_is_within_the_persons_network_only_when_no_wider() {
        let p = |v: &str| parse_flag(v).unwrap();
        let within = |a: &NetworkPolicy, c: &NetworkPolicy| within(a, c, &[ip("192.0.2.7")]);
        let (off, public, host) = (p("off"), p("public"), p("host"));
        let list = p("pypi.org,10.0.0.0/8:443");
        assert!(within(&off, &off) && within(&off, &list) && within(&off, &public));
        assert!(within(&p("10.0.0.0/8:443"), &list));
        assert!(
            !within(&p("10.0.0.0/8"), &list),
            "the port was part of the entry"
        );
        assert!(!within(&p("pypi.org,example.org"), &list));
        assert!(!within(&public, &list) && !within(&public, &off) && !within(&list, &off));
        assert!(within(&list, &host) && !within(&host, &public) && within(&host, &host));
        // `public` never lets a private, link-local or own address through;
        // an allow list naming one would.
        assert!(within(&p("pypi.org,93.184.216.0/24"), &public));
        for beyond in [
            "10.0.0.0/8",
            "169.254.169.254",
            "127.0.0.1",
            "0.0.0.0/0",
            "192.0.2.7",
        ] {
            assert!(!within(&p(beyond), &public), "{beyond}");
        }
        assert!(parse_flag(" ").is_err() && parse_flag("exa mple").is_err());
        assert_eq!(flag_text(&list), "pypi.org,10.0.0.0/8:443");
    }

    /// Regression: an entry was within the person's allow list only when
    /// the list held it exactly, so a script narrowing `10.0.0.0/8` to
    /// one of its addresses, or `*.pythonhosted.org` to one name, was
    /// refused as widening. (And an IPv4-mapped range kept its IPv6
    /// prefix on the IPv4 address: `::ffff:10.1.2.3/96`, all of IPv4,
    /// read as `10.1.2.3/96`.)
    #[test]
    fn a_narrower_entry_is_within_a_wider_one_of_the_persons_allow_list() {
        let p = |v: &str| parse_flag(v).unwrap();
        let list = p("10.0.0.0/8,*.pythonhosted.org,pypi.org:443");
        let within = |a: &str| within(&p(a), &list, &[]);
        for narrower in [
            "10.1.2.3",
            "10.1.0.0/16:5432",
            "files.pythonhosted.org",
            "*.eu.pythonhosted.org",
            "pypi.org:443",
        ] {
            assert!(within(narrower), "{narrower}");
        }
        for wider in [
            "10.0.0.0/7",
            "11.0.0.1",
            "pythonhosted.org",
            "*.org",
            "pypi.org",
            "pypi.org:80",
            "::ffff:10.1.2.3/96",
            "::ffff:10.1.2.3/90",
        ] {
            assert!(!within(wider), "{wider}");
        }
        assert!(within("::ffff:10.1.2.3/120"), "10.1.2.0/24");
    }
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn allow_entries_parse_or_say_why_not() {
        for ok in [
            "pypi.org",
            "*.pythonhosted.org",
            "10.1.2.3",
            "10.0.0.0/8",
            "host:8080",
            "[fd00::1]:443",
            "fd00::/8",
            "PyPI.org.",
        ] {
            AllowRule::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for (bad, why) in [
            ("", "empty"),
            ("  ", "empty"),
            ("10.0.0.0/33", "prefix"),
            ("10.0.0.0/x", "prefix"),
            ("host:0", "out of range"),
            ("host:70000", "out of range"),
            ("host:http", "not a number"),
            ("a..b", "label"),
            ("*.", "host name"),
            ("ex ample.org", "label"),
            (":80", "no host"),
            ("a*.org", "label"),
        ] {
            let e = AllowRule::parse(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }

    #[test]
    fn the_default_refuses_what_is_not_public() {
        let p = NetworkPolicy::Public;
        for refused in [
            "127.0.0.1",
            "10.2.3.4",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!decide(&p, None, ip(refused), 80, &[]).allowed, "{refused}");
        }
        assert!(decide(&p, None, ip("203.0.113.5"), 80, &[]).allowed);
        let own = decide(&p, None, ip("203.0.113.5"), 80, &[ip("203.0.113.5")]);
        assert_eq!(own.rule, "default: the host's own address");
    }

    #[test]
    fn an_allow_list_lets_through_only_what_it_lists() {
        let p = NetworkPolicy::allow(&[
            "pypi.org".into(),
            "*.pythonhosted.org".into(),
            "10.1.2.3".into(),
            "host:8080".into(),
        ])
        .unwrap();
        let pub_ip = ip("203.0.113.9");
        assert!(decide(&p, Some("pypi.org"), pub_ip, 443, &[]).allowed);
        assert!(decide(&p, Some("files.pythonhosted.org"), pub_ip, 443, &[]).allowed);
        assert!(!decide(&p, Some("pythonhosted.org"), pub_ip, 443, &[]).allowed);
        assert!(!decide(&p, Some("evil.org"), pub_ip, 443, &[]).allowed);
        assert!(!decide(&p, None, pub_ip, 443, &[]).allowed);
        // A listed private address is allowed; a name resolving to an
        // unlisted private one is not.
        assert!(decide(&p, None, ip("10.1.2.3"), 80, &[]).allowed);
        let r = decide(&p, Some("pypi.org"), ip("127.0.0.1"), 443, &[]);
        assert!(!r.allowed && r.rule.contains("loopback"), "{r:?}");
        assert!(decide(&p, Some("host"), pub_ip, 8080, &[]).allowed);
        assert!(!decide(&p, Some("host"), pub_ip, 8081, &[]).allowed);
        // Only listed names are resolved at all.
        assert!(refuse_before_resolving(&p, "pypi.org", 443).is_none());
        assert!(refuse_before_resolving(&p, "a.files.pythonhosted.org", 1).is_none());
        assert!(refuse_before_resolving(&p, "internal.corp", 80).is_some());
        assert!(refuse_before_resolving(&p, "host", 8081).is_some());
    }
}
