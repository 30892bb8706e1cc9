//! The validation stage: arguments against the tool's `inputSchema`
//! (JSON Schema draft 2020-12, with the `jsonschema` crate), defaults
//! applied first, undeclared fields rejected unless the schema allows them.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use hangar_core::call::{CallError, ErrorKind, Stage};

/// A tool's compiled input schema.
pub struct ArgsValidator {
    validator: jsonschema::Validator,
    defaults: Vec<(String, Value)>,
    /// Declared property names when the schema says nothing about others:
    /// then anything else is rejected.
    closed: Option<BTreeSet<String>>,
}

impl Default for ArgsValidator {
    /// Accepts any arguments: the check of a stage set with no schema (a
    /// resource's or a prompt's, whose arguments are checked by their own
    /// templates).
    fn default() -> ArgsValidator {
        ArgsValidator {
            validator: jsonschema::draft202012::new(&Value::Bool(true))
                .expect("the schema `true` is valid"),
            defaults: Vec::new(),
            closed: None,
        }
    }
}

impl ArgsValidator {
    pub fn new(schema: &Value) -> Result<ArgsValidator, String> {
        let validator = jsonschema::draft202012::new(schema)
            .map_err(|e| format!("invalid inputSchema: {e}"))?;
        let properties = schema.get("properties").and_then(Value::as_object);
        let defaults = properties
            .into_iter()
            .flatten()
            .filter_map(|(name, prop)| Some((name.clone(), prop.get("default")?.clone())))
            .collect();
        let open = schema.get("additionalProperties").is_some()
            || schema.get("patternProperties").is_some()
            || schema.get("unevaluatedProperties").is_some();
        let closed = match (properties, open) {
            (Some(props), false) => Some(props.keys().cloned().collect()),
            (None, false) => Some(BTreeSet::new()),
            _ => None,
        };
        Ok(ArgsValidator {
            validator,
            defaults,
            closed,
        })
    }

    /// The arguments with defaults applied, or every failing field with its
    /// path and the reason.
    pub fn validate(&self, args: Value) -> Result<Value, CallError> {
        let mut args = match args {
            Value::Null => Value::Object(Map::new()),
            other => other,
        };
        if let Value::Object(map) = &mut args {
            // The name is copied only for a default that is applied.
            for (name, default) in &self.defaults {
                if !map.contains_key(name) {
                    map.insert(name.clone(), default.clone());
                }
            }
        }
        let mut problems: Vec<String> = Vec::new();
        if let (Some(declared), Value::Object(map)) = (&self.closed, &args) {
            for name in map.keys().filter(|k| !declared.contains(*k)) {
                problems.push(format!("/{name}: not a declared argument"));
            }
        }
        // Valid arguments (nearly every call) are told by the validator's
        // boolean check, which builds no error list; the errors are
        // collected only for arguments that fail it.
        if problems.is_empty() && self.validator.is_valid(&args) {
            return Ok(args);
        }
        for error in self.validator.iter_errors(&args) {
            let path = error.instance_path().to_string();
            let path = if path.is_empty() {
                "/".to_string()
            } else {
                path
            };
            problems.push(format!("{path}: {error}"));
        }
        if problems.is_empty() {
            Ok(args)
        } else {
            Err(CallError::new(
                Stage::Validate,
                ErrorKind::Invalid,
                format!("invalid arguments: {}", problems.join("; ")),
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn echo() -> ArgsValidator {
        ArgsValidator::new(&json!({
            "type": "object",
            "properties": {
                "text": { "type": "string" },
                "times": { "type": "integer", "minimum": 1, "default": 1 }
            },
            "required": ["text"]
        }))
        .unwrap()
    }

    #[test]
    fn defaults_are_applied() {
        assert_eq!(
            echo().validate(json!({ "text": "a" })).unwrap(),
            json!({ "text": "a", "times": 1 })
        );
    }

    #[test]
    fn every_failing_field_is_listed_with_its_path() {
        let e = echo()
            .validate(json!({ "times": "x", "extra": 1 }))
            .unwrap_err();
        assert_eq!(e.stage, Stage::Validate);
        assert!(
            e.message.contains("/extra: not a declared argument"),
            "{}",
            e.message
        );
        assert!(e.message.contains("/times: "), "{}", e.message);
        assert!(
            e.message.contains("\"text\" is a required property"),
            "{}",
            e.message
        );
    }

    #[test]
    fn schemas_that_allow_more_accept_more() {
        let v =
            ArgsValidator::new(&json!({ "type": "object", "additionalProperties": true })).unwrap();
        assert!(v.validate(json!({ "anything": 1 })).is_ok());
        let closed = ArgsValidator::new(&json!({ "type": "object", "properties": {} })).unwrap();
        assert!(closed.validate(json!({ "x": 1 })).is_err());
        assert!(closed.validate(Value::Null).is_ok());
    }
}
