//! Upstream MCP servers as a backend: an [`Upstream`] owns one server's
//! client, its sessions (one per client session, or per principal for
//! session-less callers), its circuit breaker and its live tool list. It
//! speaks the call vocabulary (`CallContext`, `CallError`, `ToolResult`),
//! never the surfaces.

mod breaker;
mod client;
mod sse;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Instant;

use serde_json::{Value, json};

use breaker::Breaker;
pub use breaker::BreakerState;
use client::{Client, Handshake, Reply, WireError};

use crate::catalog::{Annotations, ToolDef};
use crate::config::ResolvedUpstream;
use crate::pipeline::{
    AskError, AskKind, Askable, CallContext, CallError, ErrorKind, LogLevel, Stage, ToolResult,
};

/// Upstream sessions kept at once per upstream; past it the least recently
/// used is closed.
const MAX_SESSIONS: usize = 1024;

/// An upstream session unused this long is closed when another is opened.
const IDLE_SESSION: std::time::Duration = std::time::Duration::from_secs(30 * 60);

/// The session key of the catalog's own listings.
const CATALOG_KEY: &str = "hangar:catalog";

/// One upstream MCP server.
pub struct Upstream {
    pub name: String,
    config: ResolvedUpstream,
    client: Client,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    breaker: Breaker,
    /// The tools it lists now, by their upstream name (prefixed definitions).
    tools: RwLock<Arc<Vec<(String, ToolDef)>>>,
    next_id: AtomicU64,
    /// Wakes the refresh task (the upstream said its list changed).
    refresh_wanted: Arc<tokio::sync::Notify>,
    changes: Arc<ToolChanges>,
}

/// Bumped each time an upstream's tool list changes after the first
/// listing: what a surface watches to send `notifications/tools/list_changed`
/// (wired with hot reload's catalog swap).
pub type ToolChanges = tokio::sync::watch::Sender<u64>;

/// One upstream session, opened on first use; the lock makes concurrent
/// first calls share one `initialize`.
#[derive(Default)]
struct Slot {
    handshake: tokio::sync::Mutex<Option<Handshake>>,
    used: Mutex<Option<Instant>>,
}

impl Upstream {
    /// `changes` counts tool-list changes of every upstream of one catalog
    /// (see `Catalog::upstream_changes`).
    pub fn new(config: ResolvedUpstream, changes: Arc<ToolChanges>) -> Arc<Upstream> {
        let client = Client::new(&config.url, config.headers.clone(), config.timeout);
        Arc::new(Upstream {
            name: config.name.clone(),
            breaker: Breaker::new(config.breaker_failures, config.breaker_cooldown),
            config,
            client,
            sessions: Mutex::default(),
            tools: RwLock::default(),
            next_id: AtomicU64::new(1),
            refresh_wanted: Arc::default(),
            changes,
        })
    }

    /// The tools it listed last, allowlisted and prefixed: (upstream name, definition).
    pub fn tools(&self) -> Arc<Vec<(String, ToolDef)>> {
        self.tools.read().expect("tools lock").clone()
    }

    /// The current definition of its tool `remote` (as the upstream names it).
    pub fn current_def(&self, remote: &str) -> Option<ToolDef> {
        let tools = self.tools();
        tools
            .iter()
            .find(|(r, _)| r == remote)
            .map(|(_, d)| d.clone())
    }

    pub fn breaker_state(&self) -> (BreakerState, u32) {
        self.breaker.state()
    }

    /// Fetches its tool list again and keeps it. This is the one refresh
    /// entry point (startup, `list_changed`, the periodic timer); a catalog
    /// swap on reload can call it too. Returns how many tools it lists.
    pub async fn refresh(&self) -> Result<usize, String> {
        let listed = self
            .with_session(CATALOG_KEY, None, json!({}), |client, hs, id| async move {
                client.list_tools(&hs, id, &mut |_| {}).await
            })
            .await
            .map_err(|e| e.to_string())?;
        let listed =
            listed.map_err(|e| format!("upstream: {}: tools/list failed: {e}", self.name))?;
        let mut tools = Vec::new();
        for raw in listed {
            let Some(remote) = raw.get("name").and_then(Value::as_str) else {
                continue;
            };
            if let Some(allowed) = &self.config.tools
                && !allowed.iter().any(|a| a == remote)
            {
                continue;
            }
            tools.push((
                remote.to_string(),
                tool_def(&self.config.prefix, remote, &raw),
            ));
        }
        let count = tools.len();
        let changed = {
            let mut current = self.tools.write().expect("tools lock");
            let changed = current.as_slice() != tools.as_slice();
            *current = Arc::new(tools);
            changed
        };
        if changed {
            tracing::info!(upstream = %self.name, tools = count, "upstream tool list refreshed");
            self.changes.send_modify(|n| *n += 1);
        }
        Ok(count)
    }

