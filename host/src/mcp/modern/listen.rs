//! `subscriptions/listen`: the modern revision's one long-lived stream. The
//! client names the notifications it wants; the first message acknowledges
//! what will be honoured, and every message carries the subscription id
//! (the request's JSON-RPC id). It replaces the GET stream and
//! `resources/subscribe`, and asks what `resources/subscribe` asks of each
//! resource it watches (the endpoint's toolset, the resource's auth check,
//! `visible_to`): one the listener may not read is left out of the
//! acknowledgement, exactly as one that does not exist.

use std::collections::HashSet;
use std::convert::Infallible;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast::error::RecvError;
use tokio::sync::watch;

use super::result::complete;
use crate::mcp::jsonrpc::{self, RpcError};
use crate::mcp::limits::Held;
use crate::mcp::methods::Method;
use crate::mcp::reply::sse_frame;
use hangar_core::call::{Change, List, ResourceChanges, Toolset};

/// A comment line this often keeps proxies from closing a quiet stream.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// What one subscription asked for (`params.notifications`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: HashSet<String>,
    /// Tasks whose `notifications/tasks` are wanted (the tasks extension).
    task_ids: HashSet<String>,
    /// Digest of the listener's credentials: only its own tasks are sent.
    owner: String,
    /// The endpoint's toolset (`/mcp/NAME`): only its lists' changes are sent.
    toolset: Option<Toolset>,
}

impl Filter {
    pub fn parse(params: &Map<String, Value>) -> Result<Filter, RpcError> {
        let Some(n) = params.get("notifications") else {
            return Ok(Filter::default());
        };
        let Some(n) = n.as_object() else {
            return Err(RpcError::invalid_params("notifications must be an object"));
        };
        let flag = |key: &str| -> Result<bool, RpcError> {
            match n.get(key) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(RpcError::invalid_params(format!(
                    "notifications.{key} must be a boolean"
                ))),
            }
        };
        let strings = |key: &str| -> Result<HashSet<String>, RpcError> {
            let bad = || {
                RpcError::invalid_params(format!("notifications.{key} must be an array of strings"))
            };
            match n.get(key) {
                None | Some(Value::Null) => Ok(HashSet::new()),
                Some(Value::Array(items)) => items
                    .iter()
                    .map(|u| u.as_str().map(str::to_string))
                    .collect::<Option<HashSet<_>>>()
                    .ok_or_else(bad),
                Some(_) => Err(bad()),
            }
        };
        Ok(Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris: strings("resourceSubscriptions")?,
            task_ids: strings("taskIds")?,
            owner: String::new(),
            toolset: None,
        })
    }

    /// The most resource URIs or task ids it watches (each is capped at
    /// `max_subscriptions_per_session`).
    pub fn watched(&self) -> usize {
        self.uris.len().max(self.task_ids.len())
    }

    /// Whether task notifications were asked for (they need the tasks extension).
    pub fn wants_tasks(&self) -> bool {
        !self.task_ids.is_empty()
    }

    /// This filter for a listener whose credentials digest to `owner`.
    pub fn owned_by(mut self, owner: String) -> Filter {
        self.owner = owner;
        self
    }

    /// The resources it asks to watch.
    pub fn uris(&self) -> impl Iterator<Item = &String> {
        self.uris.iter()
    }

    /// This filter watching only `honoured` of the resources it asked for:
    /// the acknowledgement lists those, and only their updates are sent.
    pub fn watching(mut self, honoured: HashSet<String>) -> Filter {
        self.uris.retain(|u| honoured.contains(u));
        self
    }

    /// Listening at `toolset`'s endpoint (`None`: the whole catalog's).
    pub fn at(mut self, toolset: Option<Toolset>) -> Filter {
        self.toolset = toolset;
        self
    }

    /// The acknowledged filter: what was asked, all of which is honoured.
    fn acknowledged(&self) -> Value {
        let mut ack = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                ack.insert(key.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            let mut uris: Vec<&String> = self.uris.iter().collect();
            uris.sort();
            ack.insert("resourceSubscriptions".into(), json!(uris));
        }
        if !self.task_ids.is_empty() {
            let mut ids: Vec<&String> = self.task_ids.iter().collect();
            ids.sort();
            ack.insert("taskIds".into(), json!(ids));
        }
        Value::Object(ack)
    }

    /// The notification for `change`, when this subscription wants it.
    fn wants(&self, change: &Change) -> Option<(&'static str, Value)> {
        match change {
            Change::ListChanged(list, reach) => {
                if !reach.reaches(self.toolset.as_ref()) {
                    return None;
                }
                let on = match list {
                    List::Tools => self.tools,
                    List::Prompts => self.prompts,
                    List::Resources => self.resources,
                };
                on.then(|| (list.notification(), json!({})))
            }
            Change::Updated(uri) => self
                .uris
                .contains(uri)
                .then(|| ("notifications/resources/updated", json!({ "uri": uri }))),
            Change::Task { id, owner, detail } => (self.task_ids.contains(id)
                && *owner == self.owner)
                .then(|| ("notifications/tasks", detail.clone())),
        }
    }
}

