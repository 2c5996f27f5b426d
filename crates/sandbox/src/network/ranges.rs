//! Address ranges: CIDRs of allow lists, and the ranges the default
//! policy refuses (not the public internet).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// An address range (`10.0.0.0/8`; a bare address is a /32 or /128).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    /// Parse `addr` or `addr/prefix`.
    pub fn parse(s: &str) -> Result<Cidr, String> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => match p.parse::<u8>() {
                Ok(n) if n <= max => n,
                _ => return Err(format!("prefix `/{p}` is not 0 to {max}")),
            },
        };
        // An IPv4-mapped IPv6 range is the IPv4 range it maps (its
        // prefix less the 96 bits of the mapping), as connections to
        // mapped addresses are matched as IPv4; one wider than the mapping
        // stays IPv6.
        Ok(match canonical(addr) {
            IpAddr::V4(v4) if addr.is_ipv6() && prefix >= 96 => Cidr {
                addr: IpAddr::V4(v4),
                prefix: prefix - 96,
            },
            IpAddr::V4(_) if addr.is_ipv6() => Cidr { addr, prefix },
            a => Cidr { addr: a, prefix },
        })
    }

    /// Whether this range and `other` share an address.
    pub fn overlaps(&self, other: &Cidr) -> bool {
        let shorter = if self.prefix <= other.prefix {
            self
        } else {
            other
        };
        let longer = if self.prefix <= other.prefix {
            other
        } else {
            self
        };
        shorter.contains(longer.addr)
    }

    /// Whether `a` is in this range.
    pub fn contains(&self, a: IpAddr) -> bool {
        match (self.addr, canonical(a)) {
            (IpAddr::V4(n), IpAddr::V4(a)) => {
                same_prefix(n.to_bits() as u128, a.to_bits() as u128, 32, self.prefix)
            }
            (IpAddr::V6(n), IpAddr::V6(a)) => {
                same_prefix(n.to_bits(), a.to_bits(), 128, self.prefix)
            }
            _ => false,
        }
    }
}

fn same_prefix(n: u128, a: u128, bits: u8, prefix: u8) -> bool {
    if prefix == 0 {
        return true;
    }
    let shift = bits - prefix;
    (n >> shift) == (a >> shift)
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
pub fn canonical(a: IpAddr) -> IpAddr {
    match a {
        IpAddr::V6(v6) => v6
            .to_ipv4_mapped()
            .map(IpAddr::V4)
            .unwrap_or(IpAddr::V6(v6)),
        v4 => v4,
    }
}

/// The ranges the default policy refuses, with what each is.
const V4: &[(Ipv4Addr, u8, &str)] = &[
    (Ipv4Addr::new(0, 0, 0, 0), 8, "in 0.0.0.0/8 (this network)"),
    (Ipv4Addr::new(10, 0, 0, 0), 8, "private (10.0.0.0/8)"),
    (
        Ipv4Addr::new(100, 64, 0, 0),
        10,
        "shared address space (100.64.0.0/10, CGNAT)",
    ),
    (Ipv4Addr::new(127, 0, 0, 0), 8, "loopback (127.0.0.0/8)"),
    (
        Ipv4Addr::new(169, 254, 0, 0),
        16,
        "link-local (169.254.0.0/16, the cloud metadata endpoint)",
    ),
    (Ipv4Addr::new(172, 16, 0, 0), 12, "private (172.16.0.0/12)"),
    (
        Ipv4Addr::new(192, 168, 0, 0),
        16,
        "private (192.168.0.0/16)",
    ),
    (Ipv4Addr::new(224, 0, 0, 0), 4, "multicast (224.0.0.0/4)"),
    (
        Ipv4Addr::new(240, 0, 0, 0),
        4,
        "reserved or broadcast (240.0.0.0/4)",
    ),
];

const V6: &[(Ipv6Addr, u8, &str)] = &[
    (Ipv6Addr::UNSPECIFIED, 128, "the unspecified address (::)"),
    (Ipv6Addr::LOCALHOST, 128, "loopback (::1)"),
    (
        Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0),
        10,
        "link-local (fe80::/10)",
    ),
    (
        Ipv6Addr::new(0xfc00, 0, 0, 0, 0, 0, 0, 0),
        7,
        "private (fc00::/7)",
    ),
    (
        Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0),
        8,
        "multicast (ff00::/8)",
    ),
];

