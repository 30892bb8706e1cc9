//! Who the client is when Hangar stands behind a balancer: the peer's
//! address, unless the peer is one of `[server] trusted_proxies`, in which
//! case the nearest address in `X-Forwarded-For` that is not itself a
//! trusted proxy — read from the right, and never past a hop that is not an
//! address (a client may write anything at the left end of the header). The request's `ConnectInfo` is rewritten to it once, so
//! rate limits, the auth-failure limiter, per-client caps and access lines
//! all see the client, not the balancer. From anyone else the header is
//! ignored: a client cannot name itself someone else.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;

use hangar_config::TrustedProxy;

pub struct Proxies(pub Vec<TrustedProxy>);

impl Proxies {
    fn trusted(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        self.0.iter().any(|p| p.contains(ip))
    }

    /// The client behind `peer`, as the trusted chain tells it.
    ///
    /// Each proxy appends the address it received from, so the header is
    /// read from the right: past the trusted proxies, to the first address
    /// the chain vouches for. A hop that is not an address (`junk`,
    /// `unknown`, an obfuscated name) ends the chain there: whatever stands
    /// left of it was written by someone no trusted proxy vouches for, so
    /// the client is the last trusted hop read (the proxy that received the
    /// junk), never an address from beyond it.
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
        if !self.trusted(peer.ip()) {
            return peer;
        }
        // Several header lines are one list, in order (RFC 9110 5.3); a line
        // that is not text is a hop that cannot be read.
        let hops: Vec<Option<IpAddr>> = headers
            .get_all("x-forwarded-for")
            .iter()
            .flat_map(|v| match v.to_str() {
                Ok(v) => v.split(',').map(parse_hop).collect::<Vec<_>>(),
                Err(_) => vec![None],
            })
            .collect();
        let mut vouched = peer;
        for hop in hops.iter().rev() {
            match hop {
                Some(ip) if self.trusted(*ip) => vouched = SocketAddr::new(*ip, 0),
                Some(ip) => return SocketAddr::new(*ip, 0),
                None => break,
            }
        }
        // Every hop read was a trusted proxy (or there was none): the
        // leftmost of them, else the peer.
        vouched
    }
}

/// One hop of `X-Forwarded-For` as proxies write it: `192.0.2.1`,
/// `192.0.2.1:4711`, `2001:db8::1`, `[2001:db8::1]` or `[2001:db8::1]:4711`.
/// Anything else is not an address.
/// An IPv4-mapped IPv6 address is read as the IPv4 one, so a client is one
/// client whichever way a proxy wrote it.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    let hop = hop.trim();
    let ip = hop
        .parse::<IpAddr>()
        .ok()
        .or_else(|| hop.parse::<SocketAddr>().ok().map(|a| a.ip()))
        .or_else(|| {
            hop.strip_prefix('[')
                .and_then(|h| h.strip_suffix(']'))
                .and_then(|h| h.parse::<std::net::Ipv6Addr>().ok())
                .map(IpAddr::V6)
        })?;
    Some(ip.to_canonical())
}

