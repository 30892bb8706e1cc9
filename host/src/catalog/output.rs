//! The presenter's rules for one tool, compiled once per catalog: the cut
//! (`[[tools]] limit`, or `"x-hangar-limit"` in the tool's own
//! `outputSchema`), the undeclared properties dropped (`strip_undeclared`)
//! and the check against `outputSchema` (the `jsonschema` crate, as for
//! inputs). The pipeline applies them after the output map, in that order:
//! a result is cut before it is checked, so a cut result still conforms.

use std::collections::HashMap;

use serde_json::Value;

use hangar_config::{OutputValidation, ResultLimit};
use hangar_core::call::{Content, ToolResult};

/// At most this many schema errors are named in one message.
const MAX_PROBLEMS: usize = 8;

/// How deep `$ref`s are followed when working out what to strip: a
/// recursive schema strips to this depth and no further.
const MAX_STRIP_DEPTH: u32 = 32;

/// One tool's output rules.
#[derive(Default)]
pub struct OutputCheck {
    /// What a result that does not conform gets (`[server] output_validation`).
    pub mode: OutputValidation,
    /// The compiled `outputSchema`; `None`: the tool declares none, or
    /// validation is `off`.
    validator: Option<jsonschema::Validator>,
    /// The closed objects of the schema, when undeclared properties are
    /// dropped and the schema closes some object.
    strip: Option<Strip>,
    /// The array cut to a number of items.
    limit: Option<ResultLimit>,
}

/// What the output check found wrong with a result: every failing path,
/// with what was expected there.
#[derive(Debug, PartialEq)]
pub struct Mismatch(pub String);

impl OutputCheck {
    /// The rules of a tool with `schema` as its `outputSchema`.
    pub fn new(
        schema: Option<&Value>,
        mode: OutputValidation,
        strip_undeclared: bool,
        limit: Option<ResultLimit>,
    ) -> Result<OutputCheck, String> {
        let declared = schema.and_then(ResultLimit::declared).transpose()?;
        let limit = limit.or(declared);
        let Some(schema) = schema else {
            return Ok(OutputCheck {
                mode,
                limit,
                ..OutputCheck::default()
            });
        };
        let validator = match mode {
            OutputValidation::Off => None,
            _ => Some(
                jsonschema::draft202012::new(schema)
                    .map_err(|e| format!("invalid outputSchema: {e}"))?,
            ),
        };
        let strip = strip_undeclared
            .then(|| Strip::compile(schema, schema, 0))
            .filter(Strip::strips);
        Ok(OutputCheck {
            mode,
            validator,
            strip,
            limit,
        })
    }

    /// Whether there is anything to do for a result.
    pub fn is_idle(&self) -> bool {
        self.validator.is_none() && self.strip.is_none() && self.limit.is_none()
    }

    /// Cuts, strips and checks `result` (a tool-level error is left alone:
    /// its shape is not the tool's output). `Err`: it does not conform.
    pub fn apply(&self, result: &mut ToolResult) -> Result<(), Mismatch> {
        if result.is_error {
            return Ok(());
        }
        if let Some(limit) = &self.limit {
            cut(result, limit);
        }
        if let (Some(strip), Some(value)) = (&self.strip, result.structured_content.as_mut()) {
            strip.apply(value);
        }
        let Some(validator) = &self.validator else {
            return Ok(());
        };
        let Some(value) = &result.structured_content else {
            return Err(Mismatch(
                "the result has no structuredContent, and the tool's outputSchema asks for it"
                    .into(),
            ));
        };
        if validator.is_valid(value) {
            return Ok(());
        }
        let mut problems: Vec<String> = Vec::new();
        let errors = validator.iter_errors(value);
        for error in errors.take(MAX_PROBLEMS) {
            let path = error.instance_path().to_string();
            let path = if path.is_empty() { "/".into() } else { path };
            problems.push(format!("{path}: {error}"));
        }
        Err(Mismatch(format!(
            "the result does not match the tool's outputSchema: {}",
            problems.join("; ")
        )))
    }
}

