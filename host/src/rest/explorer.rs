//! The explorer page at `/ui` (tools, resources, prompts): one HTML file
//! with its script and styles inline, embedded in the binary (no CDN; works
//! offline).
//!
//! The page shows what tools answer, which anyone who can publish a tool or
//! shape its result controls. So its Content-Security-Policy runs only the
//! page's own script: each response carries a fresh nonce that the one
//! `<script>` element names, and no `'unsafe-inline'` for scripts (a markup
//! injection cannot add a script that runs). Styles stay inline.
//!
//! A tool with an MCP App view is shown by the page in a frame of
//! `/ui/frame` ([`super::app_frame`]): another document, under the view's own
//! policy, which this page's `default-src 'self'` lets it frame.

use axum::http::HeaderValue;
use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("explorer.html");
const CONFIG_SLOT: &str = r#"/*HANGAR_CONFIG*/{"allowExecute": true}/*END*/"#;
/// The server's version, which the page tells the MCP Apps it hosts.
const VERSION_SLOT: &str = r#"/*HANGAR_VERSION*/"0.0.0"/*END*/"#;
/// The script element's nonce in the page as written.
const NONCE_SLOT: &str = r#"<script nonce="HANGAR_NONCE">"#;

/// The page with this server's settings filled in.
/// `connections`: the server has per-user providers (the Connections view).
/// `toolset`: the page is `/toolsets/NAME/ui`, and fetches the catalog
/// from `/toolsets/NAME/…` (only that toolset's tools); `None`: `/ui`.
/// `protocols`: the MCP revisions `/mcp` speaks (the landing view).
pub fn page(
    allow_execute: bool,
    connections: bool,
    toolset: Option<&str>,
    protocols: &[&str],
) -> Response {
    // 122 random bits from a CSPRNG, as hex: fit for a CSP nonce.
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let settings = serde_json::json!({
        "allowExecute": allow_execute,
        "connections": connections,
        "toolset": toolset,
        "base": toolset.map(|name| format!("/toolsets/{name}")).unwrap_or_default(),
        "commit": env!("HANGAR_COMMIT"),
        "protocols": protocols,
    });
    // Inside a <script>: no `<` may close it, whatever a name holds.
    let settings = settings.to_string().replace('<', "\\u003c");
    let config = format!("/*HANGAR_CONFIG*/{settings}/*END*/");
    let version = format!(
        r#"/*HANGAR_VERSION*/"{}"/*END*/"#,
        env!("CARGO_PKG_VERSION")
    );
    let html = PAGE
        .replacen(CONFIG_SLOT, &config, 1)
        .replacen(VERSION_SLOT, &version, 1)
        .replacen(NONCE_SLOT, &format!(r#"<script nonce="{nonce}">"#), 1);
    let csp = HeaderValue::from_str(&policy(&nonce)).expect("a hex nonce is a header value");
    (
        [
            (
                CONTENT_TYPE,
                HeaderValue::from_static("text/html; charset=utf-8"),
            ),
            (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
            (CONTENT_SECURITY_POLICY, csp),
        ],
        html,
    )
        .into_response()
}

/// Only this server, and only the script carrying `nonce`: the page loads
/// nothing from elsewhere, and `data:` is allowed for images and media only.
fn policy(nonce: &str) -> String {
    format!(
        "default-src 'self'; script-src 'nonce-{nonce}'; style-src 'unsafe-inline'; \
         img-src 'self' data:; media-src 'self' data:; object-src 'none'; base-uri 'none'; \
         frame-ancestors 'none'"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_slots_are_in_the_page() {
        assert!(PAGE.contains(CONFIG_SLOT));
        assert!(PAGE.contains(VERSION_SLOT));
        // One script element, and it is the one the nonce goes into.
        assert_eq!(PAGE.matches("<script").count(), 1);
        assert!(PAGE.contains(NONCE_SLOT));
    }

    #[test]
    fn each_page_names_its_own_nonce_and_no_inline_scripts_run() {
        let nonce_of = |r: &Response| {
            let csp = r.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap();
            let script_src = csp
                .split(';')
                .map(str::trim)
                .find(|d| d.starts_with("script-src"))
                .unwrap()
                .to_string();
            assert!(!script_src.contains("unsafe-inline"), "{script_src}");
            script_src
                .trim_start_matches("script-src 'nonce-")
                .trim_end_matches('\'')
                .to_string()
        };
        let (a, b) = (page(true, false, None, &[]), page(false, false, None, &[]));
        let (na, nb) = (nonce_of(&a), nonce_of(&b));
        assert_eq!(na.len(), 32);
        assert_ne!(na, nb);
    }
}
