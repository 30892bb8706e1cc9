//! TypeScript declarations of tools, from their JSON Schemas: what
//! `read_tool` gives a program's author beside the schemas, and what
//! `hangar://code/tools.d.ts` holds for every tool a caller may call.
//! A schema TypeScript cannot say exactly (formats, patterns, bounds)
//! becomes the nearest type that admits every valid value.

use std::fmt::Write;

use serde_json::{Map, Value};

use crate::catalog::ToolDef;

/// How deep a schema is followed before the rest is `unknown`.
const MAX_DEPTH: usize = 8;

/// `/** description */ name(args: {...}): Promise<...>;` for one tool, its
/// name the last part of its dotted path.
pub fn declaration(def: &ToolDef, indent: &str) -> String {
    let mut out = String::new();
    comment(&mut out, indent, &def.description);
    let name = def.name.rsplit('.').next().unwrap_or(&def.name);
    let args = type_of(&def.input_schema, 0, indent);
    let returns = match &def.output_schema {
        Some(schema) => type_of(schema, 0, indent),
        // A tool without an output schema answers its text.
        None => "string".into(),
    };
    let optional = def
        .input_schema
        .get("required")
        .and_then(Value::as_array)
        .is_none_or(|r| r.is_empty());
    let _ = writeln!(
        out,
        "{indent}{}(args{}: {args}): Promise<{returns}>;",
        property(name),
        if optional { "?" } else { "" }
    );
    out
}

/// `declare const tools: {...}`: every tool of `defs` under its dotted
/// path, and `call` for any path.
pub fn declarations<'a>(defs: impl IntoIterator<Item = &'a ToolDef>) -> String {
    #[derive(Default)]
    struct Node<'a> {
        tools: Vec<&'a ToolDef>,
        children: std::collections::BTreeMap<&'a str, Node<'a>>,
    }
    fn write(node: &Node<'_>, depth: usize, out: &mut String) {
        let indent = "  ".repeat(depth);
        for def in &node.tools {
            out.push_str(&declaration(def, &indent));
        }
        for (name, child) in &node.children {
            let _ = writeln!(out, "{indent}{}: {{", property(name));
            write(child, depth + 1, out);
            let _ = writeln!(out, "{indent}}};");
        }
    }
    let mut root = Node::default();
    for def in defs {
        let mut node = &mut root;
        let mut parts: Vec<&str> = def.name.split('.').collect();
        parts.pop();
        for part in parts {
            node = node.children.entry(part).or_default();
        }
        node.tools.push(def);
    }
    let mut out = String::from(
        "/** The tools you may call, as `await tools.NAME(args)`. */\ndeclare const tools: {\n",
    );
    write(&root, 1, &mut out);
    out.push_str(
        "  /** Calls any tool by its full name. */\n  call(name: string, args?: object): Promise<unknown>;\n};\n",
    );
    out
}

fn comment(out: &mut String, indent: &str, text: &str) {
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    // A description must not end the comment it is written in.
    let text = text.replace("*/", "*\\/");
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() == 1 {
        let _ = writeln!(out, "{indent}/** {} */", lines[0]);
        return;
    }
    let _ = writeln!(out, "{indent}/**");
    for line in lines {
        let _ = writeln!(out, "{indent} * {line}");
    }
    let _ = writeln!(out, "{indent} */");
}

/// A property name as TypeScript takes it: bare when it is an identifier,
/// else quoted.
fn property(name: &str) -> String {
    let mut chars = name.chars();
    let ident = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if ident {
        name.to_string()
    } else {
        Value::String(name.to_string()).to_string()
    }
}

/// The TypeScript type of `schema`.
fn type_of(schema: &Value, depth: usize, indent: &str) -> String {
    if depth > MAX_DEPTH {
        return "unknown".into();
    }
    let Some(schema) = schema.as_object() else {
        // `true` (or a schema that is not an object): anything.
        return "unknown".into();
    };
    if let Some(value) = schema.get("const") {
        return value.to_string();
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array) {
        return union(values.iter().map(Value::to_string).collect());
    }
    for key in ["anyOf", "oneOf"] {
        if let Some(options) = schema.get(key).and_then(Value::as_array) {
            return union(
                options
                    .iter()
                    .map(|s| type_of(s, depth + 1, indent))
                    .collect(),
            );
        }
    }
    if let Some(parts) = schema.get("allOf").and_then(Value::as_array) {
        let parts: Vec<String> = parts
            .iter()
            .map(|s| type_of(s, depth + 1, indent))
            .collect();
        return if parts.is_empty() {
            "unknown".into()
        } else {
            parts.join(" & ")
        };
    }
    match schema.get("type") {
        Some(Value::String(t)) => of_type(t, schema, depth, indent),
        Some(Value::Array(types)) => union(
            types
                .iter()
                .filter_map(Value::as_str)
                .map(|t| of_type(t, schema, depth, indent))
                .collect(),
        ),
        _ if schema.contains_key("properties") => of_type("object", schema, depth, indent),
        _ => "unknown".into(),
    }
}

