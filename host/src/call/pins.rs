//! Tool-definition pinning per MCP session (`[server] pinning`): the first
//! `tools/list` a session sees pins each tool's definition (a SHA-256 of
//! its name, title, description, schemas, annotations and `_meta`, so an
//! MCP App's view link is pinned too). A definition
//! that later differs (an upstream changed a tool under a live session, a
//! known tool-poisoning vector) is logged and marked in the listing's
//! `_meta` (`warn`, see `mcp::pins`), and with `block` calls to it are
//! refused in that session until the client initializes again (a new
//! session pins afresh): `tools/call` and the meta-tool `call_tool` alike,
//! at stage `pinning`. A session that never listed its tools has nothing
//! pinned; REST has no sessions, so nothing is pinned there.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::ToolDef;
use super::{CallError, ErrorKind, Stage};
use crate::config::Pinning;

/// One session's pinned definition hashes, by tool name.
#[derive(Debug, Default)]
pub struct Pins(Mutex<HashMap<String, String>>);

impl Pins {
    /// Pins `def` if it is new to the session; returns the pinned hash when
    /// the definition differs from it.
    pub fn check(&self, def: &ToolDef) -> Option<String> {
        let hash = definition_hash(def);
        let mut pins = self.0.lock().expect("pins lock");
        match pins.get(&def.name) {
            Some(pinned) if *pinned != hash => Some(pinned.clone()),
            Some(_) => None,
            None => {
                pins.insert(def.name.clone(), hash);
                None
            }
        }
    }

    /// The pinned hash of `def`'s tool when `def` differs from it (pins nothing).
    pub fn changed(&self, def: &ToolDef) -> Option<String> {
        let pins = self.0.lock().expect("pins lock");
        let pinned = pins.get(&def.name)?;
        (*pinned != definition_hash(def)).then(|| pinned.clone())
    }
}

/// `sha256:<hex>` of a definition's JSON (object keys sorted).
pub fn definition_hash(def: &ToolDef) -> String {
    let json = serde_json::to_vec(def).expect("definitions serialize");
    format!("sha256:{}", hex::encode(Sha256::digest(json)))
}

/// The error `block` refuses a call to `def` with in a session whose
/// pins it no longer matches, if it does.
pub fn refusal(pins: &Pins, mode: Pinning, def: &ToolDef) -> Option<CallError> {
    if mode != Pinning::Block {
        return None;
    }
    pins.changed(def)?;
    Some(CallError::new(
        Stage::Pinning,
        ErrorKind::Failed,
        format!(
            "tool {} changed its definition since this session listed it; \
             pinning = \"block\" refuses it until the client initializes a new session",
            def.name
        ),
    ))
}

/// A tool `up.t` whose definition differs only by its description: what
/// the pinning tests here and in `mcp::pins` list and call.
#[cfg(test)]
pub(crate) fn def(description: &str) -> ToolDef {
    ToolDef {
        name: "up.t".into(),
        title: None,
        description: description.into(),
        input_schema: serde_json::json!({ "type": "object" }),
        output_schema: None,
        annotations: None,
        meta: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_definition_is_pinned_and_a_change_is_refused_under_block() {
        let pins = Pins::default();
        assert!(pins.check(&def("a")).is_none());
        assert!(refusal(&pins, Pinning::Block, &def("a")).is_none());
        assert!(pins.check(&def("b")).is_some());
        assert!(refusal(&pins, Pinning::Warn, &def("b")).is_none());
        let refused = refusal(&pins, Pinning::Block, &def("b")).unwrap();
        assert_eq!(refused.stage, Stage::Pinning);
        assert!(refused.message.contains("up.t"));
        // The pin stays the first definition.
        assert!(pins.check(&def("a")).is_none());
    }

    #[test]
    fn an_apps_view_link_is_pinned_with_the_definition() {
        let pins = Pins::default();
        let with_view = |uri: &str| ToolDef {
            meta: serde_json::json!({ "ui": { "resourceUri": uri } })
                .as_object()
                .cloned(),
            ..def("a")
        };
        assert!(pins.check(&with_view("ui://app/view")).is_none());
        assert!(pins.check(&with_view("ui://app/view")).is_none());
        assert!(pins.check(&with_view("ui://elsewhere/view")).is_some());
    }
}
