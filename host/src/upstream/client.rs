//! A small MCP client: `initialize` (then `notifications/initialized`), any
//! request, notifications, and `DELETE` at the end of a session. It owns
//! the wire only, one of two transports: Streamable HTTP (one POST per
//! message, answers as JSON or as an SSE stream whose notifications before
//! the answer are handed to the caller, the `Mcp-Session-Id` and
//! `MCP-Protocol-Version` headers), or a child process over stdio
//! (`super::stdio`, one session per run of the process). Sessions, retries
//! and the breaker are `super`'s.

use std::sync::Arc;
use std::time::Duration;

use http::{HeaderMap, HeaderValue};
use serde_json::{Value, json};

use super::sse::SseParser;
use super::stdio::StdioProcess;
pub use super::wire::{Handshake, Reply, WireError};
use super::wire::{PROTOCOL_VERSION, SUPPORTED_VERSIONS, initialize_message, supported_version};
use hangar_config::{Endpoint, ResolvedUpstream};
use hangar_core::call::AccessToken;
use hangar_core::outbound::{self, BodyError, CappedBody};

/// Where and how to reach one upstream.
#[derive(Clone)]
pub struct Client {
    wire: Wire,
    timeout: Duration,
    max_response_bytes: usize,
}

/// The transport under a client.
#[derive(Clone)]
enum Wire {
    Http {
        http: reqwest::Client,
        url: String,
        headers: HeaderMap,
    },
    /// The child process (dropping the last client stops it).
    Stdio(Arc<StdioProcess>),
}

/// How long one standalone stream is kept open before it is opened again.
const LISTEN_FOR: Duration = Duration::from_secs(300);

/// Called with each notification (or request from the server) that comes
/// before the answer.
pub type OnNotification<'a> = &'a mut (dyn FnMut(&Value) + Send);

impl Client {
    /// A client kept for the upstream's life. Over HTTP its connections
    /// are reused, under the host's outbound policy (`hangar_core::outbound`):
    /// `https://` URLs verified with `tls` (the system roots plus `[http]
    /// extra_ca`), proxies from the environment, redirects only within the
    /// origin, and no answer longer than `max_response_bytes` read. Over
    /// stdio its process is started now (`start = "load"`) or on first use;
    /// what it says outside calls goes to `heard`.
    pub fn new(
        config: &ResolvedUpstream,
        tls: rustls::ClientConfig,
        heard: Arc<super::heard::Heard>,
    ) -> Client {
        let wire = match &config.endpoint {
            Endpoint::Http { url, headers } => Wire::Http {
                http: outbound::client(tls, config.timeout),
                url: url.to_string(),
                headers: headers.clone(),
            },
            Endpoint::Stdio(command) => {
                let process = StdioProcess::new(
                    &config.name,
                    command.clone(),
                    config.max_response_bytes,
                    heard,
                );
                if command.start == hangar_config::Start::Load {
                    process.start();
                }
                Wire::Stdio(Arc::new(process))
            }
        };
        Client {
            wire,
            timeout: config.timeout,
            max_response_bytes: config.max_response_bytes,
        }
    }

    /// Whether its tool list should wait for it while the config loads
    /// (not a stdio upstream started on first use).
    pub fn starts_at_load(&self) -> bool {
        match &self.wire {
            Wire::Http { .. } => true,
            Wire::Stdio(process) => process.started(),
        }
    }

    /// Whether it speaks to a child process (`command`).
    pub fn is_stdio(&self) -> bool {
        matches!(self.wire, Wire::Stdio(_))
    }

    /// Opens a session, declaring `capabilities` (what the client behind
    /// it can be asked). The newest protocol version is asked for; a server
    /// that answers with an older one we speak gets that one, and a server
    /// that refuses the newest outright (a JSON-RPC error or a 400, as some
    /// older servers do) is asked once more with the next.
    pub async fn initialize(
        &self,
        capabilities: Value,
        traceparent: Option<&str>,
        bearer: Option<AccessToken>,
    ) -> Result<Handshake, WireError> {
        if let Wire::Stdio(process) = &self.wire {
            // One session per run of the process, opened by the run.
            return tokio::time::timeout(self.timeout, process.handshake())
                .await
                .unwrap_or(Err(WireError::Timeout));
        }
        let first = self
            .initialize_as(PROTOCOL_VERSION, &capabilities, traceparent, &bearer)
            .await;
        let handshake = match first {
            Err(WireError::Protocol(_)) => {
                self.initialize_as(SUPPORTED_VERSIONS[1], &capabilities, traceparent, &bearer)
                    .await?
            }
            other => other?,
        };
        self.notify(&handshake, "notifications/initialized", json!({}))
            .await?;
        Ok(handshake)
    }

