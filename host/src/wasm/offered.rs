//! [`Offers`]: which of the `resources`, `prompts` and `completion`
//! interfaces a `server`-world component exports, found at load. Apart from
//! `offers.rs` (which runs them) because `ToolPlugin` holds it.

use wasmtime::component::InstancePre;

use super::bindings::server::exports::hangar::plugin::{completion, prompts, resources};
use super::guest::GuestState;

/// The `resources`, `prompts` and `completion` exports of a component.
#[derive(Default)]
pub struct Offers {
    pub(super) resources: Option<resources::GuestIndices>,
    pub(super) prompts: Option<prompts::GuestIndices>,
    pub(super) completion: Option<completion::GuestIndices>,
}

impl Offers {
    /// The interfaces `pre`'s component exports (with the types Hangar knows).
    pub fn of(pre: &InstancePre<GuestState>) -> Offers {
        Offers {
            resources: resources::GuestIndices::new(pre).ok(),
            prompts: prompts::GuestIndices::new(pre).ok(),
            completion: completion::GuestIndices::new(pre).ok(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.resources.is_none() && self.prompts.is_none() && self.completion.is_none()
    }
}
