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
//! pinned; REST has no sessions, so nothing is pinned there. Prompts are
//! pinned the same way by `prompts/list` (an upstream's prompt text can
//! change under a session as its tools can), and `prompts/get` of a changed
//! one is refused under `block`.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use super::{CallError, ErrorKind, Stage};
use super::{PromptDef, ToolDef};
use hangar_config::Pinning;

/// One session's pinned definition hashes, by tool name (and prompt, as
/// `prompt:NAME`).
#[derive(Debug, Default)]
pub struct Pins(Mutex<HashMap<String, String>>);

/// A definition a session pins: a tool's or a prompt's.
pub trait Pinned: serde::Serialize {
    /// What it is, for messages: `tool` or `prompt`.
    const KIND: &'static str;
    fn name(&self) -> &str;
    /// Its key among a session's pins.
    fn pin_key(&self) -> String;
}

impl Pinned for ToolDef {
    const KIND: &'static str = "tool";
    fn name(&self) -> &str {
        &self.name
    }
    fn pin_key(&self) -> String {
        self.name.clone()
    }
}

impl Pinned for PromptDef {
    const KIND: &'static str = "prompt";
    fn name(&self) -> &str {
        &self.name
    }
    fn pin_key(&self) -> String {
        format!("prompt:{}", self.name)
    }
}

impl Pins {
    /// Pins `def` if it is new to the session; returns the pinned hash when
    /// the definition differs from it.
    pub fn check<D: Pinned>(&self, def: &D) -> Option<String> {
        let hash = definition_hash(def);
        let mut pins = self.0.lock().expect("pins lock");
        let key = def.pin_key();
        match pins.get(&key) {
            Some(pinned) if *pinned != hash => Some(pinned.clone()),
            Some(_) => None,
            None => {
                pins.insert(key, hash);
                None
            }
        }
    }

    /// The pinned hash of `def`'s tool or prompt when `def` differs from it
    /// (pins nothing).
    pub fn changed<D: Pinned>(&self, def: &D) -> Option<String> {
        let pins = self.0.lock().expect("pins lock");
        let pinned = pins.get(&def.pin_key())?;
        (*pinned != definition_hash(def)).then(|| pinned.clone())
    }
}

/// `sha256:<hex>` of a definition's JSON (object keys sorted).
pub fn definition_hash<D: serde::Serialize>(def: &D) -> String {
    let json = serde_json::to_vec(def).expect("definitions serialize");
    format!("sha256:{}", hex::encode(Sha256::digest(json)))
}

/// The error `block` refuses a call to `def` with in a session whose
/// pins it no longer matches, if it does.
pub fn refusal<D: Pinned>(pins: &Pins, mode: Pinning, def: &D) -> Option<CallError> {
    if mode != Pinning::Block {
        return None;
    }
    pins.changed(def)?;
    Some(CallError::new(
        Stage::Pinning,
        ErrorKind::Failed,
        format!(
            "{} {} changed its definition since this session listed it; \
             pinning = \"block\" refuses it until the client initializes a new session",
            D::KIND,
            def.name()
        ),
    ))
}

/// A tool `up.t` whose definition differs only by its description: what
/// the pinning tests here list and call.
#[cfg(test)]
fn def(description: &str) -> ToolDef {
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
    fn a_prompt_is_pinned_apart_from_a_tool_of_the_same_name() {
        let pins = Pins::default();
        let prompt = |description: &str| PromptDef {
            name: "up.t".into(),
            title: None,
            description: Some(description.into()),
            arguments: Vec::new(),
        };
        assert!(pins.check(&def("a")).is_none());
        assert!(pins.check(&prompt("p")).is_none());
        assert!(pins.check(&prompt("changed")).is_some());
        let refused = refusal(&pins, Pinning::Block, &prompt("changed")).unwrap();
        assert!(
            refused.message.starts_with("prompt up.t"),
            "{}",
            refused.message
        );
        assert!(refusal(&pins, Pinning::Block, &def("a")).is_none());
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
