//! `redact`: an output mapper that masks e-mail addresses anywhere in a result
//! and the values of keys that look secret (password, token, secret, api_key…).
//! When it masked something it also attaches presenter hints
//! (`_meta["hangar/hints"]`): a rule telling the model that `[redacted]`
//! values are withheld on purpose, so it neither guesses them nor asks.
//!
//! Plugin config: `keys` — extra comma-separated key names to mask.

use hangar_sdk::mapper::{CallContext, Guest, MapperError, config};
use hangar_sdk::serde_json::{self, Value};

const MASK: &str = "[redacted]";
const SECRET_KEYS: &[&str] = &[
    "password",
    "passwd",
    "token",
    "secret",
    "api_key",
    "apikey",
    "authorization",
];

struct Redact;

fn secret_key(key: &str, extra: &[String]) -> bool {
    let k = key.to_ascii_lowercase();
    SECRET_KEYS.iter().any(|s| k.contains(s)) || extra.contains(&k)
}

/// Replaces every e-mail address in `text` with `[redacted]`.
fn mask_emails(text: &str) -> String {
    let is_local = |c: char| c.is_ascii_alphanumeric() || "._%+-".contains(c);
    let is_domain = |c: char| c.is_ascii_alphanumeric() || ".-".contains(c);
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '@' {
            let start = (0..i).rev().take_while(|&j| is_local(chars[j])).last();
            let end = (i + 1..chars.len())
                .take_while(|&j| is_domain(chars[j]))
                .last();
            if let (Some(start), Some(end)) = (start, end) {
                let domain: String = chars[i + 1..=end].iter().collect();
                let domain = domain.trim_end_matches(['.', '-']);
                if domain.contains('.') && !domain.starts_with('.') {
                    let local_len = i - start;
                    out.truncate(
                        out.len() - chars[start..i].iter().map(|c| c.len_utf8()).sum::<usize>(),
                    );
                    debug_assert!(local_len > 0);
                    out.push_str(MASK);
                    i += 1 + domain.chars().count();
                    continue;
                }
            }
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Masks what must not be shown; answers how many values it masked.
fn redact(value: &mut Value, extra: &[String]) -> usize {
    match value {
        Value::String(s) => {
            // Text content that holds JSON is redacted as JSON, keys included.
            if let Ok(mut inner @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(s)
            {
                let masked = redact(&mut inner, extra);
                *s = inner.to_string();
                masked
            } else if s.contains('@') {
                let masked = mask_emails(s);
                let count = masked.matches(MASK).count() - s.matches(MASK).count();
                *s = masked;
                count
            } else {
                0
            }
        }
        Value::Array(items) => items.iter_mut().map(|v| redact(v, extra)).sum(),
        Value::Object(map) => {
            let mut masked = 0;
            for (k, v) in map.iter_mut() {
                if secret_key(k, extra) && !v.is_null() {
                    *v = Value::String(MASK.into());
                    masked += 1;
                } else {
                    masked += redact(v, extra);
                }
            }
            masked
        }
        _ => 0,
    }
}

/// The presenter hints of a result in which `masked` values were redacted.
fn hints(masked: usize) -> Value {
    serde_json::json!({
        "rules": [format!(
            "{masked} value(s) in this result were replaced by {MASK} on purpose: do not guess them, and do not ask the user for them."
        )],
        "suggested_calls": []
    })
}

impl Guest for Redact {
    fn map(_cx: CallContext, payload: String) -> Result<String, MapperError> {
        let mut payload: Value = serde_json::from_str(&payload).map_err(|e| MapperError {
            message: e.to_string(),
        })?;
        let extra: Vec<String> = config("keys")
            .unwrap_or_default()
            .split(',')
            .map(|k| k.trim().to_ascii_lowercase())
            .filter(|k| !k.is_empty())
            .collect();
        let mut result = payload
            .get_mut("result")
            .map(Value::take)
            .ok_or_else(|| MapperError {
                message: "redact is an output mapper: the payload has no result".into(),
            })?;
        // Only what the caller sees: content and structured content, not the flags.
        let mut masked = 0;
        for key in ["content", "structuredContent"] {
            if let Some(v) = result.get_mut(key) {
                masked += redact(v, &extra);
            }
        }
        if masked > 0
            && let Some(obj) = result.as_object_mut()
        {
            let meta = obj
                .entry("_meta")
                .or_insert_with(|| Value::Object(Default::default()));
            if let Some(meta) = meta.as_object_mut() {
                meta.insert("hangar/hints".into(), hints(masked));
            }
        }
        Ok(result.to_string())
    }
}

hangar_sdk::export_mapper!(Redact);

#[cfg(test)]
mod tests {
    use super::{hints, mask_emails, redact};
    use hangar_sdk::serde_json::json;

    #[test]
    fn counts_what_it_masks_for_the_hints() {
        let mut v =
            json!({ "email": "a@example.com", "token": "t", "ok": "x", "text": "mail b@c.org" });
        assert_eq!(redact(&mut v, &[]), 3);
        assert_eq!(v["ok"], "x");
        assert!(
            hints(3)["rules"][0]
                .as_str()
                .unwrap()
                .starts_with("3 value(s)")
        );
    }

    #[test]
    fn masks_addresses_and_keeps_the_rest() {
        assert_eq!(
            mask_emails("mail alice@example.com now"),
            "mail [redacted] now"
        );
        assert_eq!(mask_emails("a.b+c@mail.example.org."), "[redacted].");
        assert_eq!(
            mask_emails("not @ an address, nor x@y"),
            "not @ an address, nor x@y"
        );
    }
}
