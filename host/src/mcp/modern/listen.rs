//! `subscriptions/listen`: the modern revision's one long-lived stream. The
//! client names the notifications it wants; the first message acknowledges
//! what will be honoured, and every message carries the subscription id
//! (the request's JSON-RPC id). It replaces the GET stream and
//! `resources/subscribe`.

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

use crate::mcp::jsonrpc::{self, RpcError};
use crate::pipeline::{Change, List, ResourceChanges};

/// A comment line this often keeps proxies from closing a quiet stream.
const KEEPALIVE: Duration = Duration::from_secs(15);

/// What one subscription asked for (`params.notifications`).
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: HashSet<String>,
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
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => HashSet::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|u| u.as_str().map(str::to_string))
                .collect::<Option<HashSet<_>>>()
                .ok_or_else(|| {
                    RpcError::invalid_params("notifications.resourceSubscriptions must be strings")
                })?,
            Some(_) => {
                return Err(RpcError::invalid_params(
                    "notifications.resourceSubscriptions must be an array of URIs",
                ));
            }
        };
        Ok(Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
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
        Value::Object(ack)
    }

    /// The notification for `change`, when this subscription wants it.
    fn wants(&self, change: &Change) -> Option<(&'static str, Value)> {
        match change {
            Change::ListChanged(list) => {
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
        }
    }
}

fn tagged(method: &str, mut params: Value, id: &Value) -> Bytes {
    params["_meta"] = json!({ "io.modelcontextprotocol/subscriptionId": id });
    crate::mcp::calls::sse_frame(&jsonrpc::notification_body(method, &params))
}

/// The stream: the acknowledgement, then the changes the filter wants,
/// keep-alive comments between, and at shutdown the closing response.
pub fn open(
    id: Value,
    filter: Filter,
    changes: &ResourceChanges,
    closing: watch::Receiver<bool>,
) -> Response {
    let rx = changes.subscribe();
    let ack = tagged(
        "notifications/subscriptions/acknowledged",
        json!({ "notifications": filter.acknowledged() }),
        &id,
    );
    let events = futures::stream::unfold(Some((rx, filter, id)), move |state| {
        let mut closing = closing.clone();
        async move {
            let (mut rx, filter, id) = state?;
            loop {
                let next = tokio::select! {
                    next = tokio::time::timeout(KEEPALIVE, rx.recv()) => next,
                    _ = closing.wait_for(|c| *c) => {
                        // A graceful end: the listen request's own response.
                        let result = super::complete(
                            json!({ "_meta": { "io.modelcontextprotocol/subscriptionId": id } }),
                            "subscriptions/listen",
                            false,
                        );
                        let frame = crate::mcp::calls::sse_frame(&jsonrpc::result_body(&id, &result));
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

    #[test]
    fn the_filter_keeps_what_was_asked() {
        let params = json!({ "notifications": {
            "toolsListChanged": true,
            "resourceSubscriptions": ["a://1"],
        }});
        let f = Filter::parse(params.as_object().unwrap()).unwrap();
        assert!(f.wants(&Change::ListChanged(List::Tools)).is_some());
        assert!(f.wants(&Change::ListChanged(List::Prompts)).is_none());
        assert!(f.wants(&Change::Updated("a://1".into())).is_some());
        assert!(f.wants(&Change::Updated("a://2".into())).is_none());
        assert_eq!(
            f.acknowledged(),
            json!({ "toolsListChanged": true, "resourceSubscriptions": ["a://1"] })
        );
        let bad = json!({ "notifications": { "toolsListChanged": "yes" } });
        assert!(Filter::parse(bad.as_object().unwrap()).is_err());
    }
}