fn union(mut parts: Vec<String>) -> String {
    parts.dedup();
    match parts.len() {
        0 => "never".into(),
        1 => parts.remove(0),
        _ => parts.join(" | "),
    }
}

fn of_type(t: &str, schema: &Map<String, Value>, depth: usize, indent: &str) -> String {
    match t {
        "string" => "string".into(),
        "number" | "integer" => "number".into(),
        "boolean" => "boolean".into(),
        "null" => "null".into(),
        "array" => match schema.get("items") {
            Some(items) => {
                let item = type_of(items, depth + 1, indent);
                if item.contains(' ') {
                    format!("Array<{item}>")
                } else {
                    format!("{item}[]")
                }
            }
            None => "unknown[]".into(),
        },
        "object" => object(schema, depth, indent),
        _ => "unknown".into(),
    }
}

fn object(schema: &Map<String, Value>, depth: usize, indent: &str) -> String {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let properties = schema.get("properties").and_then(Value::as_object);
    let extra = match schema.get("additionalProperties") {
        Some(Value::Bool(false)) => None,
        Some(s @ Value::Object(_)) => Some(type_of(s, depth + 1, indent)),
        _ if properties.is_none_or(|p| p.is_empty()) => Some("unknown".into()),
        _ => None,
    };
    let inner = format!("{indent}  ");
    let mut out = String::from("{\n");
    for (name, prop) in properties.into_iter().flatten() {
        if let Some(description) = prop.get("description").and_then(Value::as_str) {
            comment(&mut out, &inner, description);
        }
        let _ = writeln!(
            out,
            "{inner}{}{}: {};",
            property(name),
            if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            },
            type_of(prop, depth + 1, &inner)
        );
    }
    if let Some(extra) = extra {
        let _ = writeln!(out, "{inner}[key: string]: {extra};");
    }
    out.push_str(indent);
    out.push('}');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(name: &str, input: Value, output: Option<Value>) -> ToolDef {
        ToolDef {
            name: name.into(),
            title: None,
            description: "Gets one invoice.\nBy id.".into(),
            input_schema: input,
            output_schema: output,
            annotations: None,
            meta: None,
        }
    }

    #[test]
    fn a_tool_is_a_method_with_its_arguments_and_answer() {
        let d = def(
            "billing.invoices.get",
            json!({"type": "object", "properties": {
                "id": {"type": "integer", "description": "The invoice"},
                "status": {"enum": ["open", "paid"]},
                "tags": {"type": "array", "items": {"type": "string"}},
                "two-words": {"type": ["string", "null"]}
            }, "required": ["id"], "additionalProperties": false}),
            Some(json!({"type": "object", "properties": {"total": {"type": "number"}}})),
        );
        let ts = declaration(&d, "");
        assert_eq!(
            ts,
            "/**\n * Gets one invoice.\n * By id.\n */\nget(args: {\n  /** The invoice */\n  id: number;\n  status?: \"open\" | \"paid\";\n  tags?: string[];\n  \"two-words\"?: string | null;\n}): Promise<{\n  total?: number;\n}>;\n"
        );
    }

    #[test]
    fn dotted_names_nest_and_no_schema_means_text() {
        let a = def("echo", json!({"type": "object"}), None);
        let b = def(
            "billing.invoices.get",
            json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            None,
        );
        let ts = declarations([&a, &b]);
        assert!(
            ts.contains("  echo(args?: {\n    [key: string]: unknown;\n  }): Promise<string>;\n"),
            "{ts}"
        );
        assert!(ts.contains("  billing: {\n    invoices: {\n"), "{ts}");
        assert!(
            ts.contains("      get(args: {\n        id: number;\n      }): Promise<string>;\n"),
            "{ts}"
        );
        assert!(ts.contains("call(name: string, args?: object): Promise<unknown>;"));
    }

    #[test]
    fn a_description_cannot_close_its_comment() {
        let mut d = def("x", json!({}), None);
        d.description = "evil */ declare const y: 1; /*".into();
        assert!(declaration(&d, "").starts_with("/** evil *\\/ declare const y: 1; /* */\n"));
    }

    #[test]
    fn deep_schemas_end_in_unknown() {
        let mut schema = json!({"type": "string"});
        for _ in 0..20 {
            schema = json!({"type": "array", "items": schema});
        }
        // Arrays down to MAX_DEPTH, then whatever is below them is unknown.
        let ts = type_of(&schema, 0, "");
        assert_eq!(ts, format!("unknown{}", "[]".repeat(MAX_DEPTH + 1)));
    }
}
