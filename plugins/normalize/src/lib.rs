//! `normalize`: an input mapper that trims every string argument and
//! lower-cases e-mail addresses (arguments whose name contains `email`).

use hangar_sdk::mapper::{CallContext, Guest, MapperError};
use hangar_sdk::serde_json::{self, Value};

struct Normalize;

fn normalize(value: &mut Value, email: bool) {
    match value {
        Value::String(s) => {
            let trimmed = s.trim();
            *s = if email {
                trimmed.to_lowercase()
            } else {
                trimmed.to_string()
            };
        }
        Value::Array(items) => items.iter_mut().for_each(|v| normalize(v, email)),
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                normalize(v, email || k.to_ascii_lowercase().contains("email"));
            }
        }
        _ => {}
    }
}

impl Guest for Normalize {
    fn map(_cx: CallContext, payload: String) -> Result<String, MapperError> {
        let mut payload: Value = serde_json::from_str(&payload).map_err(|e| MapperError {
            message: e.to_string(),
        })?;
        let mut args = payload
            .get_mut("arguments")
            .map(Value::take)
            .ok_or_else(|| MapperError {
                message: "normalize is an input mapper: the payload has no arguments".into(),
            })?;
        normalize(&mut args, false);
        Ok(args.to_string())
    }
}

hangar_sdk::export_mapper!(Normalize);
