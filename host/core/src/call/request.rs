//! The HTTP request that carried a call, as the auth stage and tracing see
//! it: the surface it came through, its method, path, headers and peer.

/// Which surface a call came in through.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Surface {
    #[default]
    Mcp,
    Rest,
}

/// What the auth stage may look at of the HTTP request that carried the call.
#[derive(Debug, Clone, Default)]
pub struct RequestInfo {
    pub surface: Surface,
    pub method: String,
    pub path: String,
    /// As received (names are lower-case in a `HeaderMap`). Kept whole, not
    /// copied into strings: most calls never look at them.
    pub headers: axum::http::HeaderMap,
    pub client_addr: Option<std::net::SocketAddr>,
    /// The W3C `traceparent` header, if one came: looked up once, here,
    /// for the call's trace id and for the span it continues.
    pub traceparent: Option<axum::http::HeaderValue>,
}

/// The W3C header that names a call's parent span.
static TRACEPARENT: axum::http::HeaderName = axum::http::HeaderName::from_static("traceparent");

impl RequestInfo {
    pub fn new(
        surface: Surface,
        method: &str,
        path: &str,
        headers: &axum::http::HeaderMap,
        client_addr: Option<std::net::SocketAddr>,
    ) -> RequestInfo {
        RequestInfo {
            surface,
            method: method.to_string(),
            path: path.to_string(),
            headers: headers.clone(),
            client_addr,
            traceparent: headers.get(&TRACEPARENT).cloned(),
        }
    }

    /// The `traceparent` header as text, if it came and is text.
    pub fn traceparent(&self) -> Option<&str> {
        self.traceparent.as_ref().and_then(|v| v.to_str().ok())
    }

    /// The headers as text pairs (what an auth check's WIT record holds);
    /// a value that is not visible ASCII is left out.
    pub fn header_pairs(&self) -> Vec<(String, String)> {
        self.headers
            .iter()
            .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
            .collect()
    }
}