    /// Refreshes when the upstream says its list changed, and every
    /// `refresh` period, for as long as the upstream is in use.
    pub fn spawn_refresh(self: &Arc<Self>) {
        let weak: Weak<Upstream> = Arc::downgrade(self);
        let period = self.config.refresh;
        let notify = self.refresh_wanted.clone();
        tokio::spawn(async move {
            loop {
                let wanted = notify.notified();
                tokio::pin!(wanted);
                wanted.as_mut().enable();
                if weak.strong_count() == 0 {
                    return;
                }
                if period.is_zero() {
                    wanted.await;
                } else {
                    tokio::select! {
                        _ = wanted => {}
                        _ = tokio::time::sleep(period) => {}
                    }
                }
                let Some(upstream) = weak.upgrade() else {
                    return;
                };
                if let Err(e) = upstream.refresh().await {
                    tracing::warn!(upstream = %upstream.name, "refreshing tools: {e}");
                }
            }
        });
    }

    /// Calls its tool `remote` in the caller's upstream session; progress
    /// and logs are relayed to the call's events, cancellation forwarded.
    pub async fn call(
        &self,
        remote: &str,
        args: &Value,
        cx: &CallContext,
    ) -> Result<ToolResult, CallError> {
        let key = session_key(cx);
        let traceparent = traceparent(cx);
        let sink = cx.events.clone();
        let reply = self
            .with_session(&key, traceparent.as_deref(), capabilities(cx), |client, hs, id| {
                let sink = sink.clone();
                let tp = traceparent.clone();
                let arguments = if args.is_null() { json!({}) } else { args.clone() };
                let params = json!({
                    "name": remote,
                    "arguments": arguments,
                    "_meta": { "progressToken": id },
                });
                async move {
                    let mut on_note = |note: &Value| self.relay(note, &sink, &client, &hs);
                    let call =
                        client.request(&hs, id, "tools/call", params, tp.as_deref(), &mut on_note);
                    let (reply, why) = tokio::select! {
                        reply = call => {
                            let timed_out = reply == Err(WireError::Timeout);
                            (reply, timed_out.then_some("timed out"))
                        }
                        _ = cx.cancel.cancelled() => {
                            (Err(WireError::Protocol("cancelled".into())), Some("cancelled by the client"))
                        }
                    };
                    // The upstream need not finish a call nobody waits for.
                    if let Some(why) = why {
                        let client = client.clone();
                        tokio::spawn(async move {
                            let params = json!({ "requestId": id, "reason": why });
                            let _ = client.notify(&hs, "notifications/cancelled", params).await;
                        });
                    }
                    reply
                }
            })
            .await;
        if cx.cancel.is_cancelled() {
            return Err(CallError::cancelled(Stage::Upstream));
        }
        match reply? {
            Reply::Result(result) => serde_json::from_value(result).map_err(|e| {
                self.error(
                    ErrorKind::Failed,
                    &format!("answered no CallToolResult: {e}"),
                )
            }),
            Reply::Error(error) => {
                // The MCP surface passes the object on; others show its message.
                let message = error.get("message").and_then(Value::as_str).unwrap_or("");
                let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
                let what = format!("answered error {code}: {message}");
                Err(CallError {
                    upstream_error: Some(error),
                    ..self.error(ErrorKind::Failed, &what)
                })
            }
        }
    }

