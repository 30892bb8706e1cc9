//! Python stubs of tools, from their JSON Schemas: what `read_tool` gives
//! the author of a Python program beside the TypeScript declaration. A
//! tool's arguments become keyword-only parameters (`tools.db.price(id=1)`);
//! a tool with an argument whose name is no Python identifier takes one
//! dict instead (`tools.x({"two-words": 1})`), which every tool also does.

use std::fmt::Write;

use serde_json::{Map, Value};

use crate::catalog::ToolDef;

/// How deep a schema is followed before the rest is `Any`.
const MAX_DEPTH: usize = 8;

/// Python's keywords, which cannot name a parameter.
const KEYWORDS: &[&str] = &[
    "False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue",
    "def", "del", "elif", "else", "except", "finally", "for", "from", "global", "if", "import",
    "in", "is", "lambda", "nonlocal", "not", "or", "pass", "raise", "return", "try", "while",
    "with", "yield",
];

fn identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !KEYWORDS.contains(&name)
}

/// `async def NAME(*, arg: type, ...) -> type:` with the description and
/// each argument's as its docstring, NAME the last part of the tool's path.
pub fn stub(def: &ToolDef) -> String {
    let name = def.name.rsplit('.').next().unwrap_or(&def.name);
    let name = if identifier(name) { name } else { "tool" };
    let schema = def.input_schema.as_object();
    let properties = schema
        .and_then(|s| s.get("properties"))
        .and_then(Value::as_object);
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let returns = match &def.output_schema {
        Some(schema) => type_of(schema, 0),
        None => "str".into(),
    };
    let mut doc = vec![def.description.trim().to_string()];
    let mut params = Vec::new();
    let keyword = properties.is_none_or(|p| p.keys().all(|k| identifier(k)));
    for (arg, prop) in properties.into_iter().flatten() {
        let ty = type_of(prop, 0);
        let needed = required.contains(&arg.as_str());
        if keyword {
            let nullable = ty == "None" || ty.ends_with("| None") || ty.contains("None]");
            params.push(match (needed, nullable) {
                (true, _) => format!("{arg}: {ty}"),
                (false, true) => format!("{arg}: {ty} = None"),
                (false, false) => format!("{arg}: {ty} | None = None"),
            });
        }
        if let Some(text) = prop.get("description").and_then(Value::as_str) {
            doc.push(format!("{arg}: {}", text.trim()));
        }
    }
    let mut out = String::new();
    let signature = if keyword && !params.is_empty() {
        format!("*, {}", params.join(", "))
    } else if keyword {
        String::new()
    } else {
        "args: dict".to_string()
    };
    let _ = writeln!(out, "async def {name}({signature}) -> {returns}:");
    let doc: Vec<String> = doc.into_iter().filter(|d| !d.is_empty()).collect();
    if !doc.is_empty() {
        // A description must not end the docstring it is written in.
        let text = doc.join("\n\n").replace("\"\"\"", "\\\"\\\"\\\"");
        let _ = writeln!(out, "    \"\"\"");
        for line in text.lines() {
            match line {
                "" => out.push('\n'),
                line => {
                    let _ = writeln!(out, "    {line}");
                }
            }
        }
        let _ = writeln!(out, "    \"\"\"");
    }
    out.push_str("    ...\n");
    out
}

/// A Python literal of a JSON value (for `Literal[...]`).
fn literal(value: &Value) -> String {
    match value {
        Value::Null => "None".into(),
        Value::Bool(true) => "True".into(),
        Value::Bool(false) => "False".into(),
        // JSON strings and numbers are Python literals as they are.
        other => other.to_string(),
    }
}

fn type_of(schema: &Value, depth: usize) -> String {
    let Some(schema) = schema.as_object().filter(|_| depth <= MAX_DEPTH) else {
        return "Any".into();
    };
    if let Some(value) = schema.get("const") {
        return format!("Literal[{}]", literal(value));
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        let values: Vec<String> = values.iter().map(literal).collect();
        return format!("Literal[{}]", values.join(", "));
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return union(options.iter().map(|s| type_of(s, depth + 1)).collect());
        }
    }
    match schema.get("type") {
        Some(Value::String(t)) => of_type(t, schema, depth),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| of_type(t, schema, depth))
                .collect(),
        ),
        _ if schema.contains_key("properties") => "dict".into(),
        _ => "Any".into(),
    }
}

fn union(mut parts: Vec<String>) -> String {
    parts.dedup();
    if parts.is_empty() {
        "Any".into()
    } else {
        parts.join(" | ")
    }
}

fn of_type(t: &str, schema: &Map<String, Value>, depth: usize) -> String {
    match t {
        "string" => "str".into(),
        "integer" => "int".into(),
        "number" => "float".into(),
        "boolean" => "bool".into(),
        "null" => "None".into(),
        "array" => match schema.get("items") {
            Some(items) => format!("list[{}]", type_of(items, depth + 1)),
            None => "list".into(),
        },
        "object" => "dict".into(),
        _ => "Any".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(input: Value, output: Option<Value>) -> ToolDef {
        ToolDef {
            name: "billing.invoices.get".into(),
            title: None,
            description: "Gets one invoice.".into(),
            input_schema: input,
            output_schema: output,
            annotations: None,
            meta: None,
        }
    }

    #[test]
    fn arguments_are_keyword_parameters_with_their_types() {
        let d = def(
            json!({"type": "object", "properties": {
                "id": {"type": "integer", "description": "The invoice"},
                "status": {"enum": ["open", "paid", null]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "flag": {"type": ["boolean", "null"]}
            }, "required": ["id"]}),
            Some(json!({"type": "object"})),
        );
        assert_eq!(
            stub(&d),
            "async def get(*, flag: bool | None = None, id: int, \
             status: Literal[\"open\", \"paid\", None] = None, tags: list[str] | None = None) -> dict:\n    \
             \"\"\"\n    Gets one invoice.\n\n    id: The invoice\n    \"\"\"\n    ...\n"
        );
    }

    #[test]
    fn a_name_that_is_no_identifier_makes_the_stub_take_a_dict() {
        let d = def(
            json!({"type": "object", "properties": {"two-words": {"type": "string"}, "class": {}}}),
            None,
        );
        assert!(
            stub(&d).starts_with("async def get(args: dict) -> str:\n"),
            "{}",
            stub(&d)
        );
    }

    #[test]
    fn a_description_cannot_close_its_docstring() {
        let mut d = def(json!({}), None);
        d.description = "evil \"\"\" import os".into();
        let s = stub(&d);
        assert!(s.contains("evil \\\"\\\"\\\" import os"), "{s}");
        assert_eq!(s.matches("\"\"\"").count(), 2, "{s}");
    }
}
