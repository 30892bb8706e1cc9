//! `[cluster]`: several Hangar replicas behind one load balancer, sharing
//! per-client state in one Redis server (or one Redis Cluster).

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::Deserialize;

/// `[cluster] redis = "redis://127.0.0.1:6379"`. When set, 2025-11-25
/// sessions, cancellations, answers to server-to-client requests,
/// rate-limit counters, kv (unless `[kv]` says otherwise) and a second tier
/// of the DB result cache live in that Redis, so any replica can serve any
/// request. Without it everything stays in the process.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The Redis every replica shares: one URL (a single server), or a list
    /// of the URLs of some nodes of a Redis Cluster (the rest are found from
    /// them). URLs may hold a user and password and `{{ env.VAR }}`.
    pub redis: RedisUrls,
    /// What every Redis key and channel of the cluster starts with, so two
    /// clusters can share one Redis.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// PEM certificates trusted for `rediss://` instead of the system roots
    /// (a Redis with a certificate from a private CA).
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain presented to a Redis that asks for one
    /// (`tls-auth-clients`); needs `client_key`.
    #[serde(default)]
    pub client_cert: Option<PathBuf>,
    /// PEM private key of `client_cert`.
    #[serde(default)]
    pub client_key: Option<PathBuf>,
}

/// `redis = "URL"` (one server) or `redis = ["URL", …]` (a Redis Cluster).
#[derive(Debug, Clone, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(
    untagged,
    expecting = "a redis:// or rediss:// URL, or a list of them (the nodes of a Redis Cluster)"
)]
pub enum RedisUrls {
    /// One Redis server.
    One(String),
    /// Some nodes of a Redis Cluster.
    Cluster(Vec<String>),
}

impl RedisUrls {
    pub fn urls(&self) -> &[String] {
        match self {
            RedisUrls::One(url) => std::slice::from_ref(url),
            RedisUrls::Cluster(urls) => urls,
        }
    }

    /// Whether the URLs name nodes of a Redis Cluster (the list form).
    pub fn is_cluster(&self) -> bool {
        matches!(self, RedisUrls::Cluster(_))
    }

    /// The first URL: what kv's `url` defaults to under `[cluster]`.
    pub fn first(&self) -> &str {
        self.urls().first().map(String::as_str).unwrap_or_default()
    }
}

fn default_prefix() -> String {
    "hangar:cluster".into()
}

impl ClusterConfig {
    /// What is wrong with the settings, if anything. Never quotes a URL's
    /// credentials.
    pub fn check(&self) -> Result<(), String> {
        if self.prefix.is_empty() {
            return Err("[cluster] prefix must not be empty".into());
        }
        if self.redis.urls().is_empty() {
            return Err("[cluster] redis must name at least one Redis Cluster node".into());
        }
        // A URL that is all `{{ env.X }}` is checked once substituted, at start.
        let templated = |url: &str| url.trim_start().starts_with("{{");
        for url in self.redis.urls() {
            if !(url.starts_with("redis://") || url.starts_with("rediss://") || templated(url)) {
                return Err(format!(
                    "[cluster] redis must be a redis:// or rediss:// URL, not {:?}",
                    url.split('@').next_back().unwrap_or_default()
                ));
            }
        }
        if self.client_cert.is_some() != self.client_key.is_some() {
            return Err("[cluster] client_cert and client_key go together".into());
        }
        let tls_files = self.ca_file.is_some() || self.client_cert.is_some();
        let tls = |url: &String| url.starts_with("rediss://") || templated(url);
        if tls_files && !self.redis.urls().iter().all(tls) {
            return Err(
                "[cluster] ca_file, client_cert and client_key apply to rediss:// URLs only".into(),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterConfig, toml::de::Error> {
        toml::from_str(text)
    }

    #[test]
    fn one_url_or_a_list_of_cluster_nodes() {
        let one = parse("redis = \"rediss://u:p@h:6380\"\nca_file = \"ca.pem\"").unwrap();
        assert!(!one.redis.is_cluster());
        assert_eq!(one.redis.first(), "rediss://u:p@h:6380");
        assert_eq!(one.ca_file, Some(PathBuf::from("ca.pem")));
        one.check().unwrap();
        let many = parse("redis = [\"redis://a:7000\", \"redis://b:7001\"]").unwrap();
        assert!(many.redis.is_cluster());
        assert_eq!(many.redis.urls().len(), 2);
        many.check().unwrap();
        let err = parse("redis = 5").unwrap_err().to_string();
        assert!(err.contains("a list of them"), "{err}");
        assert!(parse("redis = []").unwrap().check().is_err());
    }

    #[test]
    fn errors_never_quote_a_password() {
        let bad = parse("redis = [\"redis://a:7000\", \"http://user:secret@h:1\"]").unwrap();
        let e = bad.check().unwrap_err();
        assert!(e.contains("h:1") && !e.contains("secret"), "{e}");
        let half = parse("redis = \"rediss://h\"\nclient_cert = \"c.pem\"").unwrap();
        assert!(half.check().unwrap_err().contains("client_key"));
        parse("redis = \"{{ env.REDIS_URL }}\"")
            .unwrap()
            .check()
            .unwrap();
        let plain = parse("redis = \"redis://h\"\nca_file = \"ca.pem\"").unwrap();
        assert!(plain.check().unwrap_err().contains("rediss://"));
    }
}