    async fn initialize_as(
        &self,
        version: &str,
        capabilities: &Value,
        traceparent: Option<&str>,
        bearer: &Option<AccessToken>,
    ) -> Result<Handshake, WireError> {
        let fresh = Handshake {
            session_id: None,
            protocol_version: version.to_string(),
            bearer: bearer.clone(),
        };
        let body = initialize_message(version, capabilities);
        let (reply, session_id) = self
            .exchange(&fresh, &body, Some(0), traceparent, &mut |_| {})
            .await?;
        let result = match reply {
            Some(Reply::Result(result)) => result,
            Some(Reply::Error(e)) => {
                return Err(WireError::Protocol(format!("initialize failed: {e}")));
            }
            None => return Err(WireError::Protocol("initialize got no answer".into())),
        };
        Ok(Handshake {
            session_id,
            protocol_version: supported_version(&result, version)?,
            bearer: bearer.clone(),
        })
    }

    /// Sends a request and waits for its answer; notifications that come
    /// first (progress, logs, list changes) go to `on_note`.
    pub async fn request(
        &self,
        session: &Handshake,
        id: u64,
        method: &str,
        params: Value,
        traceparent: Option<&str>,
        on_note: OnNotification<'_>,
    ) -> Result<Reply, WireError> {
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let (reply, _) = self
            .exchange(session, &body, Some(id), traceparent, on_note)
            .await?;
        reply.ok_or_else(|| WireError::Protocol(format!("{method} got no answer")))
    }

    /// Sends a notification (answered 202, no body).
    pub async fn notify(
        &self,
        session: &Handshake,
        method: &str,
        params: Value,
    ) -> Result<(), WireError> {
        let body = json!({ "jsonrpc": "2.0", "method": method, "params": params });
        self.exchange(session, &body, None, None, &mut |_| {})
            .await
            .map(drop)
    }

    /// Answers a request the server sent us (`result` or JSON-RPC `error`).
    pub async fn respond(
        &self,
        session: &Handshake,
        id: Value,
        answer: Result<Value, Value>,
    ) -> Result<(), WireError> {
        let body = match answer {
            Ok(result) => json!({ "jsonrpc": "2.0", "id": id, "result": result }),
            Err(error) => json!({ "jsonrpc": "2.0", "id": id, "error": error }),
        };
        self.exchange(session, &body, None, None, &mut |_| {})
            .await
            .map(drop)
    }

    /// Opens the session's standalone stream (`GET`, HTTP only) and hands
    /// each message on it to `on_message` until it ends: after
    /// [`LISTEN_FOR`], past `max_response_bytes`, or when the server closes
    /// it. A server that offers none answers 405 (`Protocol("HTTP 405 …")`).
    pub async fn listen(
        &self,
        session: &Handshake,
        on_message: OnNotification<'_>,
    ) -> Result<(), WireError> {
        let Wire::Http { http, url, headers } = &self.wire else {
            return Ok(());
        };
        let mut request = http
            .get(url)
            .headers(with_bearer(headers, session))
            .header("accept", "text/event-stream")
            .timeout(LISTEN_FOR);
        if let Some(sid) = &session.session_id {
            request = request
                .header("mcp-session-id", sid)
                .header("mcp-protocol-version", &session.protocol_version);
        }
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        if status == http::StatusCode::NOT_FOUND && session.session_id.is_some() {
            return Err(WireError::SessionExpired);
        }
        if !status.is_success() {
            return Err(WireError::Protocol(format!(
                "HTTP {status} to the standalone stream"
            )));
        }
        let mut body = CappedBody::new(response, self.max_response_bytes).map_err(too_large)?;
        let mut parser = SseParser::default();
        while let Ok(Some(chunk)) = body.chunk().await {
            for data in parser.feed(&chunk) {
                if let Ok(message) = serde_json::from_str::<Value>(&data) {
                    on_message(&message);
                }
            }
        }
        Ok(())
    }

