//! `HttpClient`: sends one guest request to an address that was already
//! checked — TCP to that address, TLS named after the host (rustls, the
//! system roots plus an optional extra CA), HTTP/1.1 with hyper — and hands
//! the guest a response body that counts its bytes against the call's cap.
//!
//! Hangar sends requests itself rather than through wasmtime-wasi-http's
//! default client, which resolves the host again (a second DNS answer could
//! point into the network) and trusts only a built-in root list.

use std::collections::HashMap;
use std::net::IpAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame};
use http_body_util::BodyExt;
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;
use wasmtime_wasi_http::{Error, RequestOptions, WasiBody};

/// TLS trusting the system's root certificates plus those in `extra_ca`
/// (PEM), with ring as the provider, HTTP/1.1 only (no ALPN).
pub fn tls_config(extra_ca: Option<&Path>) -> Result<rustls::ClientConfig, String> {
    let mut roots = rustls::RootCertStore::empty();
    // Unreadable system certificates are skipped, as every client does.
    let system = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(system.certs);
    if let Some(path) = extra_ca {
        let certs = CertificateDer::pem_file_iter(path)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("[http] extra_ca {}: {e}", path.display()))?;
        if certs.is_empty() {
            return Err(format!(
                "[http] extra_ca {}: no certificate in it",
                path.display()
            ));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("[http] extra_ca {}: {e}", path.display()))?;
        }
    }
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// The TLS settings every plugin's requests share (built once at load),
/// and the names answered without DNS (`[http] resolve`).
pub struct HttpClient {
    tls: Arc<rustls::ClientConfig>,
    /// Lower-case names and the address each resolves to.
    resolve: HashMap<String, IpAddr>,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("HttpClient")
    }
}

impl Default for HttpClient {
    fn default() -> Self {
        HttpClient::new(None).expect("the system roots alone always build")
    }
}

impl HttpClient {
    /// The system's root certificates, plus those in `extra_ca` (PEM).
    pub fn new(extra_ca: Option<&Path>) -> Result<HttpClient, String> {
        Ok(HttpClient {
            tls: Arc::new(tls_config(extra_ca)?),
            resolve: HashMap::new(),
        })
    }

    /// Answers each name of `resolve` (`[http] resolve`) with its address
    /// instead of asking DNS.
    pub fn with_resolve<'a>(
        mut self,
        resolve: impl IntoIterator<Item = (&'a String, &'a IpAddr)>,
    ) -> HttpClient {
        self.resolve = resolve
            .into_iter()
            .map(|(name, ip)| (name.to_ascii_lowercase(), *ip))
            .collect();
        self
    }

    /// The address `[http] resolve` gives `host`, if it names it.
    pub fn resolved(&self, host: &str) -> Option<IpAddr> {
        if self.resolve.is_empty() {
            return None;
        }
        self.resolve.get(&host.to_ascii_lowercase()).copied()
    }

    /// The TLS settings its requests use (also those of upstream MCP servers).
    pub fn tls(&self) -> &Arc<rustls::ClientConfig> {
        &self.tls
    }

    /// Sends `request` to `addr`; `tls_name` is the host name to verify for
    /// HTTPS (`None`: plain HTTP). `in_flight` is held until the body ends.
    pub async fn send(
        &self,
        mut request: http::Request<WasiBody>,
        addr: std::net::SocketAddr,
        tls_name: Option<ServerName<'static>>,
        timeouts: RequestOptions,
        budget: Arc<ByteBudget>,
        in_flight: OwnedSemaphorePermit,
    ) -> Result<http::Response<WasiBody>, Error> {
        let connect = timeouts.connect_timeout.unwrap_or(Duration::MAX);
        let tcp = tokio::time::timeout(connect, TcpStream::connect(addr))
            .await
            .map_err(|_| Error::ConnectionTimeout)?
            .map_err(Error::Connect)?;
        let _ = tcp.set_nodelay(true);
        let stream: Box<dyn Stream> = match tls_name {
            None => Box::new(tcp),
            Some(name) => {
                let connector = tokio_rustls::TlsConnector::from(self.tls.clone());
                let tls = tokio::time::timeout(connect, connector.connect(name, tcp))
                    .await
                    .map_err(|_| Error::ConnectionTimeout)?
                    .map_err(Error::Tls)?;
                Box::new(tls)
            }
        };
        let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(Error::from)?;
        // The connection is driven until the response body has been read.
        let conn = tokio::spawn(conn);
        // The request line carries only the path (the Host header names the host).
        let path = request
            .uri()
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .parse()
            .map_err(|_| Error::HttpRequestUriInvalid)?;
        *request.uri_mut() = path;
        settle_unframed_body(&mut request).await?;
        let first_byte = timeouts.first_byte_timeout.unwrap_or(Duration::MAX);
        let response = tokio::time::timeout(first_byte, sender.send_request(request))
            .await
            .map_err(|_| Error::ConnectionReadTimeout)?
            .map_err(Error::from)?;
        let between = timeouts
            .between_bytes_timeout
            .unwrap_or(Duration::MAX)
            .max(Duration::from_nanos(1));
        Ok(response.map(|incoming| {
            CappedBody {
                incoming,
                budget,
                between,
                idle: None,
                _conn: AbortOnDrop(conn),
                _in_flight: in_flight,
            }
            .boxed_unsync()
        }))
    }
}

