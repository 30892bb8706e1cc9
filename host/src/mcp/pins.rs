//! Tool-definition pinning per MCP session (`[server] pinning`): the first
//! `tools/list` a session sees pins each tool's definition (a SHA-256 of
//! its name, title, description, schemas and annotations). A definition
//! that later differs (an upstream changed a tool under a live session, a
//! known tool-poisoning vector) is logged and marked in the listing's
//! `_meta` (`warn`), and with `block` calls to it are refused in that
//! session until the client initializes again (a new session pins afresh).
//! A session that never listed its tools has nothing pinned.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::catalog::ToolDef;
use crate::config::Pinning;

/// The `_meta` key a changed tool carries in `tools/list`.
pub const META_KEY: &str = "io.hangar/pinning";

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

/// A listed definition as JSON, marked if it changed since it was pinned.
pub fn listed(pins: Option<&Pins>, mode: Pinning, session: &str, def: &ToolDef) -> Value {
    let mut value = json!(def);
    if mode == Pinning::Off {
        return value;
    }
    let Some(pinned) = pins.and_then(|p| p.check(def)) else {
        return value;
    };
    tracing::warn!(
        tool = %def.name,
        session,
        "tool definition changed since this session pinned it ({pinned})"
    );
    value["_meta"] = json!({ META_KEY: {
        "changed": true,
        "pinned": pinned,
        "current": definition_hash(def),
        "blocked": mode == Pinning::Block,
    }});
    value
}

/// Why `block` refuses a call to `def` in this session, if it does.
pub fn refusal(pins: &Pins, mode: Pinning, def: &ToolDef) -> Option<String> {
    if mode != Pinning::Block {
        return None;
    }
    pins.changed(def)?;
    Some(format!(
        "tool {} changed its definition since this session listed it; \
         pinning = \"block\" refuses it until the client initializes a new session",
        def.name
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(description: &str) -> ToolDef {
        ToolDef {
            name: "up.t".into(),
            title: None,
            description: description.into(),
            input_schema: json!({ "type": "object" }),
            output_schema: None,
            annotations: None,
        }
    }

    #[test]
    fn the_first_definition_is_pinned_and_a_change_is_marked_and_blocked() {
        let pins = Pins::default();
        let first = listed(Some(&pins), Pinning::Warn, "s", &def("a"));
        assert!(first.get("_meta").is_none());
        assert!(refusal(&pins, Pinning::Block, &def("a")).is_none());
        let changed = listed(Some(&pins), Pinning::Warn, "s", &def("b"));
        assert_eq!(changed["_meta"][META_KEY]["changed"], true);
        assert!(refusal(&pins, Pinning::Warn, &def("b")).is_none());
        assert!(
            refusal(&pins, Pinning::Block, &def("b"))
                .unwrap()
                .contains("up.t")
        );
        // The pin stays the first definition.
        assert!(
            listed(Some(&pins), Pinning::Warn, "s", &def("a"))
                .get("_meta")
                .is_none()
        );
    }

    #[test]
    fn off_pins_nothing() {
        let pins = Pins::default();
        listed(Some(&pins), Pinning::Off, "s", &def("a"));
        assert!(refusal(&pins, Pinning::Block, &def("b")).is_none());
    }
}
