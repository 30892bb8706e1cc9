//! The explorer page at `/ui` (tools, resources, prompts): one HTML file
//! with its script and styles inline, embedded in the binary (no CDN; works
//! offline).

use axum::http::header::{CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};

const PAGE: &str = include_str!("explorer.html");
const CONFIG_SLOT: &str = r#"/*HANGAR_CONFIG*/{"allowExecute": true}/*END*/"#;

/// The page with this server's settings filled in.
pub fn page(allow_execute: bool) -> Response {
    let config = format!(r#"/*HANGAR_CONFIG*/{{"allowExecute": {allow_execute}}}/*END*/"#);
    let html = PAGE.replacen(CONFIG_SLOT, &config, 1);
    (
        [
            (CONTENT_TYPE, "text/html; charset=utf-8"),
            (CACHE_CONTROL, "no-cache"),
            // Only this server: the page loads nothing from elsewhere.
            (
                CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' data:; media-src 'self' data:",
            ),
        ],
        html,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_config_slot_is_in_the_page() {
        assert!(super::PAGE.contains(super::CONFIG_SLOT));
    }
}
