//! Who a request comes from, as per-client limits count it.
//!
//! A client's address is the peer's, or — when the peer is one of
//! `[server] trusted_proxies` — the one that proxy names in
//! `X-Forwarded-For` (the server rewrites the request's `ConnectInfo` once,
//! so everything downstream sees the client, not the balancer). Limits then
//! key on [`client_key`]: one IPv4 address, or one IPv6 /64 — a single
//! host is usually handed a whole /64, so keying the full address would let
//! one client walk around every limit by changing its low bits.

use std::net::{IpAddr, Ipv6Addr};

/// The key per-client limits count `ip` under: an IPv4 address as it is
/// (an IPv4-mapped IPv6 address as the IPv4 one), an IPv6 address with its
/// low 64 bits cleared.
pub fn client_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_is_keyed_by_its_64_and_mapped_ipv4_as_ipv4() {
        let a: IpAddr = "2001:db8:1:2:aaaa::1".parse().unwrap();
        let b: IpAddr = "2001:db8:1:2:ffff:1:2:3".parse().unwrap();
        let other: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(client_key(a), client_key(b));
        assert_ne!(client_key(a), client_key(other));
        assert_eq!(client_key(a).to_string(), "2001:db8:1:2::");
        let mapped: IpAddr = "::ffff:10.0.0.7".parse().unwrap();
        assert_eq!(client_key(mapped), "10.0.0.7".parse::<IpAddr>().unwrap());
        let v4: IpAddr = "192.0.2.9".parse().unwrap();
        assert_eq!(client_key(v4), v4);
    }
}
