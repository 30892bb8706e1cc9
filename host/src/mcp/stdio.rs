//! MCP over stdin and stdout (`hangar serve --stdio`): one JSON-RPC
//! message a line each way, one client for the process's life.
//!
//! Nothing here knows a method. Each line goes to the same dispatch as a
//! `POST /mcp` body (`dispatch.rs`), under the headers a client of
//! this transport would have sent: it accepts JSON and SSE answers, names
//! the session its `initialize` opened, and carries `HANGAR_TOKEN` as a
//! bearer token for the auth stage. What comes back is written out as
//! lines: a JSON answer is one, an SSE answer (progress, logs, the call's
//! questions to the client, then its result) one per event as it comes, a
//! 202 none. So limits, auth, progress, cancellation and elicitation,
//! sampling and roots behave as on HTTP. Once the session is open, its
//! stream of unprompted messages (`GET /mcp` on HTTP) is relayed too.
//!
//! Requests run side by side (a call waiting for the client's answer to
//! its question must not stop that answer being read). Lines are read and
//! written on two threads of their own: blocking stdin and stdout are what
//! the process has, and a slow reader of stdout holds back only the writer.
//! At the end of stdin no more is read; the requests running finish, their
//! answers are written, and the transport ends.

use std::io::{BufRead, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::task::{AbortHandle, JoinSet};

use super::dispatch::{Fronts, dispatch};
use super::jsonrpc::{self, RpcError};
use super::legacy::session_stream;
use super::reply::SESSION_HEADER;
use hangar_core::call::Principal;

/// The peer address a stdio request is counted and logged under.
const STDIO_PEER: SocketAddr = SocketAddr::new(std::net::IpAddr::V4(Ipv4Addr::LOCALHOST), 0);

/// Lines read ahead of the dispatch.
const READ_AHEAD: usize = 64;

/// How the stdio client is known to the pipeline.
#[derive(Debug, Clone, Default)]
pub struct StdioOptions {
    /// Sent to the auth stage as `Authorization: Bearer …` with every
    /// request (the `HANGAR_TOKEN` variable).
    pub token: Option<String>,
    /// Every request is made as this subject (its claims: `{"sub": …}`), as
    /// a verified bearer token would make it (`[server] stdio_principal`).
    pub principal: Option<String>,
    /// A longer line is refused (`[server] max_body_bytes`).
    pub max_line_bytes: usize,
    /// What stdin is served, as `/mcp` serves it: `[server] default_toolset`,
    /// or (`None`) the whole catalog.
    pub toolset: Option<hangar_core::call::Toolset>,
}

/// One line from stdin.
enum Line {
    Message(Vec<u8>),
    TooLong,
}

/// What every request of the stdio client shares.
struct Link {
    fronts: Fronts,
    principal: Option<Principal>,
    token: Option<HeaderValue>,
    toolset: Option<hangar_core::call::Toolset>,
    /// The session `initialize` opened, named in each later request.
    session: Mutex<Option<HeaderValue>>,
    /// The relay of that session's stream of unprompted messages.
    listening: Mutex<Option<AbortHandle>>,
    out: mpsc::UnboundedSender<Vec<u8>>,
}

/// Serves the MCP client on stdin and stdout until stdin ends and the
/// requests running have been answered.
pub async fn serve_stdio(fronts: Fronts, options: StdioOptions) {
    let token = match options.token.as_deref().map(bearer) {
        Some(Ok(value)) => Some(value),
        Some(Err(e)) => {
            tracing::error!("HANGAR_TOKEN is not sent: {e}");
            None
        }
        None => None,
    };
    let (out, written) = mpsc::unbounded_channel();
    let writer = std::thread::Builder::new()
        .name("hangar-stdout".into())
        .spawn(move || write_lines(written))
        .expect("spawn the stdout writer");
    let (lines_tx, mut lines) = mpsc::channel(READ_AHEAD);
    let max = options.max_line_bytes.max(1);
    std::thread::Builder::new()
        .name("hangar-stdin".into())
        .spawn(move || read_lines(lines_tx, max))
        .expect("spawn the stdin reader");
    let link = Arc::new(Link {
        fronts,
        principal: (options.principal)
            .map(|subject| Principal::new(subject.clone(), serde_json::json!({ "sub": subject }))),
        token,
        toolset: options.toolset,
        session: Mutex::new(None),
        listening: Mutex::new(None),
        out,
    });
    tracing::info!("serving MCP on stdin and stdout");
    let mut running = JoinSet::new();
    while let Some(line) = lines.recv().await {
        match line {
            Line::TooLong => {
                let error = RpcError::new(
                    jsonrpc::INVALID_REQUEST,
                    format!("Invalid Request: a line is longer than {max} bytes"),
                );
                link.write(jsonrpc::error_body(&Value::Null, &error));
            }
            Line::Message(message) => {
                running.spawn(link.clone().answer(message));
            }
        }
        while running.try_join_next().is_some() {}
    }
    tracing::info!("stdin closed: answering the requests running, then ending");
    while running.join_next().await.is_some() {}
    if let Some(listening) = link.listening.lock().unwrap().take() {
        listening.abort();
    }
    drop(link);
    // Every sender is gone: the writer ends once what is queued is written.
    let _ = tokio::task::spawn_blocking(move || writer.join()).await;
}

impl Link {
    /// Answers one line, writing each message of the answer as it comes.
    async fn answer(self: Arc<Self>, message: Vec<u8>) {
        let headers = self.headers();
        let response = dispatch(
            &self.fronts,
            STDIO_PEER,
            self.principal.clone(),
            self.toolset.clone(),
            &headers,
            &message,
        )
        .await;
        let opened = response.headers().get(SESSION_HEADER).cloned();
        if let Some(session) = &opened {
            *self.session.lock().unwrap() = Some(session.clone());
        }
        self.relay(response).await;
        if opened.is_some() {
            let listening = tokio::spawn(self.clone().listen()).abort_handle();
            if let Some(before) = self.listening.lock().unwrap().replace(listening) {
                before.abort();
            }
        }
    }

    /// Relays the session's stream of unprompted messages (what `GET /mcp`
    /// carries on HTTP: resource updates, lists a reload changed). The
    /// stream also keeps the session in use, as an open `GET /mcp` does.
    async fn listen(self: Arc<Self>) {
        let response = session_stream(
            self.fronts.state(),
            STDIO_PEER,
            self.principal.as_ref(),
            self.toolset.clone(),
            &self.headers(),
        )
        .await;
        if !response.status().is_success() {
            tracing::warn!(status = %response.status(), "stdio: the session's stream was refused");
            return;
        }
        self.relay(response).await;
    }

    /// The headers a client of this transport sends with every message.
    fn headers(&self) -> HeaderMap {
        let mut headers = HeaderMap::with_capacity(4);
        headers.insert(
            ACCEPT,
            HeaderValue::from_static("application/json, text/event-stream"),
        );
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(token) = &self.token {
            headers.insert(AUTHORIZATION, token.clone());
        }
        if let Some(session) = &*self.session.lock().unwrap() {
            headers.insert(SESSION_HEADER, session.clone());
        }
        headers
    }

    /// Writes an answer's messages: a JSON body as one line, each event of
    /// an SSE body as one line as it arrives, nothing for a 202.
    async fn relay(&self, response: Response) {
        if response.status() == StatusCode::ACCEPTED {
            return;
        }
        let sse = response
            .headers()
            .get(CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
        let mut body = response.into_body().into_data_stream();
        let mut pending = Vec::new();
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(e) => {
                    tracing::warn!("stdio: an answer's body failed: {e}");
                    return;
                }
            };
            pending.extend_from_slice(&chunk);
            if sse {
                for message in take_events(&mut pending) {
                    self.write(message);
                }
            }
        }
        if !sse && !pending.is_empty() {
            self.write(pending);
        }
    }

    fn write(&self, message: Vec<u8>) {
        // The writer is gone only when stdout is: nothing more can be said.
        let _ = self.out.send(message);
    }
}