    /// Ends a session (best effort: the server may have forgotten it).
    pub async fn close(&self, session: &Handshake) {
        let Some(id) = &session.session_id else {
            return;
        };
        let Wire::Http { http, url, headers } = &self.wire else {
            return;
        };
        let request = http
            .delete(url)
            .headers(with_bearer(headers, session))
            .header("mcp-session-id", id)
            .header("mcp-protocol-version", &session.protocol_version);
        let _ = tokio::time::timeout(self.timeout, request.send()).await;
    }

    /// Every entry of one list (`method`, e.g. `tools/list`, whose answer
    /// holds the page under `key`), following `nextCursor`.
    pub async fn list_pages(
        &self,
        session: &Handshake,
        first_id: u64,
        method: &str,
        key: &str,
        on_note: OnNotification<'_>,
    ) -> Result<Result<Vec<Value>, Value>, WireError> {
        let mut entries = Vec::new();
        let mut cursor: Option<Value> = None;
        for page in 0..1000u64 {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let reply = self
                .request(session, first_id + page, method, params, None, on_note)
                .await?;
            let result = match reply {
                Reply::Result(result) => result,
                Reply::Error(e) => return Ok(Err(e)),
            };
            if let Some(page) = result.get(key).and_then(Value::as_array) {
                entries.extend(page.iter().cloned());
            }
            match result.get("nextCursor") {
                Some(next) if !next.is_null() => cursor = Some(next.clone()),
                _ => return Ok(Ok(entries)),
            }
        }
        Err(WireError::Protocol(format!("{method} pages never end")))
    }

    /// One POST under the timeout: the answer to `id` (if a request), and
    /// the session id the server gave.
    async fn exchange(
        &self,
        session: &Handshake,
        body: &Value,
        id: Option<u64>,
        traceparent: Option<&str>,
        on_note: OnNotification<'_>,
    ) -> Result<(Option<Reply>, Option<String>), WireError> {
        tokio::time::timeout(
            self.timeout,
            self.exchange_now(session, body, id, traceparent, on_note),
        )
        .await
        .unwrap_or(Err(WireError::Timeout))
    }

    async fn exchange_now(
        &self,
        session: &Handshake,
        body: &Value,
        id: Option<u64>,
        traceparent: Option<&str>,
        on_note: OnNotification<'_>,
    ) -> Result<(Option<Reply>, Option<String>), WireError> {
        let (http, url, headers) = match &self.wire {
            Wire::Http { http, url, headers } => (http, url, headers),
            Wire::Stdio(process) => {
                let answer = process.exchange(body, id, on_note).await?;
                let reply = match (answer, id) {
                    (Some(message), Some(id)) => answer_to(&message, id),
                    _ => None,
                };
                return Ok((reply, None));
            }
        };
        let mut request = http
            .post(url)
            .headers(with_bearer(headers, session))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(serde_json::to_vec(body).expect("JSON values serialize"));
        if let Some(sid) = &session.session_id {
            request = request
                .header("mcp-session-id", sid)
                .header("mcp-protocol-version", &session.protocol_version);
        }
        if let Some(tp) = traceparent {
            request = request.header("traceparent", tp);
        }
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        if status == http::StatusCode::NOT_FOUND && session.session_id.is_some() {
            return Err(WireError::SessionExpired);
        }
        if status.is_server_error() {
            return Err(WireError::Status(status.as_u16()));
        }
        if status.is_redirection() {
            // Only 307/308 within the origin are followed (`hangar_core::outbound`):
            // the configured headers must not go where the operator did not say.
            return Err(WireError::Protocol(format!(
                "HTTP {status}: a redirect elsewhere, not followed"
            )));
        }
        if !status.is_success() {
            return Err(WireError::Protocol(format!("HTTP {status}")));
        }
        let session_id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let Some(id) = id else {
            return Ok((None, session_id));
        };
        let sse = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/event-stream"));
        let mut body = CappedBody::new(response, self.max_response_bytes).map_err(too_large)?;
        if !sse {
            let bytes = body.bytes().await.map_err(too_large)?;
            let message: Value = serde_json::from_slice(&bytes)
                .map_err(|e| WireError::Protocol(format!("bad JSON: {e}")))?;
            return Ok((answer_to(&message, id), session_id));
        }
        let mut parser = SseParser::default();
        while let Some(chunk) = body.chunk().await.map_err(too_large)? {
            for data in parser.feed(&chunk) {
                let Ok(message) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if let Some(reply) = answer_to(&message, id) {
                    return Ok((Some(reply), session_id));
                }
                // Notifications, and requests the server puts to us.
                if message.get("method").is_some() {
                    on_note(&message);
                }
            }
        }
        Err(WireError::Unreachable(
            "the stream ended before the answer".into(),
        ))
    }
}

