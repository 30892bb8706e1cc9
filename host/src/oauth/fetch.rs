//! `get_json`: one bounded HTTP(S) GET for the authorization server's
//! metadata and keys — TCP, rustls with the system roots, HTTP/1.1 with
//! hyper. Owned here (not the guests' `HttpClient`) because these requests
//! are the host's own: no grants, no per-call budget, a fixed size cap.

use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Empty, Limited};
use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// Largest metadata or key set read.
const MAX_BYTES: usize = 1 << 20;
/// Connect, send and read, all together.
const TIMEOUT: Duration = Duration::from_secs(10);

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// The TLS settings of the resource server's own requests.
pub struct Fetcher {
    tls: Arc<rustls::ClientConfig>,
}

/// A successful answer: its JSON and how long it may be kept (`max-age`).
pub struct Fetched {
    pub json: Value,
    pub max_age: Option<Duration>,
}

impl Fetcher {
    pub fn new() -> Fetcher {
        let mut roots = rustls::RootCertStore::empty();
        roots.add_parsable_certificates(rustls_native_certs::load_native_certs().certs);
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("ring supports the default protocol versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
        Fetcher {
            tls: Arc::new(config),
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
        let uri: http::Uri = url.parse().map_err(|e| format!("bad URL: {e}"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err("not an http(s) URL".into()),
        };
        let host = uri.host().ok_or("no host")?.to_string();
        let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let tcp = TcpStream::connect((bare, port))
            .await
            .map_err(|e| e.to_string())?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = if https {
            let name = ServerName::try_from(bare.to_string()).map_err(|e| e.to_string())?;
            let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
            Box::new(
                connector
                    .connect(name, tcp)
                    .await
                    .map_err(|e| e.to_string())?,
            )
        } else {
            Box::new(tcp)
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| e.to_string())?;
        let conn = tokio::spawn(conn);
        let authority = uri.authority().map_or(host.clone(), |a| a.to_string());
        let request = http::Request::get(uri.path_and_query().map_or("/", |p| p.as_str()))
            .header(http::header::HOST, authority)
            .header(http::header::ACCEPT, "application/json")
            .body(Empty::<bytes::Bytes>::new())
            .map_err(|e| e.to_string())?;
        let response = sender.send_request(request).await;
        let outcome = async {
            let response = response.map_err(|e| e.to_string())?;
            if response.status() != http::StatusCode::OK {
                return Err(format!("status {}", response.status()));
            }
            let max_age = response
                .headers()
                .get(http::header::CACHE_CONTROL)
                .and_then(|v| v.to_str().ok())
                .and_then(max_age);
            let body = Limited::new(response.into_body(), MAX_BYTES)
                .collect()
                .await
                .map_err(|e| e.to_string())?
                .to_bytes();
            let json = serde_json::from_slice(&body).map_err(|e| format!("not JSON: {e}"))?;
            Ok(Fetched { json, max_age })
        }
        .await;
        conn.abort();
        outcome
    }
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
