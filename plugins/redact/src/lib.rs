//! `redact`: an output mapper that masks e-mail addresses anywhere in a result
//! and the values of keys that look secret (password, token, secret, api_key…).
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

fn redact(value: &mut Value, extra: &[String]) {
    match value {
        Value::String(s) => {
            // Text content that holds JSON is redacted as JSON, keys included.
            if let Ok(mut inner @ (Value::Object(_) | Value::Array(_))) =
                serde_json::from_str::<Value>(s)
            {
                redact(&mut inner, extra);
                *s = inner.to_string();
            } else if s.contains('@') {
                *s = mask_emails(s);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|v| redact(v, extra)),
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if secret_key(k, extra) && !v.is_null() {
                    *v = Value::String(MASK.into());
                } else {
                    redact(v, extra);
                }
            }
        }
        _ => {}
    }
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
        for key in ["content", "structuredContent"] {
            if let Some(v) = result.get_mut(key) {
                redact(v, &extra);
            }
        }
        Ok(result.to_string())
    }
}

hangar_sdk::export_mapper!(Redact);

#[cfg(test)]
mod tests {
    use super::mask_emails;

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