/// IPv6 ranges that reach IPv4 addresses through a translator or relay:
/// NAT64's well-known prefix (RFC 6052), its local-use prefix (RFC 8215),
/// 6to4 (RFC 3056), and the IPv4-compatible (`::a.b.c.d`, RFC 4291) and
/// IPv4-translated (`::ffff:0:a.b.c.d`, RFC 2765) forms.
const TO_V4: [(Ipv6Addr, u8); 5] = [
    (Ipv6Addr::new(0x64, 0xff9b, 0, 0, 0, 0, 0, 0), 96),
    (Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 0), 48),
    (Ipv6Addr::new(0x2002, 0, 0, 0, 0, 0, 0, 0), 16),
    (Ipv6Addr::UNSPECIFIED, 96),
    (Ipv6Addr::new(0, 0, 0, 0, 0xffff, 0, 0, 0), 96),
];

/// Where the IPv4 address sits in each of [`TO_V4`]'s ranges (the bit
/// it starts at), for the ranges that embed one where rfs can read it.
const V4_AT: [(usize, u8); 4] = [(0, 96), (2, 16), (3, 96), (4, 96)];

/// The IPv4 address `v6` reaches through NAT64's well-known prefix,
/// 6to4, or as an IPv4-compatible or -translated address; `None` for
/// other addresses.
fn embedded_v4(v6: Ipv6Addr) -> Option<Ipv4Addr> {
    let n = v6.to_bits();
    V4_AT.iter().find_map(|&(i, at)| {
        let (net, prefix) = TO_V4[i];
        Cidr {
            addr: IpAddr::V6(net),
            prefix,
        }
        .contains(IpAddr::V6(v6))
        .then(|| Ipv4Addr::from((n >> (96 - at as u32)) as u32))
    })
}

/// The IPv4 ranges the IPv6 range `net` reaches through a translator or
/// relay (see [`TO_V4`]): the part of IPv4 it embeds, or all of it when
/// it holds a whole translating prefix (or NAT64's local-use one, whose
/// mapping rfs cannot see).
fn reached_v4(net: &Cidr) -> Vec<Cidr> {
    let IpAddr::V6(v6) = net.addr else {
        return vec![];
    };
    let all = Cidr {
        addr: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        prefix: 0,
    };
    let mut out = vec![];
    for (i, &(p, plen)) in TO_V4.iter().enumerate() {
        if !net.overlaps(&Cidr {
            addr: IpAddr::V6(p),
            prefix: plen,
        }) {
            continue;
        }
        match V4_AT.iter().find(|(j, _)| *j == i) {
            Some(&(_, at)) if net.prefix > plen => {
                let v4 = (v6.to_bits() >> (96 - at as u32)) as u32;
                let prefix = net.prefix.saturating_sub(at).min(32);
                let mask = if prefix == 0 {
                    0
                } else {
                    u32::MAX << (32 - prefix)
                };
                out.push(Cidr {
                    addr: IpAddr::V4(Ipv4Addr::from(v4 & mask)),
                    prefix,
                });
            }
            _ => out.push(all),
        }
    }
    out
}

/// What `a` is when the default policy refuses it; `None`: public. An
/// address that reaches an IPv4 address through NAT64 or 6to4 is that
/// IPv4 address; one of NAT64's local-use prefix is refused.
pub fn refused(a: IpAddr) -> Option<&'static str> {
    let a = canonical(a);
    if let IpAddr::V6(v6) = a {
        if v6.is_unspecified() || v6.is_loopback() {
            return V6.iter().find(|(n, _, _)| *n == v6).map(|(_, _, w)| *w);
        }
        if let Some(v4) = embedded_v4(v6) {
            return refused(IpAddr::V4(v4));
        }
        let local = Cidr {
            addr: IpAddr::V6(TO_V4[1].0),
            prefix: TO_V4[1].1,
        };
        if local.contains(a) {
            return Some(
                "NAT64 local-use (64:ff9b:1::/48, reaching IPv4 addresses rfs cannot see)",
            );
        }
    }
    let hit = |net: IpAddr, prefix: u8| Cidr { addr: net, prefix }.contains(a);
    V4.iter()
        .find(|(n, p, _)| hit(IpAddr::V4(*n), *p))
        .map(|(_, _, w)| *w)
        .or_else(|| {
            V6.iter()
                .find(|(n, p, _)| hit(IpAddr::V6(*n), *p))
                .map(|(_, _, w)| *w)
        })
}

