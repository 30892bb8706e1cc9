//! A DB tool's declared inputs: the JSON Schema they advertise, and the
//! check that arguments match them (defaults applied). A DB resource's
//! inputs are its URI template's variables, read from text first.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use hangar_config::{InputSpec, InputType};

/// The declared inputs of one tool.
#[derive(Debug, Clone)]
pub struct Inputs {
    specs: BTreeMap<String, InputSpec>,
}

impl Inputs {
    pub fn new(specs: BTreeMap<String, InputSpec>) -> Inputs {
        Inputs { specs }
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.specs.keys().map(String::as_str)
    }

    /// Inputs bound from a principal claim: (input, claim).
    pub fn claim_bound(&self) -> impl Iterator<Item = (&str, &str)> {
        self.specs
            .iter()
            .filter_map(|(name, spec)| Some((name.as_str(), spec.from_claim.as_deref()?)))
    }

    /// The value of input `name` from its text (a URI template variable),
    /// as the input's declared type: a string as it is, an integer, number
    /// or boolean when the whole text is one, an array or object when it is
    /// JSON text. A text that is not one names the input and the type.
    pub fn parse_text(&self, name: &str, text: &str) -> Result<Value, String> {
        let ty = self.specs.get(name).map_or(InputType::String, |s| s.ty);
        let value = match ty {
            InputType::String => Some(Value::String(text.to_string())),
            InputType::Integer => text.parse::<i64>().ok().map(Value::from),
            InputType::Number => text
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(Value::Number),
            InputType::Boolean => match text {
                "true" => Some(Value::Bool(true)),
                "false" => Some(Value::Bool(false)),
                _ => None,
            },
            InputType::Array | InputType::Object => serde_json::from_str(text).ok(),
        };
        value.ok_or_else(|| {
            let shown: String = text.chars().take(64).collect();
            let more = if shown.len() < text.len() { "…" } else { "" };
            format!("{name}: expected {}, got {shown:?}{more}", ty.as_str())
        })
    }

    fn caller_supplied(&self) -> impl Iterator<Item = (&String, &InputSpec)> {
        self.specs.iter().filter(|(_, s)| s.from_claim.is_none())
    }

    /// The JSON Schema (draft 2020-12) of the arguments.
    pub fn schema(&self) -> Value {
        let properties: Map<String, Value> = self
            .caller_supplied()
            .map(|(name, spec)| {
                let mut prop = json!({ "type": spec.ty.as_str() });
                if let (InputType::Array, Some(items)) = (spec.ty, spec.items) {
                    prop["items"] = json!({ "type": items.as_str() });
                }
                if let Some(d) = &spec.description {
                    prop["description"] = json!(d);
                }
                if let Some(d) = &spec.default {
                    prop["default"] = d.clone();
                }
                (name.clone(), prop)
            })
            .collect();
        let required: Vec<&str> = self
            .caller_supplied()
            .filter(|(_, s)| s.required)
            .map(|(n, _)| n.as_str())
            .collect();
        json!({
            "type": "object",
            "properties": properties,
            "required": required,
            "additionalProperties": false,
        })
    }

    /// Checks `args` against the declared inputs, applies defaults and binds
    /// claim inputs from `claims`. Every problem is reported, each naming its
    /// field and what was expected.
    pub fn validate(
        &self,
        args: &Map<String, Value>,
        claims: Option<&Value>,
    ) -> Result<Map<String, Value>, String> {
        let mut out = Map::new();
        let mut problems = Vec::new();
        for name in args
            .keys()
            .filter(|k| !self.caller_supplied().any(|(n, _)| n == *k))
        {
            problems.push(format!("{name}: not a declared input"));
        }
        for (name, claim) in self.claim_bound() {
            match claims.and_then(|c| c.get(claim)).filter(|v| !v.is_null()) {
                Some(v) => {
                    out.insert(name.to_string(), v.clone());
                }
                None => problems.push(format!("{name}: the caller has no {claim:?} claim")),
            }
        }
        for (name, spec) in self.caller_supplied() {
            match args
                .get(name)
                .filter(|v| !v.is_null())
                .or(spec.default.as_ref())
            {
                Some(value) => match check(value, spec) {
                    Ok(()) => {
                        out.insert(name.clone(), value.clone());
                    }
                    Err(why) => problems.push(format!("{name}: {why}")),
                },
                None if spec.required => {
                    problems.push(format!("{name}: required {} is missing", spec.ty.as_str()))
                }
                None => {
                    out.insert(name.clone(), Value::Null);
                }
            }
        }
        if problems.is_empty() {
            Ok(out)
        } else {
            Err(problems.join("; "))
        }
    }
}

