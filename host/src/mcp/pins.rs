//! Pinning in `tools/list` and `prompts/list` (`[server] pinning`, see
//! `pipeline::pins`): the first listing a session sees pins each
//! definition; a later one that differs is logged and marked in its `_meta`.

use serde_json::{Value, json};

use hangar_config::Pinning;
use hangar_core::call::pins::{Pinned, Pins, definition_hash};

/// The `_meta` key a changed tool or prompt carries in its listing.
pub const META_KEY: &str = "io.hangar/pinning";

/// A listed definition as JSON, marked if it changed since it was pinned.
pub fn listed<D: Pinned>(pins: Option<&Pins>, mode: Pinning, session: &str, def: &D) -> Value {
    let mut value = json!(def);
    if mode == Pinning::Off {
        return value;
    }
    let Some(pinned) = pins.and_then(|p| p.check(def)) else {
        return value;
    };
    tracing::warn!(
        name = %def.name(),
        session,
        "{} definition changed since this session pinned it ({pinned})",
        D::KIND
    );
    if !value["_meta"].is_object() {
        value["_meta"] = json!({});
    }
    value["_meta"][META_KEY] = json!({
        "changed": true,
        "pinned": pinned,
        "current": definition_hash(def),
        "blocked": mode == Pinning::Block,
    });
    value
}

#[cfg(test)]
mod tests {
    use super::*;
    use hangar_core::call::ToolDef;
    use hangar_core::call::pins::refusal;

    /// A tool `up.t` whose definition differs only by its description.
    fn def(description: &str) -> ToolDef {
        ToolDef {
            name: "up.t".into(),
            title: None,
            description: description.into(),
            input_schema: json!({ "type": "object" }),
            output_schema: None,
            annotations: None,
            meta: None,
        }
    }

    #[test]
    fn the_first_definition_is_pinned_and_a_change_is_marked() {
        let pins = Pins::default();
        let first = listed(Some(&pins), Pinning::Warn, "s", &def("a"));
        assert!(first.get("_meta").is_none());
        let changed = listed(Some(&pins), Pinning::Warn, "s", &def("b"));
        assert_eq!(changed["_meta"][META_KEY]["changed"], true);
        assert_eq!(changed["_meta"][META_KEY]["blocked"], false);
        assert!(refusal(&pins, Pinning::Block, &def("b")).is_some());
        // The pin stays the first definition.
        let again = listed(Some(&pins), Pinning::Warn, "s", &def("a"));
        assert!(again.get("_meta").is_none());
    }

    #[test]
    fn off_pins_nothing() {
        let pins = Pins::default();
        listed(Some(&pins), Pinning::Off, "s", &def("a"));
        assert!(refusal(&pins, Pinning::Block, &def("b")).is_none());
    }
}
