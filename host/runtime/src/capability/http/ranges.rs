//! The address ranges a guest reaches only through a grant that names the
//! address literally: one table per family, after IANA's special-purpose
//! address registries (RFC 6890 and its updates), plus multicast, the
//! deprecated site-local block and, for IPv6, everything outside global
//! unicast.
//!
//! An address is judged by the most specific row that holds it. Each family
//! has a `/0` row, so every address has one: IPv4 is reachable unless a row
//! says otherwise; IPv6 is refused outside `2000::/3`, the only block IANA
//! has allocated for global unicast.
//!
//! Four IPv6 blocks carry an IPv4 address. Where the packet ends up at that
//! IPv4 address, the IPv4 address decides ([`Verdict::Embedded`]):
//! - `::ffff:0:0/96` (IPv4-mapped): a dual-stack socket connects to the
//!   IPv4 address itself.
//! - `64:ff9b::/96` (NAT64): a translator forwards to the IPv4 address.
//!   Refusing the whole prefix would cut an IPv6-only host behind DNS64,
//!   which answers such an address for every IPv4-only name, off the IPv4
//!   internet; the embedded address gets exactly the IPv4 verdict instead.
//! - `2002::/16` (6to4): the packet is tunnelled to the 6to4 router at the
//!   IPv4 address.
//!
//! The others are refused whole: `::/96` (IPv4-compatible, deprecated since
//! 2006), `64:ff9b:1::/48` (local-use translation: where the IPv4 address
//! sits depends on the operator's prefix length) and Teredo `2001::/32`
//! (the client's address is obfuscated, and a Teredo tunnel is local).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::{Ipv4Net, Ipv6Net};

/// What a range means for a guest's request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Reachable by name.
    Allowed,
    /// Reachable only through a grant naming the address literally.
    Refused,
    /// The IPv4 address in the low 32 bits (bits 16..48 for 6to4) decides.
    Embedded,
}

use Verdict::{Allowed, Embedded, Refused};

/// One row of a table: a block, its registry name, and its verdict.
pub(super) struct Range<N> {
    pub(super) net: N,
    pub(super) name: &'static str,
    pub(super) verdict: Verdict,
}

const fn v4(
    a: u8,
    b: u8,
    c: u8,
    d: u8,
    len: u8,
    name: &'static str,
    verdict: Verdict,
) -> Range<Ipv4Net> {
    Range {
        net: Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len),
        name,
        verdict,
    }
}

const fn v6(s: [u16; 8], len: u8, name: &'static str, verdict: Verdict) -> Range<Ipv6Net> {
    Range {
        net: Ipv6Net::new_assert(
            Ipv6Addr::new(s[0], s[1], s[2], s[3], s[4], s[5], s[6], s[7]),
            len,
        ),
        name,
        verdict,
    }
}

/// IPv4: IANA's special-purpose registry, and multicast.
pub(super) const V4: &[Range<Ipv4Net>] = &[
    v4(0, 0, 0, 0, 0, "public", Allowed),
    v4(0, 0, 0, 0, 8, "this network", Refused),
    v4(10, 0, 0, 0, 8, "private-use", Refused),
    // Alibaba Cloud's metadata service is 100.100.100.200.
    v4(
        100,
        64,
        0,
        0,
        10,
        "shared address space (carrier-grade NAT)",
        Refused,
    ),
    v4(127, 0, 0, 0, 8, "loopback", Refused),
    // The cloud metadata services (169.254.169.254) live here.
    v4(169, 254, 0, 0, 16, "link-local", Refused),
    v4(172, 16, 0, 0, 12, "private-use", Refused),
    // Includes 192.0.0.170-171 (NAT64 discovery) and DS-Lite's 192.0.0.0/29.
    v4(192, 0, 0, 0, 24, "IETF protocol assignments", Refused),
    v4(192, 0, 2, 0, 24, "documentation (TEST-NET-1)", Refused),
    v4(
        192,
        88,
        99,
        0,
        24,
        "6to4 relay anycast (deprecated)",
        Refused,
    ),
    v4(192, 168, 0, 0, 16, "private-use", Refused),
    v4(198, 18, 0, 0, 15, "benchmarking", Refused),
    v4(198, 51, 100, 0, 24, "documentation (TEST-NET-2)", Refused),
    v4(203, 0, 113, 0, 24, "documentation (TEST-NET-3)", Refused),
    v4(224, 0, 0, 0, 4, "multicast", Refused),
    v4(240, 0, 0, 0, 4, "reserved", Refused),
    v4(255, 255, 255, 255, 32, "limited broadcast", Refused),
];