fn check(value: &Value, spec: &InputSpec) -> Result<(), String> {
    if !is_type(value, spec.ty) {
        return Err(format!(
            "expected {}, got {}",
            spec.ty.as_str(),
            type_name(value)
        ));
    }
    if let (Value::Array(items), Some(item_ty)) = (value, spec.items) {
        for (i, item) in items.iter().enumerate() {
            if !is_type(item, item_ty) {
                return Err(format!(
                    "[{i}]: expected {}, got {}",
                    item_ty.as_str(),
                    type_name(item)
                ));
            }
        }
    }
    Ok(())
}

fn is_type(value: &Value, ty: InputType) -> bool {
    match ty {
        InputType::String => value.is_string(),
        InputType::Integer => value.is_i64() || value.is_u64(),
        InputType::Number => value.is_number(),
        InputType::Boolean => value.is_boolean(),
        InputType::Array => value.is_array(),
        InputType::Object => value.is_object(),
    }
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs() -> Inputs {
        let specs: BTreeMap<String, InputSpec> = toml::from_str(
            r#"
            id = { type = "integer", required = true }
            name = { type = "string" }
            limit = { type = "integer", default = 10 }
            tags = { type = "array", items = "string" }
            "#,
        )
        .unwrap();
        Inputs::new(specs)
    }

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn defaults_are_applied_and_absent_optionals_are_null() {
        let out = inputs().validate(&obj(json!({ "id": 3 })), None).unwrap();
        assert_eq!(
            Value::Object(out),
            json!({ "id": 3, "limit": 10, "name": null, "tags": null })
        );
    }

    #[test]
    fn every_problem_names_its_field() {
        let err = inputs()
            .validate(
                &obj(json!({ "name": 5, "tags": ["a", 1], "extra": true })),
                None,
            )
            .unwrap_err();
        assert!(err.contains("extra: not a declared input"), "{err}");
        assert!(err.contains("id: required integer is missing"), "{err}");
        assert!(err.contains("name: expected string, got integer"), "{err}");
        assert!(
            err.contains("tags: [1]: expected string, got integer"),
            "{err}"
        );
        assert!(
            inputs()
                .validate(&obj(json!({ "id": 1.5 })), None)
                .unwrap_err()
                .contains("expected integer, got number")
        );
    }

    #[test]
    fn claim_inputs_come_from_claims_only() {
        let specs: BTreeMap<String, InputSpec> =
            toml::from_str(r#"owner = { type = "string", from_claim = "sub" }"#).unwrap();
        let inputs = Inputs::new(specs);
        assert_eq!(inputs.schema()["properties"], json!({}));
        let out = inputs
            .validate(&Map::new(), Some(&json!({ "sub": "alice" })))
            .unwrap();
        assert_eq!(out["owner"], json!("alice"));
        assert!(
            inputs
                .validate(&Map::new(), None)
                .unwrap_err()
                .contains("no \"sub\" claim")
        );
        assert!(
            inputs
                .validate(
                    &obj(json!({ "owner": "mallory" })),
                    Some(&json!({ "sub": "a" }))
                )
                .is_err()
        );
    }

    #[test]
    fn text_converts_to_the_declared_type_or_is_refused() {
        let specs: BTreeMap<String, InputSpec> = toml::from_str(
            r#"
            id = { type = "integer" }
            price = { type = "number" }
            on = { type = "boolean" }
            ids = { type = "array", items = "integer" }
            "#,
        )
        .unwrap();
        let inputs = Inputs::new(specs);
        assert_eq!(inputs.parse_text("id", "42").unwrap(), json!(42));
        assert_eq!(inputs.parse_text("price", "1.5").unwrap(), json!(1.5));
        assert_eq!(inputs.parse_text("on", "false").unwrap(), json!(false));
        assert_eq!(inputs.parse_text("ids", "[1,2]").unwrap(), json!([1, 2]));
        assert_eq!(
            inputs.parse_text("other", "1 OR 1=1").unwrap(),
            json!("1 OR 1=1")
        );
        for (name, bad) in [
            ("id", "abc"),
            ("id", "1 OR 1=1"),
            ("id", "1.5"),
            ("price", "NaN"),
            ("on", "yes"),
            ("ids", "[1"),
        ] {
            let err = inputs.parse_text(name, bad).unwrap_err();
            assert!(err.starts_with(&format!("{name}: expected ")), "{err}");
        }
        assert!(inputs.parse_text("price", "inf").is_err());
    }

    #[test]
    fn schema_lists_required_and_forbids_extras() {
        let s = inputs().schema();
        assert_eq!(s["required"], json!(["id"]));
        assert_eq!(s["additionalProperties"], json!(false));
        assert_eq!(
            s["properties"]["tags"]["items"],
            json!({ "type": "string" })
        );
        assert_eq!(s["properties"]["limit"]["default"], json!(10));
    }
}
