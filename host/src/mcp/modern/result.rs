//! Answers in the 2026-07-28 shape ([`complete`]): `resultType`, the
//! server's identity in `_meta`, and the caching hints lists and reads
//! must carry. A leaf: whoever answers a modern request shapes it here.

use serde_json::{Map, Value, json};

use crate::mcp::methods::Method;

/// The server's identity, as modern results carry it in `_meta`.
pub fn server_info() -> Value {
    json!({ "name": "hangar", "version": env!("CARGO_PKG_VERSION") })
}

/// How long a client may keep a list: lists change only on a reload or an
/// upstream's change, and `subscriptions/listen` tells of both.
const LIST_TTL_MS: u64 = 60_000;

/// A result in the modern shape: `resultType: "complete"`, the server's
/// identity in `_meta`, and for the cacheable methods `ttlMs` and
/// `cacheScope`. `private` is true when the answer may depend on who asked
/// (credentials were sent): shared caches must then not keep it.
pub fn complete(mut result: Value, method: Method, private: bool) -> Value {
    let Some(obj) = result.as_object_mut() else {
        return result;
    };
    obj.insert("resultType".into(), json!("complete"));
    let meta = obj
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert("io.modelcontextprotocol/serverInfo".into(), server_info());
    }
    let ttl = match method {
        Method::Discover
        | Method::ToolsList
        | Method::PromptsList
        | Method::ResourcesList
        | Method::TemplatesList => Some(LIST_TTL_MS),
        // A resource's content may change at any time (and is announced
        // only to subscribers): fresh for no time.
        Method::ResourcesRead => Some(0),
        _ => None,
    };
    if let Some(ttl) = ttl {
        obj.entry("ttlMs").or_insert(json!(ttl));
        let scope = if private || method == Method::ResourcesRead {
            "private"
        } else {
            "public"
        };
        obj.entry("cacheScope").or_insert(json!(scope));
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn complete_results_carry_type_identity_and_cache_hints() {
        let r = complete(json!({ "tools": [] }), Method::ToolsList, false);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "hangar"
        );
        assert_eq!(
            (r["ttlMs"].as_u64(), r["cacheScope"].as_str()),
            (Some(60_000), Some("public"))
        );
        let r = complete(json!({ "tools": [] }), Method::ToolsList, true);
        assert_eq!(r["cacheScope"], "private");
        let r = complete(json!({ "content": [] }), Method::ToolsCall, false);
        assert!(r.get("ttlMs").is_none());
    }
}
