//! `Unconnected`: what `[server] hide_unconnected` leaves out of a caller's
//! listings — the tools that `requires` a provider that resolves to nothing
//! for that caller (no connection of their own, no team or default value).
//! Worked out once per listing, from the providers some tool requires.

use std::collections::HashSet;

use super::setup::Pipeline;
use crate::catalog::{Stages, Unconnected};
use hangar_core::call::Principal;

impl Pipeline {
    /// What `principal`'s listings leave out (see the module doc).
    pub async fn unconnected(&self, principal: Option<&Principal>) -> Unconnected {
        let catalog = &self.catalog;
        let Some(accounts) = catalog.accounts().filter(|_| catalog.hides_unconnected()) else {
            return Unconnected::default();
        };
        let mut missing = HashSet::new();
        for name in catalog.required_providers() {
            if !accounts.usable(name, principal).await {
                missing.insert(name.to_string());
            }
        }
        Unconnected::missing(missing)
    }

    /// Whether every provider a tool with `stages` requires resolves for
    /// `principal` (what `read_tool` says as `connected`).
    pub async fn connected(&self, stages: &Stages, principal: Option<&Principal>) -> bool {
        let Some(accounts) = self.catalog.accounts() else {
            return true;
        };
        for name in &stages.requires {
            if !accounts.usable(name, principal).await {
                return false;
            }
        }
        true
    }
}
