//! [`Offers`]: which of the `resources`, `prompts`, `completion` and `meta`
//! interfaces a `server`-world component exports, found at load. Apart from
//! `offers.rs` (which runs them) because `ToolPlugin` holds it.

use wasmtime::component::InstancePre;

use super::bindings::app::exports::hangar::plugin::{completion, meta, prompts, resources};
use super::guest_state::GuestState;

/// The `resources`, `prompts`, `completion` and `meta` exports of a component.
#[derive(Default)]
pub struct Offers {
    pub(super) resources: Option<resources::GuestIndices>,
    pub(super) prompts: Option<prompts::GuestIndices>,
    pub(super) completion: Option<completion::GuestIndices>,
    /// `_meta` of its tools and resources (an MCP App's links): an export
    /// of its own, so components built before it load unchanged.
    pub(super) meta: Option<meta::GuestIndices>,
}

impl Offers {
    /// The interfaces `pre`'s component exports (with the types Hangar knows).
    pub fn of(pre: &InstancePre<GuestState>) -> Offers {
        Offers {
            resources: resources::GuestIndices::new(pre).ok(),
            prompts: prompts::GuestIndices::new(pre).ok(),
            completion: completion::GuestIndices::new(pre).ok(),
            meta: meta::GuestIndices::new(pre).ok(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_none()
            && self.prompts.is_none()
            && self.completion.is_none()
            && self.meta.is_none()
    }
}