/// IPv6: IANA's special-purpose registry, multicast, site-local, and the
/// space outside global unicast.
pub(super) const V6: &[Range<Ipv6Net>] = &[
    v6([0, 0, 0, 0, 0, 0, 0, 0], 0, "not global unicast", Refused),
    v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, "global unicast", Allowed),
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, "unspecified", Refused),
    v6([0, 0, 0, 0, 0, 0, 0, 1], 128, "loopback", Refused),
    v6(
        [0, 0, 0, 0, 0, 0, 0, 0],
        96,
        "IPv4-compatible (deprecated)",
        Refused,
    ),
    v6([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "IPv4-mapped", Embedded),
    v6(
        [0x64, 0xff9b, 0, 0, 0, 0, 0, 0],
        96,
        "IPv4/IPv6 translation (NAT64)",
        Embedded,
    ),
    v6(
        [0x64, 0xff9b, 1, 0, 0, 0, 0, 0],
        48,
        "local-use IPv4/IPv6 translation",
        Refused,
    ),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "discard-only", Refused),
    v6([0x100, 0, 0, 1, 0, 0, 0, 0], 64, "dummy prefix", Refused),
    // Holds a few anycast services (PCP, AMT, AS112) no guest needs.
    v6(
        [0x2001, 0, 0, 0, 0, 0, 0, 0],
        23,
        "IETF protocol assignments",
        Refused,
    ),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, "Teredo", Refused),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, "benchmarking", Refused),
    v6([0x2001, 0x20, 0, 0, 0, 0, 0, 0], 28, "ORCHIDv2", Refused),
    v6(
        [0x2001, 0xdb8, 0, 0, 0, 0, 0, 0],
        32,
        "documentation",
        Refused,
    ),
    v6([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "6to4", Embedded),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, "documentation", Refused),
    v6(
        [0x5f00, 0, 0, 0, 0, 0, 0, 0],
        16,
        "segment routing (SRv6) SIDs",
        Refused,
    ),
    // AWS's metadata service answers at fd00:ec2::254.
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "unique-local", Refused),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, "link-local", Refused),
    v6(
        [0xfec0, 0, 0, 0, 0, 0, 0, 0],
        10,
        "site-local (deprecated)",
        Refused,
    ),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, "multicast", Refused),
];

/// The most specific row of the IPv4 table that holds `ip`.
fn row_v4(ip: Ipv4Addr) -> &'static Range<Ipv4Net> {
    V4.iter()
        .filter(|r| r.net.contains(&ip))
        .max_by_key(|r| r.net.prefix_len())
        .expect("the table has a /0 row")
}

/// The most specific row of the IPv6 table that holds `ip`.
fn row_v6(ip: Ipv6Addr) -> &'static Range<Ipv6Net> {
    V6.iter()
        .filter(|r| r.net.contains(&ip))
        .max_by_key(|r| r.net.prefix_len())
        .expect("the table has a /0 row")
}

/// The IPv4 address an [`Embedded`] row's address carries.
fn embedded_v4(ip: Ipv6Addr, net: &Ipv6Net) -> Ipv4Addr {
    let bits = u128::from(ip);
    let v4 = if net.addr().segments()[0] == 0x2002 {
        (bits >> 80) as u32
    } else {
        bits as u32
    };
    Ipv4Addr::from(v4)
}

