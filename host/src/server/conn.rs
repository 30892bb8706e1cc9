//! Accepting and driving HTTP/1 connections with hyper, under limits that
//! keep slow or silent clients from holding the server:
//!
//! - `max_connections`: one more connection is answered 503 and closed.
//! - `header_timeout`: a request head must arrive within this long of its
//!   first byte (for the first request of a connection: of the connect).
//! - `idle_timeout`: a keep-alive connection waiting for its next request is
//!   closed after this long.
//! - `write_timeout`: a write the client takes none of for this long closes
//!   the connection (a client that never reads its response).
//!
//! (`body_timeout` is a middleware in `server`, so it can answer 408.)
//!
//! hyper's own `header_read_timeout` also runs while a keep-alive connection
//! waits between requests, so it cannot be a short header limit and a longer
//! keep-alive limit at once; a small watchdog per connection does both. It
//! sets no deadline while a request is being answered, so a long call or an
//! SSE stream (a POST's answer, the session's `GET /mcp`) is never cut while
//! its client reads it; only the write timeout applies then.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use http::{Request, Response};
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use hyper_util::server::graceful::GracefulShutdown;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};

use hangar_config::ServerConfig;

/// Refusals (503) being written at once; past it, a refused socket is just closed.
const MAX_REFUSING: usize = 64;
/// How long a refusal may take: write the 503, then read what the client
/// still sends (closing a socket with unread input resets it, and the
/// client could lose the 503).
const REFUSAL_TIME: Duration = Duration::from_secs(2);

/// The connection limits of `[server]`; `None` = no limit.
#[derive(Debug, Clone, Copy)]
pub struct ConnLimits {
    pub max_connections: usize,
    pub header_timeout: Option<Duration>,
    pub idle_timeout: Option<Duration>,
    pub write_timeout: Option<Duration>,
    /// How long running requests may go on after Ctrl-C or SIGTERM.
    pub shutdown_grace: Duration,
}

impl ConnLimits {
    /// How often the watchdog must look at a connection: the shortest
    /// timeout it enforces (`None`: it enforces none).
    fn period(&self) -> Option<Duration> {
        match (self.header_timeout, self.idle_timeout) {
            (Some(h), Some(i)) => Some(h.min(i)),
            (h, i) => h.or(i),
        }
    }

    pub fn from_config(server: &ServerConfig) -> ConnLimits {
        let on = |d: Duration| (!d.is_zero()).then_some(d);
        ConnLimits {
            max_connections: server.max_connections.max(1),
            header_timeout: on(server.header_timeout),
            idle_timeout: on(server.idle_timeout),
            write_timeout: on(server.write_timeout),
            shutdown_grace: server.shutdown_grace,
        }
    }
}

/// Why the server closed a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Closed {
    Header,
    Idle,
    Write,
}

/// Counters for `/healthz`.
#[derive(Debug, Default)]
pub struct HttpStats {
    open: AtomicUsize,
    max: AtomicUsize,
    refused: AtomicU64,
    header_timeouts: AtomicU64,
    body_timeouts: AtomicU64,
    idle_closed: AtomicU64,
    write_timeouts: AtomicU64,
}

/// What `/healthz` shows under `http`.
#[derive(Debug, Serialize)]
pub struct HttpReport {
    pub connections: usize,
    pub max_connections: usize,
    pub refused: u64,
    pub header_timeouts: u64,
    pub body_timeouts: u64,
    pub idle_closed: u64,
    pub write_timeouts: u64,
}

impl HttpStats {
    pub fn report(&self) -> HttpReport {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        HttpReport {
            connections: self.open.load(Ordering::Relaxed),
            max_connections: self.max.load(Ordering::Relaxed),
            refused: get(&self.refused),
            header_timeouts: get(&self.header_timeouts),
            body_timeouts: get(&self.body_timeouts),
            idle_closed: get(&self.idle_closed),
            write_timeouts: get(&self.write_timeouts),
        }
    }

    pub fn body_timed_out(&self) {
        self.body_timeouts.fetch_add(1, Ordering::Relaxed);
    }