/// Whether `net` shares an address with a range the default policy
/// refuses (loopback, link-local, private, ...) or with `own`, the host's
/// own addresses: whether it reaches more than the public internet.
pub fn beyond_public(net: &Cidr, own: &[IpAddr]) -> bool {
    let refused = V4
        .iter()
        .map(|(n, p, _)| (IpAddr::V4(*n), *p))
        .chain(V6.iter().map(|(n, p, _)| (IpAddr::V6(*n), *p)));
    // A range reaching IPv4 through a translator may reach any of it.
    let to_v4 = TO_V4.iter().map(|(n, p)| (IpAddr::V6(*n), *p));
    refused
        .into_iter()
        .chain(to_v4)
        .any(|(addr, prefix)| net.overlaps(&Cidr { addr, prefix }))
        || own.iter().any(|o| net.contains(canonical(*o)))
}

/// What of the host itself `net` covers — loopback, link-local (the
/// cloud metadata endpoint), "this network", multicast and reserved
/// ranges, or one of `own`, the host's own addresses — when it covers
/// any. Unlike a private range (a test service a proof lists), these
/// are the machine rfs runs on: an allow list may name them only when
/// the person running rfs allowed reaching the host.
pub fn covers_host(net: &Cidr, own: &[IpAddr]) -> Option<String> {
    const HOST_V4: &[(Ipv4Addr, u8)] = &[
        (Ipv4Addr::new(0, 0, 0, 0), 8),
        (Ipv4Addr::new(127, 0, 0, 0), 8),
        (Ipv4Addr::new(169, 254, 0, 0), 16),
        (Ipv4Addr::new(224, 0, 0, 0), 4),
        (Ipv4Addr::new(240, 0, 0, 0), 4),
    ];
    const HOST_V6: &[(Ipv6Addr, u8)] = &[
        (Ipv6Addr::UNSPECIFIED, 128),
        (Ipv6Addr::LOCALHOST, 128),
        (Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0), 10),
        (Ipv6Addr::new(0xff00, 0, 0, 0, 0, 0, 0, 0), 8),
    ];
    let ranges = HOST_V4
        .iter()
        .map(|(a, p)| (IpAddr::V4(*a), *p))
        .chain(HOST_V6.iter().map(|(a, p)| (IpAddr::V6(*a), *p)));
    for (addr, prefix) in ranges {
        if net.overlaps(&Cidr { addr, prefix }) {
            return Some(refused(addr).unwrap_or("the host").to_owned());
        }
    }
    if let Some(o) = own.iter().find(|o| net.contains(**o)) {
        return Some(format!("the host's own address {o}"));
    }
    // An IPv6 range reaching the host's IPv4 through NAT64, 6to4 or an
    // IPv4-compatible or -translated form names it as much.
    reached_v4(net).iter().find_map(|v4| {
        covers_host(v4, own).map(|what| format!("{what} (as {}/{})", net.addr, net.prefix))
    })
}