/// Cuts the array at the limit's pointer, in `structuredContent` and in a
/// text block that carries the same JSON (the usual mirror of it), and
/// says so in the result.
fn cut(result: &mut ToolResult, limit: &ResultLimit) {
    let max = limit.max.get();
    let mut total = None;
    if let Some(Value::Array(items)) =
        (result.structured_content.as_mut()).and_then(|v| v.pointer_mut(&limit.pointer))
        && items.len() > max
    {
        total = Some(items.len());
        items.truncate(max);
    }
    for block in &mut result.content {
        let Content::Text { text } = block else {
            continue;
        };
        if !text.trim_start().starts_with(['{', '[']) {
            continue;
        }
        let Ok(mut mirror) = serde_json::from_str::<Value>(text) else {
            continue;
        };
        if let Some(Value::Array(items)) = mirror.pointer_mut(&limit.pointer)
            && items.len() > max
        {
            total.get_or_insert(items.len());
            items.truncate(max);
            *text = mirror.to_string();
        }
    }
    if let Some(total) = total {
        result.report_truncated(&limit.pointer, Some(total), max);
    }
}

/// Where a schema closes objects (`additionalProperties: false`), with what
/// each declared property, each item and each other property holds.
#[derive(Default)]
struct Strip {
    /// The declared properties, when the schema declares some.
    properties: HashMap<String, Strip>,
    /// Undeclared properties are dropped here.
    closed: bool,
    /// What undeclared properties hold (`additionalProperties` as a schema).
    additional: Option<Box<Strip>>,
    /// `prefixItems`, by position.
    prefix: Vec<Strip>,
    /// `items`: every item past the prefix.
    items: Option<Box<Strip>>,
}

impl Strip {
    fn compile(schema: &Value, root: &Value, depth: u32) -> Strip {
        let Some(object) = schema.as_object() else {
            return Strip::default();
        };
        if depth > MAX_STRIP_DEPTH {
            return Strip::default();
        }
        // A local `$ref` ("#/$defs/item") is followed; others strip nothing.
        if let Some(target) = object.get("$ref").and_then(Value::as_str) {
            return match target.strip_prefix('#').and_then(|p| root.pointer(p)) {
                Some(found) => Strip::compile(found, root, depth + 1),
                None => Strip::default(),
            };
        }
        let sub = |v: &Value| Strip::compile(v, root, depth + 1);
        let properties: HashMap<String, Strip> = (object.get("properties"))
            .and_then(Value::as_object)
            .into_iter()
            .flatten()
            .map(|(name, s)| (name.clone(), sub(s)))
            .collect();
        // A pattern may declare the property: such a schema is left whole.
        let closed = object.get("additionalProperties") == Some(&Value::Bool(false))
            && !object.contains_key("patternProperties");
        let additional = (object.get("additionalProperties"))
            .filter(|a| a.is_object())
            .map(|a| Box::new(sub(a)));
        let prefix = (object.get("prefixItems"))
            .and_then(Value::as_array)
            .map(|items| items.iter().map(sub).collect())
            .unwrap_or_default();
        let items = object.get("items").map(|i| Box::new(sub(i)));
        Strip {
            properties,
            closed,
            additional,
            prefix,
            items,
        }
    }

    /// Whether anything under this schema is ever dropped.
    fn strips(&self) -> bool {
        self.closed
            || self.properties.values().any(Strip::strips)
            || self.additional.as_ref().is_some_and(|s| s.strips())
            || self.prefix.iter().any(Strip::strips)
            || self.items.as_ref().is_some_and(|s| s.strips())
    }

