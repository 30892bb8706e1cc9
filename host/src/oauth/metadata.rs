//! Protected Resource Metadata (RFC 9728): the document that tells a client
//! which authorization server issues tokens for this server, and where it
//! is served. It owns the URL a 401 challenge points at.

use serde_json::{Value, json};

use hangar_config::OAuthConfig;

/// The well-known prefix of RFC 9728.
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The metadata document.
pub fn document(config: &OAuthConfig) -> Value {
    let mut doc = json!({
        "resource": config.resource,
        "authorization_servers": [config.issuer],
        "bearer_methods_supported": ["header"],
        "resource_name": "Hangar",
    });
    if !config.scopes_supported.is_empty() {
        doc["scopes_supported"] = json!(config.scopes_supported);
    }
    doc
}

/// The path of `resource` (`/mcp` for `https://host/mcp`; empty for a bare host).
pub fn resource_path(resource: &str) -> &str {
    let rest = resource.split_once("://").map_or(resource, |(_, r)| r);
    let path = rest.find('/').map_or("", |i| &rest[i..]);
    let path = path.split(['?', '#']).next().unwrap_or_default();
    path.trim_end_matches('/')
}

/// Where the document is, as RFC 9728 §3.1 forms it from the resource: the
/// well-known segment between the host and the resource's path.
pub fn url(resource: &str) -> String {
    let (scheme, rest) = resource.split_once("://").unwrap_or(("https", resource));
    let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
    format!("{scheme}://{host}{WELL_KNOWN}{}", resource_path(resource))
}

/// The paths the document is served on: the bare well-known path, the one
/// for `/mcp`, and the one for the configured resource's path.
pub fn paths(resource: &str) -> Vec<String> {
    let mut paths = vec![WELL_KNOWN.to_string(), format!("{WELL_KNOWN}/mcp")];
    let own = format!("{WELL_KNOWN}{}", resource_path(resource));
    if !paths.contains(&own) {
        paths.push(own);
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_url_inserts_the_well_known_segment() {
        assert_eq!(
            url("https://tools.example.com/mcp"),
            "https://tools.example.com/.well-known/oauth-protected-resource/mcp"
        );
        assert_eq!(
            url("http://127.0.0.1:8080"),
            "http://127.0.0.1:8080/.well-known/oauth-protected-resource"
        );
        assert_eq!(
            paths("https://h/api/mcp"),
            [
                WELL_KNOWN.to_string(),
                format!("{WELL_KNOWN}/mcp"),
                format!("{WELL_KNOWN}/api/mcp")
            ]
        );
    }
}
