//! `get_json`: one bounded HTTP(S) GET for the authorization server's
//! metadata and keys. These requests are the host's own (no grants, no
//! per-call budget), so they go out as upstream requests do, under
//! `hangar_core::outbound`'s policy: the system roots plus `[http] extra_ca`,
//! proxies from the environment, redirects only within the origin, and a
//! fixed size cap read as the body arrives.

use std::time::Duration;

use serde_json::Value;

use hangar_core::outbound::{self, BodyError, CappedBody};

/// Largest metadata or key set read.
const MAX_BYTES: usize = 1 << 20;
/// Connect, send and read, all together.
const TIMEOUT: Duration = Duration::from_secs(10);

/// The client of the resource server's own requests.
pub struct Fetcher {
    http: reqwest::Client,
}

/// A successful answer: its JSON and how long it may be kept (`max-age`).
pub struct Fetched {
    pub json: Value,
    pub max_age: Option<Duration>,
}

impl Fetcher {
    /// `tls`: the roots HTTPS issuers are verified against.
    pub fn new(tls: rustls::ClientConfig) -> Fetcher {
        Fetcher {
            http: outbound::client(tls, TIMEOUT),
        }
    }

    /// GETs `url` and parses its body as JSON; anything but 200 is an error.
    pub async fn get_json(&self, url: &str) -> Result<Fetched, String> {
        tokio::time::timeout(TIMEOUT, self.get(url))
            .await
            .map_err(|_| format!("GET {url}: timed out"))?
            .map_err(|e| format!("GET {url}: {e}"))
    }

    async fn get(&self, url: &str) -> Result<Fetched, String> {
        let uri: reqwest::Url = url.parse().map_err(|e| format!("bad URL: {e}"))?;
        if !matches!(uri.scheme(), "http" | "https") {
            return Err("not an http(s) URL".into());
        }
        let response = self
            .http
            .get(uri)
            .header(http::header::ACCEPT, "application/json")
            .send()
            .await
            .map_err(|e| describe(&e))?;
        if response.status() != http::StatusCode::OK {
            return Err(format!("status {}", response.status()));
        }
        let max_age = response
            .headers()
            .get(http::header::CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .and_then(max_age);
        let body = CappedBody::new(response, MAX_BYTES)
            .map_err(body_error)?
            .bytes()
            .await
            .map_err(body_error)?;
        let json = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
        Ok(Fetched { json, max_age })
    }
}

fn body_error(e: BodyError) -> String {
    match e {
        BodyError::TooLarge { limit } => format!("longer than {}", outbound::size(limit)),
        BodyError::Broken(e) => describe(&e),
    }
}

/// A transport error with its causes (TLS, connection refused), as the
/// URL it names is the operator's own configuration.
fn describe(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `max-age=N` of a Cache-Control value.
fn max_age(value: &str) -> Option<Duration> {
    value.split(',').find_map(|d| {
        let secs = d.trim().strip_prefix("max-age=")?;
        secs.trim_matches('"').parse().ok().map(Duration::from_secs)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_age_is_read_from_cache_control() {
        assert_eq!(
            max_age("public, max-age=300"),
            Some(Duration::from_secs(300))
        );
        assert_eq!(max_age("no-store"), None);
    }
}