/// Why `ip` may be reached only through a grant that names it: the range
/// it falls in (for the log), or `None` when a granted name may lead there.
pub(super) fn refusal(ip: IpAddr) -> Option<String> {
    match ip {
        IpAddr::V4(v4) => {
            let r = row_v4(v4);
            (r.verdict == Refused).then(|| format!("{}, {}", r.name, r.net))
        }
        IpAddr::V6(v6) => {
            let r = row_v6(v6);
            match r.verdict {
                Allowed => None,
                Refused => Some(format!("{}, {}", r.name, r.net)),
                Embedded => {
                    let inner = embedded_v4(v6, &r.net);
                    refusal(IpAddr::V4(inner)).map(|why| format!("{} of {inner}: {why}", r.name))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn internal(ip: &str) -> bool {
        refusal(ip.parse().unwrap()).is_some()
    }

    /// Every row: its first and last address get the row's verdict.
    #[test]
    fn each_row_holds_its_own_verdict() {
        for r in V4 {
            for ip in [r.net.network(), r.net.broadcast()] {
                let got = row_v4(ip);
                // A more specific row may hold the edge (e.g. 0.0.0.0/0's).
                if got.net == r.net {
                    assert_eq!(
                        internal(&ip.to_string()),
                        r.verdict == Refused,
                        "{ip} ({})",
                        r.name
                    );
                }
            }
        }
        for r in V6 {
            if r.verdict == Embedded {
                continue;
            }
            for ip in [r.net.network(), r.net.broadcast()] {
                if row_v6(ip).net == r.net {
                    assert_eq!(
                        internal(&ip.to_string()),
                        r.verdict == Refused,
                        "{ip} ({})",
                        r.name
                    );
                }
            }
        }
    }

    /// One address inside each refused IPv4 range, and a neighbour outside.
    #[test]
    fn v4_ranges_and_their_neighbours() {
        let cases = [
            ("0.1.2.3", true, "1.0.0.1", false),
            ("10.1.2.3", true, "11.0.0.1", false),
            ("100.64.0.1", true, "100.63.255.255", false),
            ("100.100.100.200", true, "100.128.0.1", false),
            ("127.0.0.1", true, "128.0.0.1", false),
            ("169.254.169.254", true, "169.255.0.1", false),
            ("172.16.0.1", true, "172.32.0.1", false),
            ("172.31.255.254", true, "172.15.255.255", false),
            ("192.0.0.170", true, "192.0.1.1", false),
            ("192.0.2.1", true, "192.0.3.1", false),
            ("192.88.99.1", true, "192.88.98.1", false),
            ("192.168.1.1", true, "192.169.0.1", false),
            ("198.18.0.1", true, "198.17.255.255", false),
            ("198.19.255.254", true, "198.20.0.1", false),
            ("198.51.100.1", true, "198.51.101.1", false),
            ("203.0.113.1", true, "203.0.114.1", false),
            ("224.0.0.1", true, "223.255.255.254", false),
            ("240.0.0.1", true, "93.184.216.34", false),
            ("255.255.255.255", true, "8.8.8.8", false),
        ];
        for (inside, yes, outside, no) in cases {
            assert_eq!(internal(inside), yes, "{inside}");
            assert_eq!(internal(outside), no, "{outside}");
        }
    }

    /// One address inside each refused IPv6 range, and a neighbour outside.
    #[test]
    fn v6_ranges_and_their_neighbours() {
        let cases = [
            ("::", true, "2606:4700::1111", false),
            ("::1", true, "2a00:1450:4001::200e", false),
            ("::a00:1", true, "2000::1", false),
            ("::808:808", true, "2001:200::1", false),
            ("64:ff9b:1::a00:1", true, "64:ff9b::808:808", false),
            ("100::1", true, "2400:cb00::1", false),
            ("100:0:0:1::1", true, "2600::1", false),
            ("2001::1", true, "2001:200::1", false),
            ("2001:2::1", true, "2001:4860:4860::8888", false),
            ("2001:1::1", true, "2001:4860::1", false),
            ("2001:20::1", true, "2001:4860::2", false),
            ("2001:db8::1", true, "2001:db9::1", false),
            ("3fff::1", true, "3ffe:ffff::1", false),
            ("5f00::1", true, "2a01::1", false),
            ("fc00::1", true, "2c0f::1", false),
            ("fd00:ec2::254", true, "2c0f::2", false),
            ("fe80::1", true, "2c0f::3", false),
            ("fec0::1", true, "2c0f::4", false),
            ("ff02::1", true, "2c0f::5", false),
            ("4000::1", true, "3fff:1000::1", false),
        ];
        for (inside, yes, outside, no) in cases {
            assert_eq!(internal(inside), yes, "{inside}");
            assert_eq!(internal(outside), no, "{outside}");
        }
    }

    /// Mapped, NAT64 and 6to4 addresses get their IPv4 address's verdict.
    #[test]
    fn embedded_ipv4_addresses_decide() {
        for ip in [
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::7f00:1",
            "64:ff9b::6440:1",
            "2002:a00:1::",
            "2002:a9fe:a9fe::1",
            "2002:7f00:1:1::1",
            "2002:c0a8:101::",
        ] {
            assert!(internal(ip), "{ip}");
        }
        for ip in ["::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1"] {
            assert!(!internal(ip), "{ip}");
        }
        let why = refusal("64:ff9b::a00:1".parse().unwrap()).unwrap();
        assert!(
            why.contains("NAT64") && why.contains("10.0.0.1") && why.contains("private-use"),
            "{why}"
        );
    }
}