    fn apply(&self, value: &mut Value) {
        match value {
            Value::Object(map) => {
                if self.closed {
                    map.retain(|name, _| self.properties.contains_key(name));
                }
                for (name, v) in map.iter_mut() {
                    match (self.properties.get(name), &self.additional) {
                        (Some(s), _) => s.apply(v),
                        (None, Some(s)) => s.apply(v),
                        (None, None) => {}
                    }
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter_mut().enumerate() {
                    match (self.prefix.get(i), &self.items) {
                        (Some(s), _) => s.apply(item),
                        (None, Some(s)) => s.apply(item),
                        (None, None) => {}
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "count": { "type": "integer" },
                "items": { "type": "array", "items": { "$ref": "#/$defs/item" } }
            },
            "required": ["count", "items"],
            "additionalProperties": false,
            "$defs": {
                "item": {
                    "type": "object",
                    "properties": { "id": { "type": "integer" } },
                    "required": ["id"],
                    "additionalProperties": false
                }
            }
        })
    }

    fn result(structured: Value) -> ToolResult {
        ToolResult {
            content: vec![Content::Text {
                text: structured.to_string(),
            }],
            structured_content: Some(structured),
            is_error: false,
            meta: None,
        }
    }

    fn check(strip: bool, limit: Option<ResultLimit>) -> OutputCheck {
        OutputCheck::new(Some(&schema()), OutputValidation::Strict, strip, limit).unwrap()
    }

    #[test]
    fn a_conforming_result_passes_untouched() {
        let mut r = result(json!({ "count": 1, "items": [{ "id": 1 }] }));
        let before = r.clone();
        check(false, None).apply(&mut r).unwrap();
        assert_eq!(r, before);
    }

    #[test]
    fn a_mismatch_names_the_path_and_what_was_expected() {
        let mut r = result(json!({ "count": "one", "items": [{ "id": "x" }] }));
        let Mismatch(message) = check(false, None).apply(&mut r).unwrap_err();
        assert!(
            message.contains("/count: \"one\" is not of type \"integer\""),
            "{message}"
        );
        assert!(message.contains("/items/0/id: "), "{message}");
    }

    #[test]
    fn undeclared_properties_fail_unless_stripped_at_every_closed_level() {
        let extra = json!({ "count": 1, "secret": "s", "items": [{ "id": 1, "internal": true }] });
        let Mismatch(message) = check(false, None)
            .apply(&mut result(extra.clone()))
            .unwrap_err();
        assert!(message.contains("secret"), "{message}");
        let mut r = result(extra);
        check(true, None).apply(&mut r).unwrap();
        assert_eq!(
            r.structured_content,
            Some(json!({ "count": 1, "items": [{ "id": 1 }] }))
        );
    }

    #[test]
    fn an_open_schema_strips_nothing() {
        let open = json!({ "type": "object", "properties": { "a": { "type": "integer" } } });
        let c = OutputCheck::new(Some(&open), OutputValidation::Strict, true, None).unwrap();
        assert!(c.strip.is_none());
    }

    #[test]
    fn a_cut_comes_before_the_check_and_is_reported() {
        let items: Vec<Value> = (0..10_000).map(|i| json!({ "id": i })).collect();
        let mut r = result(json!({ "count": 10_000, "items": items }));
        let limit = ResultLimit {
            pointer: "/items".into(),
            max: std::num::NonZeroUsize::new(50).unwrap(),
        };
        check(false, Some(limit)).apply(&mut r).unwrap();
        let sc = r.structured_content.as_ref().unwrap();
        assert_eq!(sc["items"].as_array().unwrap().len(), 50);
        let Content::Text { text } = &r.content[0] else {
            panic!()
        };
        let mirror: Value = serde_json::from_str(text).unwrap();
        assert_eq!(mirror["items"].as_array().unwrap().len(), 50);
        let meta = r.meta.unwrap();
        assert_eq!(
            meta["hangar/truncated"],
            json!({ "pointer": "/items", "total": 10_000, "kept": 50 })
        );
        assert!(
            meta["hangar/hints"]["rules"][0]
                .as_str()
                .unwrap()
                .contains("50 of 10000")
        );
    }

    #[test]
    fn a_tool_declares_its_own_limit_and_a_bad_one_is_refused() {
        let mut s = schema();
        s["x-hangar-limit"] = json!({ "pointer": "/items", "max": 2 });
        let c = OutputCheck::new(Some(&s), OutputValidation::Strict, false, None).unwrap();
        let mut r = result(json!({ "count": 3, "items": [{ "id": 1 }, { "id": 2 }, { "id": 3 }] }));
        c.apply(&mut r).unwrap();
        assert_eq!(
            r.structured_content.unwrap()["items"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
        s["x-hangar-limit"] = json!({ "pointer": "items", "max": 2 });
        assert!(OutputCheck::new(Some(&s), OutputValidation::Strict, false, None).is_err());
    }

    #[test]
    fn missing_structured_content_is_a_mismatch_and_errors_are_left_alone() {
        let mut r = result(json!({}));
        r.structured_content = None;
        assert!(check(false, None).apply(&mut r).is_err());
        let mut e = ToolResult::error("boom");
        check(false, None).apply(&mut e).unwrap();
    }

    #[test]
    fn off_checks_nothing() {
        let c = OutputCheck::new(Some(&schema()), OutputValidation::Off, false, None).unwrap();
        assert!(c.is_idle());
        c.apply(&mut result(json!({ "count": "x" }))).unwrap();
    }
}
