//! `api-key`: lets a call through when a request header carries a known key.
//!
//! Plugin config (`[plugins.api-key] config = { keys = "..." }`): `keys` is a
//! comma-separated list of `subject=key` pairs; a value may be
//! `{{ env.VAR }}`. Policy (`auth = { plugin = "api-key", policy = {...} }`):
//! `header` (default `x-api-key`). Keys are compared in constant time. An
//! empty key never matches, and an empty header is refused: a key left empty
//! by its environment must not let in callers who send none.

use hangar_sdk::auth::{AuthError, Guest, LogLevel, Principal, RequestContext, config, log};
use hangar_sdk::serde_json::{Value, json};
use subtle::ConstantTimeEq;

struct ApiKey;

fn deny(reason: &str) -> AuthError {
    AuthError {
        message: reason.to_string(),
    }
}

impl Guest for ApiKey {
    fn authenticate(ctx: RequestContext, policy: String) -> Result<Principal, AuthError> {
        let policy: Value = hangar_sdk::serde_json::from_str(&policy).unwrap_or(Value::Null);
        let header = policy
            .get("header")
            .and_then(Value::as_str)
            .unwrap_or("x-api-key")
            .to_ascii_lowercase();
        let presented = ctx
            .headers
            .iter()
            .find(|(name, _)| *name == header)
            .map(|(_, v)| v.trim())
            .ok_or_else(|| deny(&format!("no {header} header")))?;
        if presented.is_empty() {
            return Err(deny(&format!("empty {header} header")));
        }
        let keys = config("keys").unwrap_or_default();
        // Compare against every key, so the time taken does not tell which matched.
        let mut subject = None;
        for entry in keys.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, key) = entry.split_once('=').unwrap_or(("api-key", entry));
            let key = key.trim();
            if key.is_empty() {
                continue;
            }
            let equal: bool = key.as_bytes().ct_eq(presented.as_bytes()).into();
            if equal && subject.is_none() {
                subject = Some(name.trim().to_string());
            }
        }
        match subject {
            Some(subject) => Ok(Principal {
                claims: json!({ "sub": subject, "auth": "api-key" }).to_string(),
                subject,
            }),
            None => {
                log(
                    LogLevel::Info,
                    &format!("rejected key for {} ({})", ctx.tool, ctx.trace_id),
                );
                Err(deny("unknown api key"))
            }
        }
    }
}

hangar_sdk::export_auth!(ApiKey);
