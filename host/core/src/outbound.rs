//! The host's own outbound HTTP: requests to upstream MCP servers and to
//! the OAuth issuer (metadata and keys). One policy for all of them, so a
//! backend that answers cannot make the host do more than it asked:
//!
//! - TLS verified against the system roots plus `[http] extra_ca`;
//! - `HTTPS_PROXY` / `HTTP_PROXY` / `ALL_PROXY` and `NO_PROXY` honoured, as
//!   operators behind a corporate proxy expect;
//! - redirects followed only within the origin that was asked (scheme, host
//!   and port), only with 307/308 (which keep the method and body), at most
//!   [`MAX_REDIRECTS`]: configured headers (an API key) never travel to a
//!   host the operator did not name;
//! - bodies read under a byte cap as they arrive ([`CappedBody`]), never
//!   whole first.
//!
//! Guests' requests never come here: theirs are address-pinned and granted
//! (`wasm::http`), and a proxy would hide where they go.

use std::time::Duration;

use bytes::Bytes;

/// Redirects one request may follow (all within its origin).
pub const MAX_REDIRECTS: usize = 3;

/// A client under the outbound policy. `connect_timeout` bounds each
/// connection attempt; callers bound whole exchanges themselves.
pub fn client(tls: rustls::ClientConfig, connect_timeout: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .tcp_nodelay(true)
        .redirect(same_origin_redirects())
        .tls_backend_preconfigured(tls)
        .build()
        .expect("a client with a rustls config always builds")
}

/// Follows a 307/308 to the same scheme, host and port, up to
/// [`MAX_REDIRECTS`] times; any other redirect is handed back unfollowed
/// (the caller sees its 3xx status). The trace exporter's client uses it
/// too: its headers may carry a collector's API key.
pub fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let keeps_method = matches!(attempt.status().as_u16(), 307 | 308);
        let first = attempt.previous().first();
        let same = first.is_some_and(|first| same_origin(first, attempt.url()));
        if keeps_method && same && attempt.previous().len() <= MAX_REDIRECTS {
            attempt.follow()
        } else {
            attempt.stop()
        }
    })
}

fn same_origin(a: &reqwest::Url, b: &reqwest::Url) -> bool {
    a.scheme() == b.scheme()
        && a.host_str().map(str::to_ascii_lowercase) == b.host_str().map(str::to_ascii_lowercase)
        && a.port_or_known_default() == b.port_or_known_default()
}

/// Why a body could not be read whole.
#[derive(Debug)]
pub enum BodyError {
    /// It is longer than the cap (by its `Content-Length`, or as it arrived).
    TooLarge { limit: usize },
    /// The connection broke while reading.
    Broken(reqwest::Error),
}

/// A response body read chunk by chunk, counting bytes against a cap.
pub struct CappedBody {
    response: reqwest::Response,
    left: usize,
    limit: usize,
}

impl CappedBody {
    /// Refuses at once a body whose `Content-Length` is over `limit`.
    pub fn new(response: reqwest::Response, limit: usize) -> Result<CappedBody, BodyError> {
        if response.content_length().is_some_and(|n| n > limit as u64) {
            return Err(BodyError::TooLarge { limit });
        }
        Ok(CappedBody {
            response,
            left: limit,
            limit,
        })
    }

    /// The next chunk, or `None` at the end; an error once the bytes read
    /// pass the cap.
    pub async fn chunk(&mut self) -> Result<Option<Bytes>, BodyError> {
        let chunk = self.response.chunk().await.map_err(BodyError::Broken)?;
        if let Some(c) = &chunk {
            self.left = self
                .left
                .checked_sub(c.len())
                .ok_or(BodyError::TooLarge { limit: self.limit })?;
        }
        Ok(chunk)
    }

    /// The whole body (at most the cap). Chunks are kept as they came and
    /// joined once at the end, in a buffer of the exact size: a growing
    /// buffer would copy and reallocate megabytes on every doubling.
    pub async fn bytes(mut self) -> Result<Bytes, BodyError> {
        let mut chunks = Vec::new();
        while let Some(c) = self.chunk().await? {
            chunks.push(c);
        }
        if chunks.len() == 1 {
            return Ok(chunks.pop().expect("one chunk"));
        }
        let mut whole = bytes::BytesMut::with_capacity(self.limit - self.left);
        for c in chunks {
            whole.extend_from_slice(&c);
        }
        Ok(whole.freeze())
    }
}

/// `n` bytes as people read them (`8 MiB`, `512 KiB`, `100 bytes`).
pub fn size(n: usize) -> String {
    match n {
        n if n >= 1 << 20 && n % (1 << 20) == 0 => format!("{} MiB", n >> 20),
        n if n >= 1 << 10 && n % (1 << 10) == 0 => format!("{} KiB", n >> 10),
        n => format!("{n} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_compare_scheme_host_and_port() {
        let u = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(same_origin(&u("http://a.test/x"), &u("http://A.test:80/y")));
        assert!(!same_origin(&u("http://a.test/x"), &u("https://a.test/x")));
        assert!(!same_origin(
            &u("http://a.test/x"),
            &u("http://a.test:8080/x")
        ));
        assert!(!same_origin(
            &u("http://a.test/x"),
            &u("http://127.0.0.1/x")
        ));
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(8 << 20), "8 MiB");
        assert_eq!(size(512 << 10), "512 KiB");
        assert_eq!(size(100), "100 bytes");
    }
}