    /// Relays one notification the upstream sent during a call, and answers
    /// its requests: elicitation and sampling are put to the call's own
    /// client (when it can be asked), `ping` is answered, the rest refused.
    fn relay(
        &self,
        note: &Value,
        sink: &crate::pipeline::EventSink,
        client: &Client,
        hs: &Handshake,
    ) {
        if let Some(id) = note.get("id").filter(|id| !id.is_null()) {
            let kind = match note.get("method").and_then(Value::as_str) {
                Some("elicitation/create") => Some(AskKind::Elicit),
                Some("sampling/createMessage") => Some(AskKind::Sample),
                _ => None,
            };
            let ping = note.get("method").and_then(Value::as_str) == Some("ping");
            let params = note.get("params").cloned().unwrap_or(json!({}));
            let until = Instant::now() + self.config.timeout;
            let (client, hs, id, sink) = (client.clone(), hs.clone(), id.clone(), sink.clone());
            tokio::spawn(async move {
                let answer = match kind {
                    // The question goes to this call's client; its answer comes back.
                    Some(kind) => sink.ask(kind, params, until).await.map_err(|e| match e {
                        AskError::Unsupported(m) => json!({ "code": -32601, "message": m }),
                        AskError::Failed(m) => json!({ "code": -32603, "message": m }),
                        AskError::Timeout => json!({ "code": -32001, "message": "timed out" }),
                    }),
                    None if ping => Ok(json!({})),
                    None => Err(json!({ "code": -32601, "message": "Method not found" })),
                };
                client.respond(&hs, id, answer).await
            });
            return;
        }
        let params = note.get("params").cloned().unwrap_or(Value::Null);
        match note.get("method").and_then(Value::as_str) {
            Some("notifications/progress") => {
                let Some(progress) = params.get("progress").and_then(Value::as_f64) else {
                    return;
                };
                let total = params.get("total").and_then(Value::as_f64);
                let message = params
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                sink.progress(progress, total, message);
            }
            Some("notifications/message") => {
                let level = params
                    .get("level")
                    .and_then(|l| serde_json::from_value::<LogLevel>(l.clone()).ok())
                    .unwrap_or(LogLevel::Info);
                let logger = params.get("logger").and_then(Value::as_str);
                let logger =
                    logger.map_or_else(|| self.name.clone(), |l| format!("{}/{l}", self.name));
                let message = match params.get("data") {
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                sink.log(level, &logger, &message);
            }
            Some("notifications/tools/list_changed") => self.refresh_wanted.notify_one(),
            _ => {}
        }
    }

    /// Runs `op` in the session keyed `key` under the breaker: opens the
    /// session if needed, and opens it again once if the upstream forgot it.
    async fn with_session<T, F, Fut>(
        &self,
        key: &str,
        traceparent: Option<&str>,
        capabilities: Value,
        op: F,
    ) -> Result<T, CallError>
    where
        F: Fn(Client, Handshake, u64) -> Fut,
        Fut: std::future::Future<Output = Result<T, WireError>>,
    {
        if let Err(left) = self.breaker.admit() {
            return Err(self.error(
                ErrorKind::Failed,
                &format!(
                    "unavailable: circuit open after repeated failures, retrying in {}s",
                    left.as_secs().max(1)
                ),
            ));
        }
        let slot = self.slot(key);
        for attempt in 0..2 {
            let outcome = async {
                let hs = {
                    let mut guard = slot.handshake.lock().await;
                    match &*guard {
                        Some(hs) => hs.clone(),
                        None => {
                            let hs = self
                                .client
                                .initialize(capabilities.clone(), traceparent)
                                .await?;
                            *guard = Some(hs.clone());
                            hs
                        }
                    }
                };
                let id = self.next_id.fetch_add(16, Ordering::Relaxed);
                op(self.client.clone(), hs, id).await
            }
            .await;
            match outcome {
                Ok(value) => {
                    self.breaker.success();
                    return Ok(value);
                }
                Err(WireError::SessionExpired) if attempt == 0 => {
                    tracing::info!(upstream = %self.name, "upstream session expired; opening a new one");
                    *slot.handshake.lock().await = None;
                }
                Err(e) => {
                    if e.is_outage() && self.breaker.failure() {
                        tracing::warn!(upstream = %self.name, "upstream circuit breaker opened: {e}");
                    }
                    if e.is_outage() {
                        // The next call starts afresh (the server may have restarted).
                        *slot.handshake.lock().await = None;
                    }
                    let kind = match e {
                        WireError::Timeout => ErrorKind::Limit,
                        _ => ErrorKind::Failed,
                    };
                    return Err(self.error(kind, &e.to_string()));
                }
            }
        }
        Err(self.error(ErrorKind::Failed, "session expired twice"))
    }

    /// The slot for `key`, made on first use. Making one also closes the
    /// sessions idle longer than [`IDLE_SESSION`] (their client session is
    /// most likely gone), and the least recently used past [`MAX_SESSIONS`].
    fn slot(&self, key: &str) -> Arc<Slot> {
        let mut sessions = self.sessions.lock().expect("sessions lock");
        let slot = match sessions.get(key) {
            Some(slot) => slot.clone(),
            None => {
                let now = Instant::now();
                let idle = |s: &Slot| {
                    s.used
                        .lock()
                        .expect("used lock")
                        .is_none_or(|t| now.duration_since(t) > IDLE_SESSION)
                };
                let mut gone: Vec<String> = sessions
                    .iter()
                    .filter(|(k, s)| k.as_str() != CATALOG_KEY && idle(s))
                    .map(|(k, _)| k.clone())
                    .collect();
                if gone.is_empty()
                    && sessions.len() >= MAX_SESSIONS
                    && let Some(oldest) = sessions
                        .iter()
                        .filter(|(k, _)| k.as_str() != CATALOG_KEY)
                        .min_by_key(|(_, s)| *s.used.lock().expect("used lock"))
                        .map(|(k, _)| k.clone())
                {
                    gone.push(oldest);
                }
                for key in gone {
                    let Some(evicted) = sessions.remove(&key) else {
                        continue;
                    };
                    let client = self.client.clone();
                    tokio::spawn(async move {
                        if let Some(hs) = evicted.handshake.lock().await.take() {
                            client.close(&hs).await;
                        }
                    });
                }
                let slot = Arc::new(Slot::default());
                sessions.insert(key.to_string(), slot.clone());
                slot
            }
        };
        *slot.used.lock().expect("used lock") = Some(Instant::now());
        slot
    }

    /// An error at stage `upstream` naming this upstream (never its URL):
    /// shown as `upstream: NAME: what`.
    fn error(&self, kind: ErrorKind, what: &str) -> CallError {
        CallError::new(Stage::Upstream, kind, format!("{}: {what}", self.name))
    }
}

/// Whose upstream session a call uses: its client session's, else its
/// principal's, else the anonymous one.
fn session_key(cx: &CallContext) -> String {
    match (&cx.session_id, &cx.principal) {
        (Some(id), _) => format!("session:{id}"),
        (None, Some(p)) => format!("principal:{}", p.subject),
        (None, None) => "anonymous".to_string(),
    }
}

/// The client capabilities an upstream session declares: the questions the
/// call that opens it can put to its own client (relayed, see `relay`).
fn capabilities(cx: &CallContext) -> Value {
    match cx.events.askable() {
        Askable::Yes {
            elicitation,
            sampling,
        } => {
            let mut caps = json!({});
            if elicitation {
                caps["elicitation"] = json!({});
            }
            if sampling {
                caps["sampling"] = json!({});
            }
            caps
        }
        Askable::No(_) => json!({}),
    }
}

/// A W3C `traceparent` continuing the call's trace id.
fn traceparent(cx: &CallContext) -> Option<String> {
    let id = &cx.trace_id;
    if id.len() != 32 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let span = uuid::Uuid::new_v4().as_u64_pair().0 | 1;
    Some(format!("00-{id}-{span:016x}-01"))
}

/// A catalog definition of an upstream tool, its name prefixed.
fn tool_def(prefix: &str, remote: &str, raw: &Value) -> ToolDef {
    let text = |key: &str| raw.get(key).and_then(Value::as_str).map(str::to_owned);
    let hint = |a: &Value, key: &str| a.get(key).and_then(Value::as_bool);
    let annotations = raw
        .get("annotations")
        .filter(|a| a.is_object())
        .map(|a| Annotations {
            read_only_hint: hint(a, "readOnlyHint"),
            destructive_hint: hint(a, "destructiveHint"),
            idempotent_hint: hint(a, "idempotentHint"),
            open_world_hint: hint(a, "openWorldHint"),
        });
    ToolDef {
        name: format!("{prefix}{remote}"),
        title: text("title"),
        description: text("description").unwrap_or_default(),
        input_schema: raw
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| json!({ "type": "object" })),
        output_schema: raw.get("outputSchema").filter(|s| s.is_object()).cloned(),
        annotations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_tool_is_prefixed_with_its_schema_and_hints() {
        let raw = json!({
            "name": "add", "description": "Adds",
            "inputSchema": { "type": "object", "properties": { "a": { "type": "integer" } } },
            "annotations": { "readOnlyHint": true, "title": "ignored" }
        });
        let def = tool_def("up.", "add", &raw);
        assert_eq!(def.name, "up.add");
        assert_eq!(def.description, "Adds");
        assert_eq!(def.input_schema["properties"]["a"]["type"], "integer");
        assert_eq!(def.annotations.unwrap().read_only_hint, Some(true));
    }

    #[test]
    fn sessions_are_per_client_session_then_principal() {
        let mut cx = CallContext::new(None);
        assert_eq!(session_key(&cx), "anonymous");
        cx.principal = Some(crate::pipeline::Principal {
            subject: "ana".into(),
            claims: json!({}),
        });
        assert_eq!(session_key(&cx), "principal:ana");
        cx.session_id = Some("s1".into());
        assert_eq!(session_key(&cx), "session:s1");
        let tp = traceparent(&cx).unwrap();
        assert!(tp.starts_with(&format!("00-{}-", cx.trace_id)) && tp.len() == 55);
    }
}
