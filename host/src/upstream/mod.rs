//! Upstream MCP servers as a backend: an [`Upstream`] owns one server's
//! client, its sessions (one per client session, or per principal for
//! session-less callers), its circuit breaker and its live tool, resource
//! and template lists. It speaks the call vocabulary (`CallContext`,
//! `CallError`, `ToolResult`, `ReadResult`), never the surfaces.

mod auth;
mod breaker;
mod client;
mod heard;
mod lines;
mod offers;
mod prompts;
mod relay;
mod resources;
mod sessions;
mod slot;
mod sse;
mod stdio;
mod tools;
mod updates;
mod wire;

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::Duration;

use serde_json::{Value, json};

use auth::UpstreamAuth;
use breaker::Breaker;
pub use breaker::BreakerState;
use client::{Client, Reply, WireError};
pub use offers::UpstreamOffers;
use slot::{CATALOG_KEY, Slot, capabilities, session_key};
use tools::tool_def;

use hangar_config::{ResolvedAuth, ResolvedUpstream};
use hangar_core::call::ToolDef;
use hangar_core::call::{AccessToken, CallContext, CallError, ErrorKind, Stage, ToolResult};

/// One upstream MCP server.
pub struct Upstream {
    pub name: String,
    config: ResolvedUpstream,
    client: Client,
    sessions: Mutex<HashMap<String, Arc<Slot>>>,
    breaker: Breaker,
    /// The tools it lists now, by their upstream name (prefixed definitions).
    tools: RwLock<Arc<Vec<(String, ToolDef)>>>,
    /// The resources and templates it lists now (URIs as it gives them).
    offers: RwLock<Arc<UpstreamOffers>>,
    next_id: AtomicU64,
    /// Wakes the refresh task (the upstream said its list changed).
    refresh_wanted: Arc<tokio::sync::Notify>,
    /// What it says outside calls: lists changed, watched resources updated.
    heard: Arc<heard::Heard>,
    changes: Arc<ToolChanges>,
    /// Why it has never listed its tools (`None` once it has).
    listing_error: Mutex<Option<String>>,
    /// `start = "first-use"` (a stdio upstream not started at load).
    lazy: bool,
    /// The first use of such an upstream: the listing that starts it
    /// (once; others wait for the same one).
    first_use: tokio::sync::OnceCell<()>,
    /// Tells the refresh task that the first use has started it.
    used: Arc<tokio::sync::Notify>,
    /// Whose token its calls carry (`auth`).
    auth: UpstreamAuth,
}

/// Bumped each time an upstream's tool or resource lists change: what the
/// reloader watches to put a catalog with the new lists in service, after
/// which sessions hear the lists' `list_changed` (as after a reload).
pub type ToolChanges = tokio::sync::watch::Sender<u64>;

/// How soon an upstream that has never listed its tools is asked again
/// (or its `refresh` period, if shorter and not 0).
const RETRY_UNLISTED: Duration = Duration::from_secs(10);

impl Upstream {
    /// `changes` counts tool-list changes of every upstream of one catalog
    /// (see `Catalog::upstream_changes`); `tls` verifies `https://` URLs.
    pub fn new(
        config: ResolvedUpstream,
        changes: Arc<ToolChanges>,
        tls: rustls::ClientConfig,
        accounts: &Arc<hangar_core::accounts::Accounts>,
        updates: hangar_core::call::ResourceChanges,
    ) -> Arc<Upstream> {
        let auth = match &config.auth {
            None => UpstreamAuth::Own,
            Some(ResolvedAuth::Credential(provider)) => UpstreamAuth::Credential {
                provider: provider.clone(),
                accounts: accounts.clone(),
            },
            Some(ResolvedAuth::Exchange {
                token_url,
                client_id,
                client_secret,
                audience,
                resource,
                scopes,
            }) => UpstreamAuth::Exchange(Box::new(hangar_core::accounts::Exchanger::new(
                hangar_core::accounts::ExchangeSettings {
                    token_url: token_url.clone(),
                    client_id: client_id.clone(),
                    client_secret: client_secret.clone(),
                    audience: audience.clone(),
                    resource: resource.clone(),
                    scopes: scopes.clone(),
                },
                tls.clone(),
            ))),
        };
        let heard = heard::Heard::new(updates);
        let refresh_wanted = heard.refresh.clone();
        let client = Client::new(&config, tls, heard.clone());
        let lazy = !client.starts_at_load();
        Arc::new(Upstream {
            name: config.name.clone(),
            breaker: Breaker::new(config.breaker_failures, config.breaker_cooldown),
            config,
            client,
            sessions: Mutex::default(),
            tools: RwLock::default(),
            offers: RwLock::default(),
            next_id: AtomicU64::new(1),
            refresh_wanted,
            heard,
            changes,
            listing_error: Mutex::new(Some("not listed yet".into())),
            lazy,
            first_use: tokio::sync::OnceCell::new(),
            used: Arc::new(tokio::sync::Notify::new()),
            auth,
        })
    }

