//! `echo`: repeats a text. The smallest useful Hangar tool.

use hangar_sdk::{CallContext, CallResult, Tool, ToolDefinition, ToolError, json, parse_args};
use serde::Deserialize;

struct Echo;

#[derive(Deserialize)]
struct Args {
    text: String,
    times: Option<u32>,
}

impl Tool for Echo {
    fn list_tools() -> Vec<ToolDefinition> {
        vec![
            ToolDefinition::new(
                "echo",
                "Repeat a text, space-separated",
                json!({
                    "type": "object",
                    "properties": {
                        "text": { "type": "string", "description": "What to repeat" },
                        "times": { "type": "integer", "minimum": 1, "maximum": 1000, "default": 1 }
                    },
                    "required": ["text"]
                }),
            )
            .title("Echo")
            .read_only(),
        ]
    }

    fn call_tool(
        _cx: CallContext,
        name: String,
        arguments: String,
    ) -> Result<CallResult, ToolError> {
        if name != "echo" {
            return Err(ToolError::new(format!("unknown tool {name}")));
        }
        let args: Args = parse_args(&arguments)?;
        let times = args.times.unwrap_or(1).clamp(1, 1000) as usize;
        Ok(CallResult::text(vec![args.text.as_str(); times].join(" ")))
    }
}

hangar_sdk::export_tool!(Echo);
