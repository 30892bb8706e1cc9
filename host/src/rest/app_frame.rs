//! `GET /ui/frame?csp=…`: the document the explorer renders an MCP App's
//! view in (SEP-1865, a `ui://` resource of type `text/html;profile=mcp-app`).
//!
//! The view's HTML is whatever the tool's author wrote, so it runs under a
//! policy the browser enforces from this response's headers, built from
//! the view's declared `_meta.ui.csp` and nothing else:
//! - `Content-Security-Policy` with the spec's restrictive default (no
//!   network, no external scripts, styles, fonts or frames) loosened only
//!   by the domains the resource declares, each checked to be an origin;
//! - the CSP `sandbox allow-scripts` directive: an opaque origin even if the
//!   URL is opened outside the explorer's `<iframe sandbox>`, so the view
//!   never shares the explorer's origin (no DOM, storage or cookies of it);
//! - `frame-ancestors 'self'`: only pages of this server may frame it.
//!
//! Why a route and not `srcdoc` with a CSP `<meta>`: a `srcdoc` (or `blob:`,
//! `data:`) document inherits the explorer's own policy, whose nonce-only
//! `script-src` would stop every script of the view, and a header cannot be
//! undone by the document the way markup placed before a `<meta>` could.
//!
//! The response is a fixed shell: it tells its parent it is ready (the
//! spec's `ui/notifications/sandbox-proxy-ready`), takes one
//! `ui/notifications/sandbox-resource-ready` from that parent only, and
//! writes the view's HTML over itself; the policy stays with the document.
//! No HTML is ever taken from the request.

use axum::extract::Query;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::reply::error;

/// The shell the view is written into (see the module's doc).
const SHELL: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>MCP App</title></head><body><script>
"use strict";
if (window.parent !== window) {
  window.addEventListener("message", function load(ev) {
    const m = ev.data;
    if (ev.source !== window.parent || !m || m.method !== "ui/notifications/sandbox-resource-ready") return;
    window.removeEventListener("message", load);
    document.open();
    document.write(String(m.params && m.params.html || ""));
    document.close();
  });
  window.parent.postMessage({ jsonrpc: "2.0", method: "ui/notifications/sandbox-proxy-ready", params: {} }, "*");
}
</script></body></html>
"#;

/// At most this many domains in one list: a view names a handful.
const MAX_DOMAINS: usize = 64;

/// The query: `csp`, the view's `_meta.ui.csp` as JSON (absent: none declared).
#[derive(Deserialize)]
pub(super) struct FrameQuery {
    csp: Option<String>,
}

/// SEP-1865's `McpUiResourceCsp`: the origins a view may reach.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ViewCsp {
    /// `connect-src` (fetch, XHR, WebSocket).
    #[serde(default)]
    connect_domains: Vec<String>,
    /// Scripts, styles, images, fonts and media.
    #[serde(default)]
    resource_domains: Vec<String>,
    /// `frame-src`.
    #[serde(default)]
    frame_domains: Vec<String>,
    /// `base-uri`.
    #[serde(default)]
    base_uri_domains: Vec<String>,
}

