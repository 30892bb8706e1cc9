//! The tools the conformance suite's tasks scenarios (the
//! `io.modelcontextprotocol/tasks` extension) call. Whether a call becomes
//! a task is the host's decision (`[[tools]] task` in `hangar.toml`); these
//! only take their time, fail, panic, or ask, as the scenarios expect.

use std::time::{Duration, Instant};

use hangar_sdk::client::{self, ElicitAction};
use hangar_sdk::{CallResult, ToolDefinition, ToolError, Value, json};

pub fn tools() -> Vec<ToolDefinition> {
    let none = || json!({ "type": "object", "properties": {} });
    vec![
        ToolDefinition::new(
            "greet",
            "Greets by name",
            json!({ "type": "object", "properties": { "name": { "type": "string" } } }),
        ),
        ToolDefinition::new(
            "slow_compute",
            "Works for `seconds` seconds, then answers",
            json!({ "type": "object", "properties": {
                "seconds": { "type": "number", "minimum": 0 },
                "label": { "type": "string" },
            } }),
        ),
        ToolDefinition::new(
            "failing_job",
            "Fails with a tool error after a second",
            none(),
        ),
        ToolDefinition::new("protocol_error_job", "Panics", none()),
        ToolDefinition::new(
            "confirm_delete",
            "Asks the user to confirm, then says what it did",
            json!({ "type": "object", "properties": { "filename": { "type": "string" } } }),
        ),
    ]
}

/// Sleeps in short steps, so a cancelled call stops at the next one.
fn work_for(seconds: f64) {
    let until = Instant::now() + Duration::from_secs_f64(seconds.clamp(0.0, 3600.0));
    while Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The call of one of [`tools`]; `None` for any other name.
pub fn call(name: &str, arguments: &str) -> Option<Result<CallResult, ToolError>> {
    let args = || hangar_sdk::parse_args::<Value>(arguments);
    Some(match name {
        "greet" => args().map(|a| {
            let who = a.get("name").and_then(Value::as_str).unwrap_or("World");
            CallResult::text(format!("Hello, {who}!"))
        }),
        "slow_compute" => args().map(|a| {
            let seconds = a.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
            work_for(seconds);
            let label = a.get("label").and_then(Value::as_str).unwrap_or("job");
            CallResult::text(format!("{label}: computed after {seconds} s"))
        }),
        "failing_job" => {
            work_for(1.0);
            Err(ToolError::new("failing_job failed, as it always does"))
        }
        "protocol_error_job" => panic!("protocol_error_job panicked on purpose"),
        "confirm_delete" => args().and_then(|a| {
            let path = a
                .get("filename")
                .and_then(Value::as_str)
                .unwrap_or("the file");
            let schema = json!({
                "type": "object",
                "properties": { "confirm": { "type": "boolean" } },
                "required": ["confirm"],
            });
            let answer = client::elicit(&format!("Delete {path}?"), &schema.to_string())
                .map_err(|e| ToolError::new(format!("cannot ask the client: {e:?}")))?;
            let confirmed = answer.action == ElicitAction::Accept
                && answer
                    .content
                    .and_then(|c| hangar_sdk::parse_args::<Value>(&c).ok())
                    .and_then(|c| c.get("confirm").and_then(Value::as_bool))
                    == Some(true);
            Ok(CallResult::text(if confirmed {
                format!("Deleted {path}")
            } else {
                format!("Kept {path}")
            }))
        }),
        _ => return None,
    })
}
