//! What guests may reach outside their sandbox: `[http]` and each plugin's
//! `grants` (the providers they name are `super::credentials`).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[http]`: settings of the client guests' requests go out through.
#[derive(Debug, Clone, PartialEq, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    /// A PEM file of CA certificates trusted besides the system's roots.
    pub extra_ca: Option<PathBuf>,
    /// `resolve = { "api.example.org" = "203.0.113.7" }`: names answered
    /// with that address instead of asking DNS (as curl's `--resolve`). The
    /// address is still checked as a resolved one: an internal address is
    /// refused unless a grant names it literally.
    #[serde(default)]
    pub resolve: BTreeMap<String, IpAddr>,
}

/// `grants = { http = ["api.github.com", "*.example.org", "127.0.0.1:9000"] }`.
/// Also the vocabulary of what a component pushed to a registry asks for
/// (`hangar push --requests`, the `dev.hangar.requests` annotation).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, JsonSchema, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    /// Hosts (ports 80/443 by scheme), `host:port` or `*.domain` the plugin's
    /// outbound HTTP requests may go to.
    #[serde(default)]
    pub http: Vec<String>,
    /// `[credentials.NAME]` providers whose tokens the plugin may get.
    #[serde(default)]
    pub credentials: Vec<String>,
}