pub(super) async fn frame(Query(q): Query<FrameQuery>) -> Response {
    let csp = match q.csp.as_deref().map(serde_json::from_str::<ViewCsp>) {
        None => ViewCsp::default(),
        Some(Ok(csp)) => csp,
        Some(Err(e)) => return error(StatusCode::BAD_REQUEST, &format!("csp: {e}")),
    };
    let policy = match policy(&csp) {
        Ok(p) => p,
        Err(e) => return error(StatusCode::BAD_REQUEST, &e),
    };
    let Ok(policy) = HeaderValue::from_str(&policy) else {
        return error(StatusCode::BAD_REQUEST, "csp: not a header value");
    };
    (
        [
            (
                CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (CACHE_CONTROL, HeaderValue::from_static("no-store")),
            (CONTENT_SECURITY_POLICY, policy),
        ],
        SHELL,
    )
        .into_response()
}

/// The view's policy: the spec's default, with each directive widened by
/// the declared domains of its kind only.
fn policy(csp: &ViewCsp) -> Result<String, String> {
    let list = |name: &str, domains: &[String]| -> Result<String, String> {
        if domains.len() > MAX_DOMAINS {
            return Err(format!("csp.{name}: more than {MAX_DOMAINS} domains"));
        }
        let sources = domains
            .iter()
            .map(|d| source(d).map_err(|e| format!("csp.{name}: {e}")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(sources.iter().map(|s| format!(" {s}")).collect())
    };
    let connect = list("connectDomains", &csp.connect_domains)?;
    let resource = list("resourceDomains", &csp.resource_domains)?;
    let frame = list("frameDomains", &csp.frame_domains)?;
    let base = list("baseUriDomains", &csp.base_uri_domains)?;
    let or = |sources: &str, default: &str| {
        if sources.is_empty() {
            format!(" {default}")
        } else {
            sources.to_string()
        }
    };
    Ok(format!(
        "default-src 'none'; script-src 'self' 'unsafe-inline'{resource}; \
         style-src 'self' 'unsafe-inline'{resource}; img-src 'self' data:{resource}; \
         font-src 'self'{resource}; media-src 'self' data:{resource}; \
         connect-src{}; frame-src{}; base-uri{}; object-src 'none'; \
         frame-ancestors 'self'; sandbox allow-scripts",
        or(&connect, "'none'"),
        or(&frame, "'none'"),
        or(&base, "'self'"),
    ))
}

/// One declared domain as a CSP source: an origin with an http(s) or
/// ws(s) scheme, a host (its first label may be `*` for any subdomain) and
/// an optional port; no path, credentials, query or fragment. Written back
/// from the parsed parts, so nothing else can reach the header.
fn source(domain: &str) -> Result<String, String> {
    let bad = |why: &str| Err(format!("{domain:?} is not an origin ({why})"));
    let Some((scheme, rest)) = domain.split_once("://") else {
        return bad("no scheme");
    };
    if !matches!(scheme, "http" | "https" | "ws" | "wss") {
        return bad("the scheme must be http, https, ws or wss");
    }
    // `*.` is not a host the URL parser takes: parse a stand-in label.
    let (wildcard, rest) = match rest.strip_prefix("*.") {
        Some(rest) => (true, rest),
        None => (false, rest),
    };
    let Ok(url) = url::Url::parse(&format!("{scheme}://{rest}")) else {
        return bad("it does not parse");
    };
    let host = match url.host() {
        Some(url::Host::Domain(d)) => d.to_string(),
        Some(url::Host::Ipv4(ip)) if !wildcard => ip.to_string(),
        Some(url::Host::Ipv6(ip)) if !wildcard => format!("[{ip}]"),
        _ => return bad("no host"),
    };
    // The parser lets a few characters through in a domain that would end
    // or split a CSP source; a host is letters, digits, dots and hyphens.
    if !host
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '[' | ']' | ':'))
    {
        return bad("the host has characters a host does not");
    }
    if !url.username().is_empty()
        || url.password().is_some()
        || url.query().is_some()
        || url.fragment().is_some()
        || url.path() != "/"
        || rest.ends_with('/')
    {
        return bad("only scheme, host and port");
    }
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let star = if wildcard { "*." } else { "" };
    Ok(format!("{scheme}://{star}{host}{port}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn csp(json: &str) -> Result<String, String> {
        policy(&serde_json::from_str(json).unwrap())
    }

    fn directive(policy: &str, name: &str) -> String {
        policy
            .split(';')
            .map(str::trim)
            .find(|d| d.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} in {policy}"))
            .to_string()
    }

    #[test]
    fn none_declared_is_the_specs_restrictive_default() {
        let p = csp("{}").unwrap();
        assert_eq!(directive(&p, "default-src"), "default-src 'none'");
        assert_eq!(
            directive(&p, "script-src"),
            "script-src 'self' 'unsafe-inline'"
        );
        assert_eq!(directive(&p, "connect-src"), "connect-src 'none'");
        assert_eq!(directive(&p, "frame-src"), "frame-src 'none'");
        assert_eq!(directive(&p, "base-uri"), "base-uri 'self'");
        assert_eq!(directive(&p, "object-src"), "object-src 'none'");
        assert_eq!(directive(&p, "sandbox"), "sandbox allow-scripts");
        assert_eq!(directive(&p, "frame-ancestors"), "frame-ancestors 'self'");
    }

    #[test]
    fn each_list_widens_its_own_directives_only() {
        let p = csp(r#"{"connectDomains": ["https://api.example.com"],
                "resourceDomains": ["https://*.cdn.example:8443"],
                "frameDomains": ["https://player.example"],
                "baseUriDomains": ["https://base.example"]}"#)
        .unwrap();
        assert_eq!(
            directive(&p, "connect-src"),
            "connect-src https://api.example.com"
        );
        for d in [
            "script-src",
            "style-src",
            "img-src",
            "font-src",
            "media-src",
        ] {
            assert!(
                directive(&p, d).ends_with(" https://*.cdn.example:8443"),
                "{p}"
            );
            assert!(!directive(&p, d).contains("api.example.com"), "{p}");
        }
        assert_eq!(
            directive(&p, "frame-src"),
            "frame-src https://player.example"
        );
        assert_eq!(directive(&p, "base-uri"), "base-uri https://base.example");
        assert_eq!(directive(&p, "default-src"), "default-src 'none'");
    }

    #[test]
    fn a_domain_that_is_not_an_origin_is_refused_with_its_list() {
        for bad in [
            "api.example.com",
            "javascript://x",
            "https://a.example; script-src *",
            "https://a.example 'unsafe-eval'",
            "https://a.example/path",
            "https://user@a.example",
            "https://a.example?q",
            "https://a;b.example",
            "https://*",
            "*",
            "'unsafe-eval'",
        ] {
            let json = serde_json::json!({ "resourceDomains": [bad] }).to_string();
            let e = csp(&json).unwrap_err();
            assert!(
                e.starts_with("csp.resourceDomains: ") && e.contains("is not an origin"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        assert!(serde_json::from_str::<ViewCsp>(r#"{"scriptDomains": []}"#).is_err());
    }
}
