//! `HttpGrants`: where a plugin's outbound requests may go (`grants.http`),
//! matched by host and port (the addresses no name may lead to are in
//! `ranges`).

use std::net::{IpAddr, SocketAddr};

/// A plugin's `grants.http`, parsed at load.
#[derive(Debug, Clone, Default)]
pub struct HttpGrants {
    entries: Vec<Grant>,
}

#[derive(Debug, Clone)]
pub(super) struct Grant {
    pub(super) host: GrantHost,
    /// `None`: the scheme's default port.
    port: Option<u16>,
}

#[derive(Debug, Clone)]
pub(super) enum GrantHost {
    /// A name, matched without regard to case.
    Name(String),
    /// `*.example.org`: the suffix `.example.org`.
    Wildcard(String),
    /// An address named literally: the only way to reach a private one.
    Ip(IpAddr),
}

impl HttpGrants {
    /// Parses `grants.http` entries; an entry that is not a host, `host:port`
    /// or `*.domain` is an error naming it.
    pub fn parse(entries: &[String]) -> Result<HttpGrants, String> {
        let entries = entries
            .iter()
            .map(|e| {
                Grant::parse(e).ok_or_else(|| {
                    format!("grants.http: {e:?} is not a host, host:port or *.domain")
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(HttpGrants { entries })
    }

    /// The entry that grants `host:port` (`default_port` being the scheme's).
    pub(super) fn grant_for(&self, host: &str, port: u16, default_port: u16) -> Option<&Grant> {
        self.entries.iter().find(|g| {
            g.port.unwrap_or(default_port) == port
                && match &g.host {
                    GrantHost::Name(name) => name.eq_ignore_ascii_case(host),
                    GrantHost::Wildcard(suffix) => {
                        host.len() > suffix.len()
                            && host.to_ascii_lowercase().ends_with(suffix.as_str())
                    }
                    GrantHost::Ip(ip) => host.parse::<IpAddr>().is_ok_and(|h| h == *ip),
                }
        })
    }
}

impl HttpGrants {
    /// Whether an entry covers everything the grant entry `requested`
    /// would (a name under a granted wildcard, the same host and port):
    /// how `hangar check` sets what a component asks for beside its grants.
    pub fn covers(&self, requested: &str) -> bool {
        let Some(asked) = Grant::parse(requested) else {
            return false;
        };
        self.entries.iter().any(|g| {
            g.port == asked.port
                && match (&g.host, &asked.host) {
                    (GrantHost::Name(a), GrantHost::Name(b)) => a == b,
                    (GrantHost::Ip(a), GrantHost::Ip(b)) => a == b,
                    (GrantHost::Wildcard(suffix), GrantHost::Name(name)) => {
                        name.len() > suffix.len() && name.ends_with(suffix.as_str())
                    }
                    (GrantHost::Wildcard(a), GrantHost::Wildcard(b)) => b.ends_with(a.as_str()),
                    _ => false,
                }
        })
    }

    /// Whether an entry names `ip` literally, for `port`: what lets a
    /// granted name lead to an internal address (the guest could reach
    /// that address and port by its literal anyway).
    pub(super) fn names_address(&self, ip: IpAddr, port: u16, default_port: u16) -> bool {
        self.entries.iter().any(|g| {
            matches!(g.host, GrantHost::Ip(granted) if granted == ip)
                && g.port.unwrap_or(default_port) == port
        })
    }
}

impl Grant {
    fn parse(entry: &str) -> Option<Grant> {
        let entry = entry.trim();
        let (host, port) = match entry.parse::<SocketAddr>() {
            Ok(addr) => {
                return Some(Grant {
                    host: GrantHost::Ip(addr.ip()),
                    port: Some(addr.port()),
                });
            }
            Err(_) => match entry.rsplit_once(':') {
                Some((h, p)) if !h.contains(':') => (h, Some(p.parse::<u16>().ok()?)),
                _ => (entry, None),
            },
        };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Grant {
                host: GrantHost::Ip(ip),
                port,
            });
        }
        let valid = |name: &str| {
            !name.is_empty()
                && name.split('.').all(|l| {
                    !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                })
        };
        let host = match host.strip_prefix("*.") {
            Some(domain) if valid(domain) => {
                GrantHost::Wildcard(format!(".{}", domain.to_ascii_lowercase()))
            }
            None if valid(host) => GrantHost::Name(host.to_ascii_lowercase()),
            _ => return None,
        };
        Some(Grant { host, port })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grants(entries: &[&str]) -> HttpGrants {
        HttpGrants::parse(&entries.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap()
    }

    #[test]
    fn entries_match_host_port_and_wildcards() {
        let g = grants(&[
            "api.github.com",
            "*.example.org",
            "127.0.0.1:9000",
            "svc:8080",
        ]);
        assert!(g.grant_for("api.github.com", 443, 443).is_some());
        assert!(g.grant_for("API.GitHub.com", 80, 80).is_some());
        assert!(g.grant_for("api.github.com", 8443, 443).is_none());
        assert!(g.grant_for("a.b.example.org", 443, 443).is_some());
        assert!(g.grant_for("example.org", 443, 443).is_none());
        assert!(g.grant_for("badexample.org", 443, 443).is_none());
        assert!(g.grant_for("127.0.0.1", 9000, 80).is_some());
        assert!(g.grant_for("127.0.0.1", 9001, 80).is_none());
        assert!(g.grant_for("svc", 8080, 80).is_some());
        let loopback = "127.0.0.1".parse().unwrap();
        assert!(g.names_address(loopback, 9000, 80));
        assert!(!g.names_address(loopback, 80, 80));
        assert!(!g.names_address("10.0.0.1".parse().unwrap(), 9000, 80));
        assert!(HttpGrants::parse(&["http://x".into()]).is_err());
        assert!(HttpGrants::parse(&["a b".into()]).is_err());
        assert!(HttpGrants::parse(&["host:notaport".into()]).is_err());
    }
}
