//! `http-fetch`: a guest that makes one outbound HTTP request through
//! `wasi:http/outgoing-handler` (with `wstd`), for the HTTP grant tests, and
//! reads its plugin config (`config {key}`) and credentials
//! (`credential {provider}`), for the secret and credential tests.
//! Kept out of the default plugins folder.
//!
//! `fetch {url, method?, slow_body_ms?}` answers `"<status> <body>"` (the
//! body read fully, lossy UTF-8), or a tool error `request failed: <Debug of
//! the error>`, so a refused request shows the wasi:http error code the host
//! gave. With `slow_body_ms`, the request's (empty) body ends that long after
//! the request was handed to the host, as a body streamed by the guest does.

use futures_lite::StreamExt;
use hangar_sdk::{
    CallContext, CallResult, Tool, ToolDefinition, ToolError, config, credentials, json,
};
use wstd::http::{Body, Client, Method, Request};

struct HttpFetch;

/// The request body: empty, and with `slow_ms`, ended only that long after
/// wstd handed the request to the host (it writes the body after `handle`).
fn request_body(slow_ms: Option<u64>) -> Body {
    match slow_ms {
        None => Body::empty(),
        Some(ms) => Body::from_stream(futures_lite::stream::once(()).then(move |()| async move {
            wstd::task::sleep(wstd::time::Duration::from_millis(ms)).await;
            Vec::<u8>::new()
        })),
    }
}

async fn fetch(
    url: &str,
    method: &str,
    follow: bool,
    slow_ms: Option<u64>,
) -> wstd::http::Result<String> {
    let method = Method::from_bytes(method.as_bytes())?;
    let mut url = url.to_string();
    // One redirect at most, followed by hand the way a client library does:
    // the second request is checked against the grants like the first.
    for _ in 0..2 {
        let request = Request::builder()
            .uri(url.as_str())
            .method(method.clone())
            .body(request_body(slow_ms))?;
        let response = Client::new().send(request).await?;
        let status = response.status().as_u16();
        let location = response
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        match location {
            Some(next) if follow && (300..400).contains(&status) => url = next,
            _ => {
                let mut body = response.into_body();
                let bytes = body.contents().await?;
                return Ok(format!("{status} {}", String::from_utf8_lossy(bytes)));
            }
        }
    }
    Err(wstd::http::Error::msg("too many redirects"))
}

impl Tool for HttpFetch {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "credential",
                "Answers the token of credential `provider`, or the error",
                json!({ "type": "object", "properties": { "provider": { "type": "string" } }, "required": ["provider"] }),
            ),
            ToolDefinition::new(
                "config",
                "Answers the plugin's config value for `key` (a secret, in the tests), or (unset)",
                json!({ "type": "object", "properties": { "key": { "type": "string" } }, "required": ["key"] }),
            ),
            ToolDefinition::new(
                "fetch",
                "Makes one HTTP request from inside the guest and answers \"<status> <body>\"",
                json!({
                    "type": "object",
                    "properties": {
                        "url": { "type": "string" },
                        "method": { "type": "string", "default": "GET" },
                    "follow": { "type": "boolean", "default": false },
                    "slow_body_ms": { "type": "integer", "minimum": 0 }
                    },
                    "required": ["url"]
                }),
            ),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        let args: serde_json::Value = serde_json::from_str(&arguments)
            .map_err(|e| ToolError::new(format!("bad arguments: {e}")))?;
        match name.as_str() {
            "fetch" => {}
            "credential" => {
                let provider = args
                    .get("provider")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                return credentials::get(provider)
                    .map(CallResult::text)
                    .map_err(ToolError::new);
            }
            "config" => {
                let key = args.get("key").and_then(|v| v.as_str()).unwrap_or_default();
                return Ok(CallResult::text(
                    config(key).unwrap_or_else(|| "(unset)".into()),
                ));
            }
            _ => return Err(ToolError::new(format!("unknown tool {name}"))),
        }
        let url = args
            .get("url")
            .and_then(|v| v.as_str())
            .ok_or_else(|| ToolError::new("missing string argument `url`"))?;
        let method = args.get("method").and_then(|v| v.as_str()).unwrap_or("GET");
        let follow = args
            .get("follow")
            .and_then(|v| v.as_bool())
            .unwrap_or(false);
        let slow_ms = args.get("slow_body_ms").and_then(|v| v.as_u64());
        match wstd::runtime::block_on(fetch(url, method, follow, slow_ms)) {
            Ok(text) => Ok(CallResult::text(text)),
            Err(e) => Err(ToolError::new(format!("request failed: {e:?}"))),
        }
    }
}

hangar_sdk::export_tool!(HttpFetch);