/// `Authorization: Bearer <token>`; an error for a token that cannot be a
/// header value.
fn bearer(token: &str) -> Result<HeaderValue, String> {
    HeaderValue::from_str(&format!("Bearer {}", token.trim()))
        .map_err(|_| "it is not visible ASCII".to_string())
}

/// The data of each whole SSE event at the front of `pending` (which keeps
/// what follows the last whole one); comments and empty events give none.
fn take_events(pending: &mut Vec<u8>) -> Vec<Vec<u8>> {
    let mut events = Vec::new();
    let mut start = 0;
    while let Some(end) = find(&pending[start..], b"\n\n") {
        let event = &pending[start..start + end];
        let mut data = Vec::new();
        for line in event.split(|b| *b == b'\n') {
            if let Some(rest) = line.strip_prefix(b"data:") {
                if !data.is_empty() {
                    data.push(b'\n');
                }
                data.extend_from_slice(rest.strip_prefix(b" ").unwrap_or(rest));
            }
        }
        if !data.is_empty() {
            events.push(data);
        }
        start += end + 2;
    }
    pending.drain(..start);
    events
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads stdin a line at a time (a trailing `\r` dropped, blank lines
/// skipped), until it ends or nobody takes lines any more.
fn read_lines(lines: mpsc::Sender<Line>, max: usize) {
    let stdin = std::io::stdin();
    let mut input = stdin.lock();
    loop {
        let mut buf = Vec::new();
        let read = std::io::Read::take(&mut input, max as u64 + 1).read_until(b'\n', &mut buf);
        let line = match read {
            Ok(0) => return,
            Ok(_) if buf.last() != Some(&b'\n') && buf.len() > max => {
                // The rest of the line is skipped, whatever its length.
                if let Err(e) = input.skip_until(b'\n') {
                    tracing::error!("stdin: {e}");
                    return;
                }
                Line::TooLong
            }
            Ok(_) => {
                while matches!(buf.last(), Some(b'\n' | b'\r')) {
                    buf.pop();
                }
                if buf.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                Line::Message(buf)
            }
            Err(e) => {
                tracing::error!("stdin: {e}");
                return;
            }
        };
        if lines.blocking_send(line).is_err() {
            return;
        }
    }
}

/// Writes each message and a newline to stdout, flushing when no more are
/// queued; ends when every sender is gone or stdout is closed.
fn write_lines(mut messages: mpsc::UnboundedReceiver<Vec<u8>>) {
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    while let Some(message) = messages.blocking_recv() {
        let mut next = Some(message);
        while let Some(message) = next {
            if out
                .write_all(&message)
                .and_then(|()| out.write_all(b"\n"))
                .is_err()
            {
                tracing::warn!("stdout closed: no more answers are written");
                return;
            }
            next = messages.try_recv().ok();
        }
        if out.flush().is_err() {
            tracing::warn!("stdout closed: no more answers are written");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_events_become_lines_and_a_partial_one_waits() {
        let mut pending =
            b": stream open\n\nevent: message\ndata: {\"a\":1}\n\nevent: message\ndata: {\"b\""
                .to_vec();
        assert_eq!(take_events(&mut pending), vec![b"{\"a\":1}".to_vec()]);
        assert_eq!(pending, b"event: message\ndata: {\"b\"".to_vec());
        pending.extend_from_slice(b":2}\n\n");
        assert_eq!(take_events(&mut pending), vec![b"{\"b\":2}".to_vec()]);
        assert!(pending.is_empty());
    }

    #[test]
    fn a_token_that_is_no_header_value_is_refused() {
        assert_eq!(bearer(" abc ").unwrap(), "Bearer abc");
        assert!(bearer("a\nb").is_err());
    }
}