/// The host's own addresses (every interface's), which the default
/// policy refuses like loopback: a service bound to one is the host's.
pub fn own_addresses() -> Vec<IpAddr> {
    let mut out = vec![];
    let mut head: *mut libc::ifaddrs = std::ptr::null_mut();
    // SAFETY: getifaddrs fills a list we walk read-only and free once.
    unsafe {
        if libc::getifaddrs(&mut head) != 0 {
            return out;
        }
        let mut cur = head;
        while !cur.is_null() {
            let sa = (*cur).ifa_addr;
            if !sa.is_null() {
                match (*sa).sa_family as i32 {
                    libc::AF_INET => {
                        let sin = &*(sa as *const libc::sockaddr_in);
                        out.push(IpAddr::V4(Ipv4Addr::from(u32::from_be(
                            sin.sin_addr.s_addr,
                        ))));
                    }
                    libc::AF_INET6 => {
                        let sin6 = &*(sa as *const libc::sockaddr_in6);
                        out.push(IpAddr::V6(Ipv6Addr::from(sin6.sin6_addr.s6_addr)));
                    }
                    _ => {}
                }
            }
            cur = (*cur).ifa_next;
        }
        libc::freeifaddrs(head);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An allow-list entry names the host itself when it covers the
    /// host's loopback, link-local (metadata), "this network" or own
    /// addresses; private and public ranges do not.
    #[test]
    fn what_of_the_host_an_entry_covers() {
        let own: Vec<IpAddr> = vec!["10.9.8.7".parse().unwrap()];
        let covers = |s: &str| covers_host(&Cidr::parse(s).unwrap(), &own);
        for host in [
            "127.0.0.1",
            "169.254.169.254",
            "0.0.0.0/0",
            "::1",
            "::/0",
            "fe80::1",
            "10.9.8.7",
            "10.0.0.0/8",
            "::ffff:127.0.0.1",
        ] {
            assert!(covers(host).is_some(), "{host}");
        }
        for not in ["10.1.2.3", "192.168.0.0/16", "203.0.113.0/24", "fd00::/8"] {
            assert_eq!(covers(not), None, "{not}");
        }
        assert!(covers("169.254.169.254").unwrap().contains("metadata"));
        assert!(covers("10.0.0.0/8").unwrap().contains("10.9.8.7"));
    }

    /// A script alone could allow-list the host through NAT64, 6to4 or an
    /// IPv4-compatible or -translated form (`64:ff9b::/96`, `2002::/16`,
    /// `::7f00:1`): through a NAT64 gateway `64:ff9b::a9fe:a9fe` reached
    /// the metadata endpoint. What such an entry reaches of IPv4 is judged
    /// as IPv4.
    #[test]
    fn an_allow_entry_reaching_the_host_through_a_translated_form_names_the_host() {
        let own: Vec<IpAddr> = vec!["10.9.8.7".parse().unwrap()];
        let covers = |s: &str| covers_host(&Cidr::parse(s).unwrap(), &own);
        for host in [
            "64:ff9b::/96",
            "64:ff9b::/64",
            "2002::/16",
            "64:ff9b::7f00:1",
            "64:ff9b::a9fe:a9fe",
            "2002:a9fe:a9fe::/48",
            "::7f00:1",
            "::ffff:0:a9fe:a9fe",
            "64:ff9b::a09:807",
            "64:ff9b:1::/48",
            "::/0",
        ] {
            assert!(covers(host).is_some(), "{host} reaches the host");
        }
        for public in [
            "64:ff9b::808:808",
            "2002:808:808::/48",
            "2001:db8::/32",
            "::ffff:0:808:808",
        ] {
            assert_eq!(covers(public), None, "{public}");
        }
        for (a, v4) in [
            ("::7f00:1", "127.0.0.1"),
            ("::ffff:0:a9fe:a9fe", "169.254.169.254"),
            ("64:ff9b::a00:1", "10.0.0.1"),
        ] {
            assert_eq!(
                refused(a.parse().unwrap()),
                refused(v4.parse().unwrap()),
                "{a}"
            );
        }
        assert_eq!(refused("::1".parse().unwrap()), Some("loopback (::1)"));
    }

    #[test]
    fn cidrs_contain_their_addresses_only() {
        let c = Cidr::parse("10.0.0.0/8").unwrap();
        assert!(c.contains("10.255.0.1".parse().unwrap()));
        assert!(!c.contains("11.0.0.1".parse().unwrap()));
        assert!(c.contains("::ffff:10.0.0.1".parse().unwrap()));
        let one = Cidr::parse("fd00::1").unwrap();
        assert_eq!(one.prefix, 128);
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("1.2.3.4".parse().unwrap()));
        assert!(Cidr::parse("::/129").is_err());
    }

    /// Regression: an IPv6 address reaching an IPv4 one through NAT64
    /// (`64:ff9b::/96`) or 6to4 (`2002::/16`) counted as public, so on a
    /// host with a NAT64 gateway the default reached `10.0.0.1` as
    /// `64:ff9b::a00:1`.
    #[test]
    fn nat64_and_6to4_addresses_are_the_ipv4_address_they_reach() {
        let r = |s: &str| refused(s.parse().unwrap());
        assert!(r("64:ff9b::a00:1").unwrap().contains("private"));
        assert!(r("64:ff9b::a9fe:a9fe").unwrap().contains("metadata"));
        assert!(r("2002:7f00:1::1").unwrap().contains("loopback"));
        assert!(r("64:ff9b:1::a00:1").is_some());
        assert_eq!(r("64:ff9b::cb00:7105"), None, "203.0.113.5");
        assert_eq!(r("2002:cb00:7105::1"), None, "203.0.113.5");
        for net in ["64:ff9b::/96", "64:ff9b::a00:0/120", "2002::/16", "::/0"] {
            assert!(beyond_public(&Cidr::parse(net).unwrap(), &[]), "{net}");
        }
    }

    #[test]
    fn documentation_addresses_are_public_to_the_default() {
        assert_eq!(refused("203.0.113.7".parse().unwrap()), None);
        assert!(refused("127.0.0.1".parse().unwrap())
            .unwrap()
            .contains("loopback"));
    }
}