    /// Why it has never listed its tools, if it has not (a problem in
    /// `/healthz` and `hangar check`); a later failure is not one (its tools
    /// stay listed, its breaker tells).
    pub fn listing_error(&self) -> Option<String> {
        self.listing_error.lock().expect("listing lock").clone()
    }

    /// Whether loading the config waits for its tool list: not for a stdio
    /// upstream started on first use (nothing runs until a client lists).
    pub fn starts_at_load(&self) -> bool {
        self.client.starts_at_load()
    }

    /// A stdio upstream with `start = "first-use"` that no listing has
    /// started yet: it has no tools and no problem until then.
    pub fn awaits_first_use(&self) -> bool {
        !self.client.starts_at_load()
    }

    /// Whether its process has been started (`None`: not a stdio upstream).
    pub fn started(&self) -> Option<bool> {
        self.client.is_stdio().then(|| self.client.starts_at_load())
    }

    /// Its first use, for a listing: starts the process and lists it
    /// (bounded by its `timeout`), once; a listing that comes meanwhile
    /// waits for the same one. True when this upstream was waiting for it.
    pub async fn first_use(&self) -> bool {
        if !self.lazy || self.first_use.initialized() {
            return false;
        }
        self.first_use
            .get_or_init(|| async {
                if let Err(e) = self.refresh().await {
                    tracing::warn!(upstream = %self.name, "starting on first use: {e}");
                    // Its problem is one now: the catalog in service takes it.
                    self.changes.send_modify(|n| *n += 1);
                }
                self.used.notify_one();
            })
            .await;
        true
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

    /// The adapter of its tool `remote` (as the upstream names it).
    pub fn adapter(&self, remote: &str) -> Option<&hangar_config::AdapterConfig> {
        self.config.adapters.get(remote)
    }

    /// Its adapters whose tool it does not list (or its `tools` leaves
    /// out): `adapter_wiring_incomplete` in `/healthz`. None before it
    /// has listed.
    pub fn unwired_adapters(&self) -> Vec<String> {
        if self.listing_error().is_some() || self.awaits_first_use() {
            return Vec::new();
        }
        let tools = self.tools();
        (self.config.adapters.keys())
            .filter(|name| !tools.iter().any(|(remote, _)| remote == *name))
            .cloned()
            .collect()
    }

    /// Whether one of its listed tools takes uploads (`upload_consumer`).
    pub fn consumes_uploads(&self) -> bool {
        let tools = self.tools();
        tools.iter().any(|(remote, _)| {
            self.adapter(remote)
                .is_some_and(|a| a.kind == hangar_config::AdapterKind::UploadConsumer)
        })
    }

    pub fn breaker_state(&self) -> (BreakerState, u32) {
        self.breaker.state()
    }

    /// Fetches its tool list (and its resource and template lists, when
    /// they are offered) again and keeps them. This is the one refresh
    /// entry point (startup, `list_changed`, the periodic timer); a catalog
    /// swap on reload can call it too. Returns how many tools it lists.
    /// Resources that cannot be listed keep the last list (a warning): the
    /// tools do not wait on them.
    pub async fn refresh(&self) -> Result<usize, String> {
        let listed = self.list().await;
        if let Err(e) = &listed {
            let mut never = self.listing_error.lock().expect("listing lock");
            if never.is_some() {
                *never = Some(e.clone());
            }
        }
        let listed = listed?;
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
            let adapter = self.config.adapters.get(remote);
            tools.push((
                remote.to_string(),
                tool_def(&self.config.prefix, remote, &raw, adapter),
            ));
        }
        let count = tools.len();
        let offers = if self.config.resources || self.config.prompts {
            self.list_offers().await.map_err(|e| {
                tracing::warn!(upstream = %self.name, "listing resources: {e}");
            })
        } else {
            Ok(UpstreamOffers::default())
        };
        let mut changed = {
            let mut current = self.tools.write().expect("tools lock");
            let changed = current.as_slice() != tools.as_slice();
            *current = Arc::new(tools);
            changed
        };
        if let Ok(offers) = offers {
            let mut current = self.offers.write().expect("offers lock");
            changed |= **current != offers;
            *current = Arc::new(offers);
        }
        let first = self
            .listing_error
            .lock()
            .expect("listing lock")
            .take()
            .is_some();
        // A restarted upstream forgot what it was subscribed to.
        self.resubscribe().await;
        if changed || first {
            let offers = self.offers();
            tracing::info!(
                upstream = %self.name,
                tools = count,
                resources = offers.resources.len(),
                templates = offers.templates.len(),
                "upstream tool list refreshed"
            );
            self.changes.send_modify(|n| *n += 1);
        }
        Ok(count)
    }

