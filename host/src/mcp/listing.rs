//! `tools/list`, and the cursor pages every listing is cut into.

use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use serde_json::{Map, Value, json};

use super::jsonrpc::RpcError;
use super::pins;
use super::request::Request;
use super::state::McpState;
use hangar_core::call::apps::app_only;

pub(super) async fn tools_list(st: &McpState, req: &Request<'_>) -> Response {
    let pipeline = st.pipeline.for_listing().await;
    let principal = pipeline.listing_principal(&req.context(st)).await;
    let session = req.session.as_deref();
    let (pins, id) = (
        session.map(|s| &*s.pins),
        session.map_or("", |s| s.id.as_str()),
    );
    let mode = pipeline.catalog().pinning();
    // An app-only tool (`_meta.ui.visibility` without "model") is for a
    // view to call: a client that renders no MCP Apps would offer it to
    // its model, so it is left out of that client's list (still callable).
    let apps = req.client_runs_apps();
    let tools: Vec<Value> = (pipeline
        .listed(principal.as_ref(), req.toolset.as_ref())
        .await
        .iter())
    .filter(|def| apps || !app_only(def.meta.as_ref()))
    .map(|def| pins::listed(pins, mode, id, &**def))
    .collect();
    match page(&req.params, &tools, st.page_size) {
        Ok((page, next)) => {
            let mut result = json!({ "tools": page });
            if let Some(next) = next {
                result["nextCursor"] = Value::String(next);
            }
            req.reply(&result)
        }
        Err(e) => req.fail(&e),
    }
}

/// One page of a listing from `params.cursor`, and the next page's cursor.
pub(super) fn page<'a, T>(
    params: &Map<String, Value>,
    items: &'a [T],
    page_size: usize,
) -> Result<(&'a [T], Option<String>), RpcError> {
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(decode_cursor)
            .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))?,
    };
    if start > items.len() {
        return Err(RpcError::invalid_params("Invalid cursor"));
    }
    let end = (start + page_size).min(items.len());
    let next = (end < items.len()).then(|| B64.encode(format!("offset:{end}")));
    Ok((&items[start..end], next))
}

fn decode_cursor(cursor: &str) -> Option<usize> {
    let bytes = B64.decode(cursor).ok()?;
    std::str::from_utf8(&bytes)
        .ok()?
        .strip_prefix("offset:")?
        .parse()
        .ok()
}
