//! Lists that change at run time, for the conformance suite's
//! `server-stateless` scenario: `test_trigger_tool_change` and
//! `test_trigger_prompt_change` each flip whether one extra entry is listed
//! (`test_changed_tool`, `test_changed_prompt`), keep the flip in the kv
//! store (every instance is fresh, and the host lists the component again
//! in a new one), and announce the change so the host re-lists the
//! component and tells clients.

use hangar_sdk::client::{self, OfferedList};
use hangar_sdk::kv;
use hangar_sdk::{CallResult, PromptDefinition, ToolDefinition, ToolError, json};

/// The kv keys counting the flips.
const TOOL_FLIPS: &str = "lists:tool-flips";
const PROMPT_FLIPS: &str = "lists:prompt-flips";

/// Whether the extra entry under `key` is listed now (an odd number of flips).
fn shown(key: &str) -> bool {
    let flips = kv::get(key)
        .ok()
        .flatten()
        .and_then(|v| String::from_utf8(v).ok())
        .and_then(|v| v.parse::<i64>().ok())
        .unwrap_or(0);
    flips % 2 == 1
}

/// The trigger tools, and the extra tool while it is shown.
pub fn tools() -> Vec<ToolDefinition> {
    let none = || json!({ "type": "object", "properties": {} });
    let mut tools = vec![
        ToolDefinition::new(
            "test_trigger_tool_change",
            "Adds or removes the tool test_changed_tool, and says the tool list changed",
            none(),
        ),
        ToolDefinition::new(
            "test_trigger_prompt_change",
            "Adds or removes the prompt test_changed_prompt, and says the prompt list changed",
            none(),
        ),
    ];
    if shown(TOOL_FLIPS) {
        tools.push(ToolDefinition::new(
            "test_changed_tool",
            "Listed after an odd number of test_trigger_tool_change calls",
            none(),
        ));
    }
    tools
}

/// The extra prompt while it is shown.
pub fn prompts() -> Vec<PromptDefinition> {
    if shown(PROMPT_FLIPS) {
        vec![PromptDefinition::new(
            "test_changed_prompt",
            "Listed after an odd number of test_trigger_prompt_change calls",
        )]
    } else {
        Vec::new()
    }
}

/// The call of one of [`tools`]; `None` for any other name.
pub fn call(name: &str) -> Option<Result<CallResult, ToolError>> {
    let (key, list, what) = match name {
        "test_trigger_tool_change" => (TOOL_FLIPS, OfferedList::Tools, "test_changed_tool"),
        "test_trigger_prompt_change" => (PROMPT_FLIPS, OfferedList::Prompts, "test_changed_prompt"),
        "test_changed_tool" => return Some(Ok(CallResult::text("changed tool called"))),
        _ => return None,
    };
    Some(
        kv::increment(key, 1)
            .map_err(|e| ToolError::new(format!("kv: {e:?}")))
            .map(|flips| {
                client::announce_list_changed(list);
                let state = if flips % 2 == 1 { "listed" } else { "removed" };
                CallResult::text(format!("{what} {state}"))
            }),
    )
}