    fn closed(&self, why: Closed) {
        let counter = match why {
            Closed::Header => &self.header_timeouts,
            Closed::Idle => &self.idle_closed,
            Closed::Write => &self.write_timeouts,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Accepts connections until `shutdown` resolves, then closes the listener
/// (new connections are refused) and lets running requests finish for up
/// to `shutdown_grace`; idle keep-alive connections close at once.
pub async fn run(
    listener: TcpListener,
    app: Router,
    limits: ConnLimits,
    stats: Arc<HttpStats>,
    shutdown: impl Future<Output = ()>,
) {
    stats.max.store(limits.max_connections, Ordering::Relaxed);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let refusing = Arc::new(Semaphore::new(MAX_REFUSING));
    let graceful = GracefulShutdown::new();
    let http = hyper::server::conn::http1::Builder::new();
    tokio::pin!(shutdown);
    loop {
        let (tcp, client) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait, do not spin.
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            stats.refused.fetch_add(1, Ordering::Relaxed);
            if let Ok(permit) = refusing.clone().try_acquire_owned() {
                let max = limits.max_connections;
                tokio::spawn(async move {
                    refuse(tcp, max).await;
                    drop(permit);
                });
            }
            continue;
        };
        // Without TCP_NODELAY a small response can wait ~40 ms for the client's delayed ACK.
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::warn!("cannot set TCP_NODELAY: {e}");
        }
        let watch = Arc::new(Watch::new());
        let io = TokioIo::new(GuardedIo {
            inner: tcp,
            watch: watch.clone(),
            write_timeout: limits.write_timeout,
            stall: None,
        });
        let service = ConnService {
            app: app.clone(),
            client,
            watch: watch.clone(),
        };
        let conn = graceful.watch(http.serve_connection(io, service));
        let stats = stats.clone();
        stats.open.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            tokio::select! {
                result = conn => match (watch.expired(), result) {
                    (Some(why), _) => {
                        tracing::debug!(%client, "connection closed: {why:?} timeout");
                        stats.closed(why);
                    }
                    (None, Err(e)) => tracing::debug!(%client, "connection ended: {e}"),
                    (None, Ok(())) => {}
                },
                why = watchdog(&watch, limits) => {
                    tracing::debug!(%client, "connection closed: {why:?} timeout");
                    stats.closed(why);
                }
            }
            stats.open.fetch_sub(1, Ordering::Relaxed);
            drop(slot);
        });
    }
    drop(listener);
    let grace = limits.shutdown_grace;
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::info!(
            "requests still running after {grace:?} of shutdown (shutdown_grace); cancelling them"
        );
    }
}

/// Answers a connection over `max_connections` with 503 and closes it.
async fn refuse(mut tcp: TcpStream, max: usize) {
    let body = format!(
        "{{\"error\":\"too many connections: the server is at its limit of {max} (max_connections); retry later\"}}"
    );
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nretry-after: 1\r\n\
         connection: close\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REFUSAL_TIME, async {
        tcp.write_all(answer.as_bytes()).await?;
        tcp.shutdown().await?;
        let mut sink = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            let n = tokio::io::AsyncReadExt::read(&mut tcp, &mut sink).await?;
            if n == 0 {
                break;
            }
            left = left.saturating_sub(n);
        }
        Ok::<_, io::Error>(())
    })
    .await;
}

/// Where a connection is: what deadline applies to it now.
#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Waiting for the rest of a request head that began (or for the first
    /// request of a new connection) at this instant.
    Head(Instant),
    /// Waiting for the next request since this instant (keep-alive).
    Idle(Instant),
    /// Requests being answered (their response bodies not yet done).
    Busy(usize),
}

#[derive(Debug)]
struct WatchState {
    phase: Phase,
    /// A write is blocked on the client: the write timeout governs.
    write_blocked: bool,
    expired: Option<Closed>,
}

/// One connection's phase, shared by its socket, its service and its watchdog.
///
/// Nothing wakes the watchdog when the phase changes (that would cost every
/// request a wake-up): it looks at least every [`ConnLimits::period`], the
/// shortest of the header and idle timeouts, and a phase's deadline is at
/// least that long after its start, so each deadline is still seen on time.
#[derive(Debug)]
struct Watch {
    state: Mutex<WatchState>,
}

