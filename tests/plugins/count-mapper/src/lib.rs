//! `count-mapper`: an input mapper that appends ` #n` to the `text` argument,
//! `n` being how many payloads this instance has mapped — 1 each time on a
//! fresh instance, 1, 2, 3… on a warm one. For the tests of warm-instance
//! reuse in auth checks and mappers.

use std::sync::atomic::{AtomicU32, Ordering};

use hangar_sdk::mapper::{CallContext, Guest, MapperError};
use hangar_sdk::serde_json::{self, Value};

static MAPPED: AtomicU32 = AtomicU32::new(0);

struct CountMapper;

impl Guest for CountMapper {
    fn map(_cx: CallContext, payload: String) -> Result<String, MapperError> {
        let n = MAPPED.fetch_add(1, Ordering::Relaxed) + 1;
        let payload: Value = serde_json::from_str(&payload).map_err(|e| MapperError {
            message: e.to_string(),
        })?;
        let mut args = payload.get("arguments").cloned().unwrap_or(Value::Null);
        let text = args.get("text").and_then(Value::as_str).unwrap_or("");
        args["text"] = Value::from(format!("{text} #{n}"));
        Ok(args.to_string())
    }
}

hangar_sdk::export_mapper!(CountMapper);