fn tagged(method: &str, mut params: Value, id: &Value) -> Bytes {
    params["_meta"] = json!({ "io.modelcontextprotocol/subscriptionId": id });
    sse_frame(&jsonrpc::notification_body(method, &params))
}

/// The stream: the acknowledgement, then the changes the filter wants,
/// keep-alive comments between, and at shutdown the closing response.
/// `slot` (the client's stream slot) is held until the stream ends.
pub fn open(
    id: Value,
    filter: Filter,
    changes: &ResourceChanges,
    closing: watch::Receiver<bool>,
    slot: Held,
) -> Response {
    let rx = changes.subscribe();
    let ack = tagged(
        "notifications/subscriptions/acknowledged",
        json!({ "notifications": filter.acknowledged() }),
        &id,
    );
    let events = futures::stream::unfold(Some((rx, filter, id)), move |state| {
        // The closure, so the stream, owns the slot: it is released when
        // the stream is dropped (its end, or the client's going away).
        let _held = &slot;
        let mut closing = closing.clone();
        async move {
            let (mut rx, filter, id) = state?;
            loop {
                let next = tokio::select! {
                    next = tokio::time::timeout(KEEPALIVE, rx.recv()) => next,
                    _ = closing.wait_for(|c| *c) => {
                        // A graceful end: the listen request's own response.
                        let result = complete(
                            json!({ "_meta": { "io.modelcontextprotocol/subscriptionId": id } }),
                            Method::Listen,
                            false,
                        );
                        let frame = sse_frame(&jsonrpc::result_body(&id, &result));
                        return Some((Ok::<_, Infallible>(frame), None));
                    }
                };
                let frame = match next {
                    Err(_) => Bytes::from_static(b": keep-alive\n\n"),
                    Ok(Ok(change)) => match filter.wants(&change) {
                        Some((method, params)) => tagged(method, params, &id),
                        None => continue,
                    },
                    Ok(Err(RecvError::Lagged(n))) => {
                        tracing::warn!("subscriptions/listen stream lagged: {n} changes skipped");
                        continue;
                    }
                    Ok(Err(RecvError::Closed)) => return None,
                };
                return Some((Ok(frame), Some((rx, filter, id))));
            }
        }
    });
    let first = futures::stream::once(async move { Ok(ack) });
    (
        StatusCode::OK,
        [
            (CONTENT_TYPE, "text/event-stream"),
            (CACHE_CONTROL, "no-cache"),
            (
                axum::http::HeaderName::from_static("x-accel-buffering"),
                "no",
            ),
        ],
        Body::from_stream(futures::StreamExt::chain(first, events)),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::Reach;

    #[test]
    fn a_list_change_reaches_only_the_endpoints_where_it_changed() {
        let params = json!({ "notifications": { "toolsListChanged": true } });
        let whole = Filter::parse(params.as_object().unwrap()).unwrap();
        let ops = whole.clone().at(Some(Toolset::new("ops")));
        let in_ops = Change::ListChanged(List::Tools, Reach::new([Some(Toolset::new("ops"))]));
        assert!(ops.wants(&in_ops).is_some());
        assert!(whole.wants(&in_ops).is_none());
        let elsewhere =
            Change::ListChanged(List::Tools, Reach::new([None, Some(Toolset::new("db"))]));
        assert!(whole.wants(&elsewhere).is_some());
        assert!(ops.wants(&elsewhere).is_none());
    }

    #[test]
    fn the_filter_keeps_what_was_asked() {
        let params = json!({ "notifications": {
            "toolsListChanged": true,
            "resourceSubscriptions": ["a://1"],
        }});
        let f = Filter::parse(params.as_object().unwrap()).unwrap();
        let whole = Reach::new([None]);
        assert!(
            f.wants(&Change::ListChanged(List::Tools, whole.clone()))
                .is_some()
        );
        assert!(
            f.wants(&Change::ListChanged(List::Prompts, whole))
                .is_none()
        );
        assert!(f.wants(&Change::Updated("a://1".into())).is_some());
        assert!(f.wants(&Change::Updated("a://2".into())).is_none());
        assert_eq!(
            f.acknowledged(),
            json!({ "toolsListChanged": true, "resourceSubscriptions": ["a://1"] })
        );
        let bad = json!({ "notifications": { "toolsListChanged": "yes" } });
        assert!(Filter::parse(bad.as_object().unwrap()).is_err());
    }

    #[test]
    fn task_notifications_go_to_their_owner_only() {
        let params = json!({ "notifications": { "taskIds": ["t1"] } });
        let f = Filter::parse(params.as_object().unwrap())
            .unwrap()
            .owned_by("me".into());
        assert!(f.wants_tasks());
        let task = |id: &str, owner: &str| Change::Task {
            id: id.into(),
            owner: owner.into(),
            detail: json!({ "taskId": id }),
        };
        assert_eq!(
            f.wants(&task("t1", "me")),
            Some(("notifications/tasks", json!({ "taskId": "t1" })))
        );
        assert!(f.wants(&task("t1", "someone else")).is_none());
        assert!(f.wants(&task("t2", "me")).is_none());
        assert_eq!(f.acknowledged(), json!({ "taskIds": ["t1"] }));
    }
}