/// The configured headers, with the session's bearer (the caller's token,
/// `[upstreams.NAME] auth`) in place of any configured `Authorization`.
fn with_bearer(headers: &HeaderMap, session: &Handshake) -> HeaderMap {
    let mut headers = headers.clone();
    if let Some(bearer) = &session.bearer
        && let Ok(mut value) = HeaderValue::from_str(&format!("Bearer {}", bearer.secret()))
    {
        value.set_sensitive(true);
        headers.insert(http::header::AUTHORIZATION, value);
    }
    headers
}

/// The reply in `message` if it answers request `id`.
fn answer_to(message: &Value, id: u64) -> Option<Reply> {
    if message.get("id").and_then(Value::as_u64) != Some(id) || message.get("method").is_some() {
        return None;
    }
    if let Some(error) = message.get("error") {
        return Some(Reply::Error(error.clone()));
    }
    Some(Reply::Result(
        message.get("result").cloned().unwrap_or(Value::Null),
    ))
}

/// A body that could not be read under the cap.
fn too_large(e: BodyError) -> WireError {
    match e {
        BodyError::TooLarge { limit } => WireError::TooLarge(limit),
        BodyError::Broken(e) => unreachable(e),
    }
}

/// A transport error, described without the URL (it may hold secrets).
fn unreachable(e: reqwest::Error) -> WireError {
    if let Some(tls) = tls_error(&e) {
        return WireError::Unreachable(format!("TLS: {tls}"));
    }
    let why = if e.is_connect() {
        "connection failed"
    } else if e.is_timeout() {
        return WireError::Timeout;
    } else if e.is_body() || e.is_decode() {
        "the answer broke off"
    } else {
        "request failed"
    };
    WireError::Unreachable(why.to_string())
}

/// The TLS failure behind a transport error (an untrusted certificate, a
/// name mismatch), if that is what it was. rustls's messages name no URL.
fn tls_error(e: &reqwest::Error) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(e);
    while let Some(err) = source {
        if let Some(tls) = err.downcast_ref::<rustls::Error>() {
            return Some(tls.to_string());
        }
        // An io::Error's `source()` skips the error it wraps: step into that.
        source = match err.downcast_ref::<std::io::Error>() {
            Some(io) => io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_answer_to_our_id_is_the_reply() {
        let note = json!({ "jsonrpc": "2.0", "method": "notifications/progress", "params": {} });
        assert_eq!(answer_to(&note, 1), None);
        let other = json!({ "jsonrpc": "2.0", "id": 2, "result": {} });
        assert_eq!(answer_to(&other, 1), None);
        let ok = json!({ "jsonrpc": "2.0", "id": 1, "result": { "x": 1 } });
        assert_eq!(answer_to(&ok, 1), Some(Reply::Result(json!({ "x": 1 }))));
        let err = json!({ "jsonrpc": "2.0", "id": 1, "error": { "code": -32602, "message": "m" } });
        assert_eq!(
            answer_to(&err, 1),
            Some(Reply::Error(json!({ "code": -32602, "message": "m" })))
        );
        assert!(WireError::Timeout.is_outage() && !WireError::SessionExpired.is_outage());
    }
}
