//! Who the client is when Hangar stands behind a balancer: the peer's
//! address, unless the peer is one of `[server] trusted_proxies`, in which
//! case the nearest address in `X-Forwarded-For` that is not itself a
//! trusted proxy. The request's `ConnectInfo` is rewritten to it once, so
//! rate limits, the auth-failure limiter, per-client caps and access lines
//! all see the client, not the balancer. From anyone else the header is
//! ignored: a client cannot name itself someone else.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;

use crate::config::TrustedProxy;

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
    pub fn client(&self, peer: SocketAddr, headers: &HeaderMap) -> SocketAddr {
        if !self.trusted(peer.ip()) {
            return peer;
        }
        // Each proxy appends the address it received from: read from the
        // right, past the trusted ones, to the first the chain vouches for.
        let hops: Vec<IpAddr> = headers
            .get_all("x-forwarded-for")
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .map_while(|hop| hop.trim().parse::<IpAddr>().ok())
            .collect();
        match hops.iter().rev().find(|ip| !self.trusted(**ip)) {
            Some(ip) => SocketAddr::new(*ip, 0),
            // All trusted (or no header): the leftmost, else the peer.
            None => hops.first().map_or(peer, |ip| SocketAddr::new(*ip, 0)),
        }
    }
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
}
