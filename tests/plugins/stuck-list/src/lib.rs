//! `stuck-list`: a tool component whose `list-tools` never returns (it sleeps
//! in a host call, where no epoch tick reaches it). Hangar must skip it at
//! start-up, report it in `/healthz`, and serve the other plugins.

use hangar_sdk::{CallContext, CallResult, Tool, ToolDefinition, ToolError};

struct StuckList;

impl Tool for StuckList {
    fn list_tools() -> Vec<ToolDefinition> {
        std::thread::sleep(std::time::Duration::from_secs(3600));
        Vec::new()
    }

    fn call_tool(_: CallContext, _: String, _: String) -> Result<CallResult, ToolError> {
        Err(ToolError::new("never listed"))
    }
}

hangar_sdk::export_tool!(StuckList);