/// Rewrites the request's `ConnectInfo` to the client behind a trusted proxy.
pub async fn real_client(
    State(proxies): State<Arc<Proxies>>,
    mut req: Request,
    next: Next,
) -> Response {
    if let Some(ConnectInfo(peer)) = req.extensions().get::<ConnectInfo<SocketAddr>>().copied() {
        let client = proxies.client(peer, req.headers());
        if client != peer {
            req.extensions_mut().insert(ConnectInfo(client));
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn proxies(list: &[&str]) -> Proxies {
        Proxies(list.iter().map(|s| s.parse().unwrap()).collect())
    }

    fn xff(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("x-forwarded-for", HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn the_header_counts_only_from_a_trusted_peer() {
        let p = proxies(&["10.0.0.0/8"]);
        let balancer: SocketAddr = "10.1.2.3:5000".parse().unwrap();
        let stranger: SocketAddr = "192.0.2.7:5000".parse().unwrap();
        let h = xff("203.0.113.9");
        assert_eq!(
            p.client(balancer, &h).ip(),
            "203.0.113.9".parse::<IpAddr>().unwrap()
        );
        assert_eq!(p.client(stranger, &h), stranger);
    }

    #[test]
    fn a_forged_leftmost_hop_is_not_believed() {
        let p = proxies(&["10.0.0.0/8", "127.0.0.1"]);
        let balancer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        // The client wrote "1.2.3.4" itself; the edge proxy appended its real address.
        let h = xff("1.2.3.4, 198.51.100.20, 10.0.0.2");
        assert_eq!(
            p.client(balancer, &h).ip(),
            "198.51.100.20".parse::<IpAddr>().unwrap()
        );
    }

    #[test]
    fn a_trusted_peer_without_the_header_is_the_client() {
        let p = proxies(&["127.0.0.1"]);
        let peer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(p.client(peer, &HeaderMap::new()), peer);
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:5000".parse().unwrap();
        assert_eq!(
            p.client(mapped, &xff("192.0.2.1")).ip(),
            "192.0.2.1".parse::<IpAddr>().unwrap()
        );
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn every_form_of_a_hop_is_read() {
        for (hop, want) in [
            ("192.0.2.1", "192.0.2.1"),
            (" 192.0.2.1:4711 ", "192.0.2.1"),
            ("2001:db8::1", "2001:db8::1"),
            ("[2001:db8::1]", "2001:db8::1"),
            ("[2001:db8::1]:443", "2001:db8::1"),
            ("::ffff:192.0.2.1", "192.0.2.1"),
            ("[::ffff:192.0.2.1]:80", "192.0.2.1"),
        ] {
            assert_eq!(parse_hop(hop), Some(ip(want)), "{hop}");
        }
        for junk in [
            "",
            "junk",
            "unknown",
            "_hidden",
            "192.0.2.1:",
            "[2001:db8::1",
            "1.2.3.4.5",
        ] {
            assert_eq!(parse_hop(junk), None, "{junk:?}");
        }
    }

    #[test]
    fn a_junk_hop_ends_the_chain() {
        let p = proxies(&["127.0.0.1", "10.0.0.0/8"]);
        let balancer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        // The client wrote "7.7.7.7, junk" and nothing appended after it:
        // the balancer itself is all the chain vouches for.
        assert_eq!(p.client(balancer, &xff("7.7.7.7, junk")), balancer);
        assert_eq!(p.client(balancer, &xff("192.0.2.99, junk")), balancer);
        // An edge proxy inside the trusted chain received the junk.
        assert_eq!(
            p.client(balancer, &xff("192.0.2.99, junk, 10.0.0.2")).ip(),
            ip("10.0.0.2")
        );
        // Junk left of the real client's address is never read.
        assert_eq!(
            p.client(balancer, &xff("junk, 192.0.2.99, 198.51.100.20, 10.0.0.2"))
                .ip(),
            ip("198.51.100.20")
        );
    }

    #[test]
    fn a_proxy_that_appends_ports_keeps_the_chain() {
        let p = proxies(&["127.0.0.1", "10.0.0.0/8"]);
        let balancer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(
            p.client(balancer, &xff("1.2.3.4, 198.51.100.20:51234, 10.0.0.2:443"))
                .ip(),
            ip("198.51.100.20")
        );
        assert_eq!(
            p.client(balancer, &xff("[2001:db8::7]:51234, [::ffff:10.0.0.2]:443"))
                .ip(),
            ip("2001:db8::7")
        );
    }

    #[test]
    fn several_header_lines_are_one_list() {
        let p = proxies(&["127.0.0.1", "10.0.0.0/8"]);
        let balancer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", HeaderValue::from_static("1.2.3.4"));
        h.append(
            "x-forwarded-for",
            HeaderValue::from_static("198.51.100.20, 10.0.0.2"),
        );
        assert_eq!(p.client(balancer, &h).ip(), ip("198.51.100.20"));
        // A line that is not text cannot be read: nothing left of it counts.
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", HeaderValue::from_static("198.51.100.20"));
        h.append("x-forwarded-for", HeaderValue::from_bytes(b"\xff").unwrap());
        assert_eq!(p.client(balancer, &h), balancer);
    }

    #[test]
    fn a_chain_of_trusted_proxies_only_names_the_leftmost() {
        let p = proxies(&["127.0.0.1", "10.0.0.0/8"]);
        let balancer: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        assert_eq!(
            p.client(balancer, &xff("10.9.9.9, 10.0.0.2")).ip(),
            ip("10.9.9.9")
        );
    }
}