impl Watch {
    fn new() -> Watch {
        Watch {
            state: Mutex::new(WatchState {
                phase: Phase::Head(Instant::now()),
                write_blocked: false,
                expired: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, WatchState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn begin(self: &Arc<Self>) -> Answering {
        let mut s = self.lock();
        s.phase = match s.phase {
            Phase::Busy(n) => Phase::Busy(n + 1),
            _ => Phase::Busy(1),
        };
        Answering(self.clone())
    }

    fn end(&self) {
        let mut s = self.lock();
        if let Phase::Busy(n) = s.phase {
            s.phase = if n > 1 {
                Phase::Busy(n - 1)
            } else {
                Phase::Idle(Instant::now())
            };
        }
    }

    fn received(&self) {
        let mut s = self.lock();
        if let Phase::Idle(_) = s.phase {
            s.phase = Phase::Head(Instant::now());
        }
    }

    fn write_blocked(&self) {
        self.lock().write_blocked = true;
    }

    fn write_resumed(&self) {
        let mut s = self.lock();
        s.write_blocked = false;
        // The idle wait starts once the response is out.
        if let Phase::Idle(_) = s.phase {
            s.phase = Phase::Idle(Instant::now());
        }
    }

    fn expire(&self, why: Closed) {
        self.lock().expired = Some(why);
    }

    fn expired(&self) -> Option<Closed> {
        self.lock().expired
    }

    /// The deadline that applies now, if any.
    fn deadline(&self, limits: ConnLimits) -> Option<(Instant, Closed)> {
        let s = self.lock();
        if s.write_blocked {
            return None;
        }
        match s.phase {
            Phase::Head(since) => limits.header_timeout.map(|t| (since + t, Closed::Header)),
            Phase::Idle(since) => limits.idle_timeout.map(|t| (since + t, Closed::Idle)),
            Phase::Busy(_) => None,
        }
    }
}

/// Resolves when the connection's current deadline passes.
async fn watchdog(watch: &Watch, limits: ConnLimits) -> Closed {
    let Some(period) = limits.period() else {
        return std::future::pending().await;
    };
    loop {
        let now = Instant::now();
        let wake = match watch.deadline(limits) {
            Some((at, why)) if at <= now => {
                watch.expire(why);
                return why;
            }
            Some((at, _)) => at.min(now + period),
            None => now + period,
        };
        tokio::time::sleep_until(wake).await;
    }
}

/// A request being answered; its end (the response body done or dropped)
/// makes the connection idle again.
#[derive(Debug)]
struct Answering(Arc<Watch>);

impl Drop for Answering {
    fn drop(&mut self) {
        self.0.end();
    }
}

/// The socket, telling the watchdog when bytes arrive and failing a write
/// the client has taken nothing of for `write_timeout`.
struct GuardedIo {
    inner: TcpStream,
    watch: Arc<Watch>,
    write_timeout: Option<Duration>,
    /// Running while a write is blocked.
    stall: Option<Pin<Box<Sleep>>>,
}

impl GuardedIo {
    fn written<T>(
        &mut self,
        cx: &mut Context<'_>,
        poll: Poll<io::Result<T>>,
    ) -> Poll<io::Result<T>> {
        match poll {
            Poll::Ready(result) => {
                if self.stall.take().is_some() {
                    self.watch.write_resumed();
                }
                Poll::Ready(result)
            }
            Poll::Pending => {
                let Some(timeout) = self.write_timeout else {
                    return Poll::Pending;
                };
                if self.stall.is_none() {
                    self.watch.write_blocked();
                    self.stall = Some(Box::pin(tokio::time::sleep(timeout)));
                }
                let stall = self.stall.as_mut().expect("set above");
                if stall.as_mut().poll(cx).is_ready() {
                    self.watch.expire(Closed::Write);
                    return Poll::Ready(Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "write timeout: the client took none of the response",
                    )));
                }
                Poll::Pending
            }
        }
    }
}

impl AsyncRead for GuardedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(poll, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.watch.received();
        }
        poll
    }
}

impl AsyncWrite for GuardedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.written(cx, poll)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let poll = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.written(cx, poll)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let poll = Pin::new(&mut self.inner).poll_flush(cx);
        self.written(cx, poll)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

/// The app as one connection serves it: the client's address in every
/// request, and the connection busy until each response is done.
#[derive(Clone)]
struct ConnService {
    app: Router,
    client: SocketAddr,
    watch: Arc<Watch>,
}

type ServiceFuture = Pin<Box<dyn Future<Output = Result<Response<Tracked>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for ConnService {
    type Response = Response<Tracked>;
    type Error = Infallible;
    type Future = ServiceFuture;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        let answering = self.watch.begin();
        req.extensions_mut().insert(ConnectInfo(self.client));
        let answer = tower::ServiceExt::oneshot(self.app.clone(), req);
        Box::pin(async move {
            let response = answer.await?;
            Ok(response.map(|body| Tracked {
                body,
                answering: Some(answering),
            }))
        })
    }
}

/// A response body that ends its request's busy phase when it is done.
struct Tracked {
    body: Body,
    answering: Option<Answering>,
}

impl http_body::Body for Tracked {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        let poll = Pin::new(&mut self.body).poll_frame(cx);
        if matches!(poll, Poll::Ready(None | Some(Err(_)))) {
            self.answering = None;
        }
        poll
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