    /// Its tool list, every page; errors name the upstream, not its URL.
    async fn list(&self) -> Result<Vec<Value>, String> {
        let listed = self
            .with_session(
                CATALOG_KEY,
                None,
                json!({}),
                None,
                |client, hs, id| async move {
                    client
                        .list_pages(&hs, id, "tools/list", "tools", &mut |_| {})
                        .await
                },
            )
            .await
            .map_err(|e| e.to_string())?;
        listed.map_err(|e| format!("upstream: {}: tools/list failed: {e}", self.name))
    }

    /// Refreshes when the upstream says its list changed, and every
    /// `refresh` period, for as long as the upstream is in use; one that
    /// has never listed is asked again every [`RETRY_UNLISTED`].
    pub fn spawn_refresh(self: &Arc<Self>) {
        let weak: Weak<Upstream> = Arc::downgrade(self);
        let configured = self.config.refresh;
        let notify = self.refresh_wanted.clone();
        let used = self.used.clone();
        tokio::spawn(async move {
            // Started on first use: nothing is asked of it before (and
            // the task ends when the upstream goes unused).
            while weak.upgrade().is_some_and(|u| u.awaits_first_use()) {
                tokio::select! {
                    _ = used.notified() => break,
                    _ = tokio::time::sleep(RETRY_UNLISTED) => {}
                }
            }
            loop {
                let wanted = notify.notified();
                tokio::pin!(wanted);
                wanted.as_mut().enable();
                let Some(unlisted) = weak.upgrade().map(|u| u.listing_error().is_some()) else {
                    return;
                };
                let period = match (unlisted, configured.is_zero()) {
                    (true, true) => RETRY_UNLISTED,
                    (true, false) => configured.min(RETRY_UNLISTED),
                    (false, _) => configured,
                };
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
        let (key, bearer) = self.caller_session(cx).await?;
        let traceparent = traceparent(cx);
        let sink = cx.events.clone();
        let reply = self
            .with_session(&key, traceparent.as_deref(), capabilities(cx), bearer, |client, hs, id| {
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
            Reply::Error(error) => Err(self.answered_error(error)),
        }
    }

    /// The session a call of `cx` uses, and the bearer it carries: with
    /// `auth`, the caller's token, and a session of the caller's own.
    async fn caller_session(
        &self,
        cx: &CallContext,
    ) -> Result<(String, Option<AccessToken>), CallError> {
        let key = session_key(cx);
        if !self.auth.per_principal() {
            return Ok((key, None));
        }
        let bearer =
            (self.auth.bearer(cx).await).map_err(|why| self.error(ErrorKind::Failed, &why))?;
        let subject = cx.principal.as_ref().map_or("", |p| p.subject.as_str());
        let key = format!("{key}#principal:{subject}");
        Ok((key, bearer.map(|b| AccessToken::new(&b))))
    }

    /// An error at stage `upstream` naming this upstream (never its URL):
    /// shown as `upstream: NAME: what`.
    fn error(&self, kind: ErrorKind, what: &str) -> CallError {
        CallError::new(Stage::Upstream, kind, format!("{}: {what}", self.name))
    }

    /// The upstream's own JSON-RPC `error` object as a call error: the MCP
    /// surface passes the object on; others show its code and message.
    fn answered_error(&self, error: Value) -> CallError {
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let what = format!("answered error {code}: {message}");
        CallError {
            upstream_error: Some(error),
            ..self.error(ErrorKind::Failed, &what)
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_continues_upstream_with_a_new_span() {
        let cx = CallContext::new(None);
        let tp = traceparent(&cx).unwrap();
        assert!(tp.starts_with(&format!("00-{}-", cx.trace_id)) && tp.len() == 55);
    }
}