/// Waits for the guest's body of a request that names no body length and
/// whose method hyper sends without one unless told (GET, HEAD, CONNECT).
///
/// A guest hands the request to the host first and writes its body after
/// (wstd does, even an empty one). Given a body of unknown length, hyper
/// sends such a request with none and drops the body at once; the guest's
/// next write or `finish` then finds the stream closed, and wstd reports
/// `connection reset`. Whether the guest got there first was a race, lost
/// now and then on a busy machine. So: an empty body (ended, or only empty
/// chunks) goes as no body; a body with bytes or trailers goes chunked, as
/// for any other method, rather than being thrown away. The call's deadline
/// bounds the wait.
async fn settle_unframed_body(request: &mut http::Request<WasiBody>) -> Result<(), Error> {
    let unframed = matches!(
        *request.method(),
        http::Method::GET | http::Method::HEAD | http::Method::CONNECT
    ) && !request.headers().contains_key(http::header::CONTENT_LENGTH)
        && !request
            .headers()
            .contains_key(http::header::TRANSFER_ENCODING)
        && request.body().size_hint().exact().is_none()
        && !request.body().is_end_stream();
    if !unframed {
        return Ok(());
    }
    let empty = || {
        http_body_util::Empty::new()
            .map_err(|never| match never {})
            .boxed_unsync()
    };
    let mut body = std::mem::replace(request.body_mut(), empty());
    loop {
        match body.frame().await {
            None => return Ok(()),
            Some(Err(e)) => return Err(e),
            Some(Ok(frame)) if frame.data_ref().is_some_and(|data| data.is_empty()) => {}
            Some(Ok(frame)) => {
                request.headers_mut().insert(
                    http::header::TRANSFER_ENCODING,
                    http::HeaderValue::from_static("chunked"),
                );
                // The frame already read, then the rest.
                use futures::StreamExt as _;
                let frames =
                    futures::stream::iter([Ok(frame)]).chain(http_body_util::BodyStream::new(body));
                *request.body_mut() = http_body_util::StreamBody::new(frames).boxed_unsync();
                return Ok(());
            }
        }
    }
}

trait Stream: AsyncRead + AsyncWrite + Send + Unpin {}
impl<T: AsyncRead + AsyncWrite + Send + Unpin> Stream for T {}

/// Response bytes one call may still receive (`limits.max_http_bytes`),
/// shared by every request of the call.
#[derive(Debug)]
pub struct ByteBudget {
    max: u64,
    used: AtomicU64,
}

impl ByteBudget {
    pub fn new(max: u64) -> ByteBudget {
        ByteBudget {
            max,
            used: AtomicU64::new(0),
        }
    }

    fn take(&self, n: usize) -> Result<(), Error> {
        let used = self.used.fetch_add(n as u64, Ordering::Relaxed) + n as u64;
        if used > self.max {
            return Err(Error::HttpResponseBodySize(Some(used)));
        }
        Ok(())
    }
}

struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A response body under the call's byte budget and a between-bytes timeout.
struct CappedBody {
    incoming: hyper::body::Incoming,
    budget: Arc<ByteBudget>,
    between: Duration,
    idle: Option<Pin<Box<tokio::time::Sleep>>>,
    _conn: AbortOnDrop<Result<(), hyper::Error>>,
    _in_flight: OwnedSemaphorePermit,
}

impl Body for CappedBody {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        let this = &mut *self;
        match Pin::new(&mut this.incoming).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.idle = None;
                if let Some(data) = frame.data_ref() {
                    this.budget.take(data.len())?;
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(Error::from(e)))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                let between = this.between;
                let idle = this
                    .idle
                    .get_or_insert_with(|| Box::pin(tokio::time::sleep(between)));
                ready!(idle.as_mut().poll(cx));
                Poll::Ready(Some(Err(Error::ConnectionReadTimeout)))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.incoming.is_end_stream()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::TRANSFER_ENCODING;

    fn body_of(chunks: &[&'static [u8]]) -> WasiBody {
        let frames = chunks
            .iter()
            .map(|chunk| Ok::<_, Error>(Frame::data(Bytes::from_static(chunk))))
            .collect::<Vec<_>>();
        http_body_util::StreamBody::new(futures::stream::iter(frames)).boxed_unsync()
    }

    #[tokio::test]
    async fn a_get_body_of_empty_chunks_goes_as_none() {
        let mut request = http::Request::get("/").body(body_of(&[b"", b""])).unwrap();
        settle_unframed_body(&mut request).await.unwrap();
        assert!(request.body().is_end_stream());
        assert!(!request.headers().contains_key(TRANSFER_ENCODING));
    }

    #[tokio::test]
    async fn a_get_body_with_bytes_goes_chunked_and_whole() {
        let mut request = http::Request::get("/")
            .body(body_of(&[b"", b"ab", b"c"]))
            .unwrap();
        settle_unframed_body(&mut request).await.unwrap();
        assert_eq!(request.headers()[TRANSFER_ENCODING], "chunked");
        let sent = request.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&sent[..], b"abc");
    }

    #[tokio::test]
    async fn other_methods_are_left_to_hyper() {
        let mut request = http::Request::post("/").body(body_of(&[b"x"])).unwrap();
        settle_unframed_body(&mut request).await.unwrap();
        assert!(!request.headers().contains_key(TRANSFER_ENCODING));
        let sent = request.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&sent[..], b"x");
    }
}
