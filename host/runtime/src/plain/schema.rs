//! JSON Schemas derived from WIT types, and the signatures that describe a
//! function that carries no docs. The JSON shape of each type is the one
//! `convert.rs` reads and writes; the two files change together.

use serde_json::{Value, json};
use wasmtime::component::Type;

/// Which way a value travels: a `list<u8>` argument may also come as base64,
/// a `list<u8>` result always goes out as base64.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    In,
    Out,
}

/// Why a type cannot be carried as JSON (a resource handle, a stream…).
pub fn unsupported(ty: &Type) -> Option<&'static str> {
    match ty {
        Type::Own(_) | Type::Borrow(_) => Some("a resource"),
        Type::Future(_) => Some("a future"),
        Type::Stream(_) => Some("a stream"),
        Type::ErrorContext => Some("an error-context"),
        Type::Map(m) if m.key() != Type::String => Some("a map whose keys are not strings"),
        Type::Map(m) => unsupported(&m.value()),
        Type::List(l) => unsupported(&l.ty()),
        Type::FixedLengthList(l) => unsupported(&l.ty()),
        Type::Option(o) => unsupported(&o.ty()),
        Type::Record(r) => r.fields().find_map(|f| unsupported(&f.ty)),
        Type::Tuple(t) => t.types().find_map(|t| unsupported(&t)),
        Type::Variant(v) => v.cases().find_map(|c| c.ty.as_ref().and_then(unsupported)),
        Type::Result(r) => r
            .ok()
            .as_ref()
            .and_then(unsupported)
            .or_else(|| r.err().as_ref().and_then(unsupported)),
        _ => None,
    }
}

/// `option<T>`: a parameter or field of this type may be left out.
pub fn is_optional(ty: &Type) -> bool {
    matches!(ty, Type::Option(_))
}

/// The JSON Schema of values of `ty` (which [`unsupported`] accepted).
pub fn of(ty: &Type, way: Way) -> Value {
    match ty {
        Type::Bool => json!({"type": "boolean"}),
        Type::S8 => int(i8::MIN as i128, i8::MAX as i128),
        Type::U8 => int(0, u8::MAX as i128),
        Type::S16 => int(i16::MIN as i128, i16::MAX as i128),
        Type::U16 => int(0, u16::MAX as i128),
        Type::S32 => int(i32::MIN as i128, i32::MAX as i128),
        Type::U32 => int(0, u32::MAX as i128),
        Type::S64 => int(i64::MIN as i128, i64::MAX as i128),
        Type::U64 => int(0, u64::MAX as i128),
        Type::Float32 => json!({
            "type": "number",
            "minimum": -f64::from(f32::MAX),
            "maximum": f64::from(f32::MAX),
        }),
        Type::Float64 => json!({"type": "number"}),
        Type::Char => json!({"type": "string", "minLength": 1, "maxLength": 1}),
        Type::String => json!({"type": "string"}),
        Type::List(l) if l.ty() == Type::U8 => {
            let base64 = json!({"type": "string", "contentEncoding": "base64"});
            match way {
                Way::Out => base64,
                Way::In => {
                    json!({"anyOf": [{"type": "array", "items": of(&Type::U8, way)}, base64]})
                }
            }
        }
        Type::List(l) => json!({"type": "array", "items": of(&l.ty(), way)}),
        Type::FixedLengthList(l) => json!({
            "type": "array",
            "items": of(&l.ty(), way),
            "minItems": l.len(),
            "maxItems": l.len(),
        }),
        Type::Map(m) => json!({"type": "object", "additionalProperties": of(&m.value(), way)}),
        Type::Option(o) => json!({"anyOf": [of(&o.ty(), way), {"type": "null"}]}),
        Type::Tuple(t) => {
            let items: Vec<Value> = t.types().map(|t| of(&t, way)).collect();
            let n = items.len();
            json!({"type": "array", "prefixItems": items, "items": false, "minItems": n, "maxItems": n})
        }
        Type::Record(r) => object(r.fields().map(|f| (f.name.to_string(), f.ty)), way),
        Type::Variant(v) => {
            let cases: Vec<Value> = v
                .cases()
                .map(|c| match &c.ty {
                    Some(ty) => json!({
                        "type": "object",
                        "properties": {"tag": {"const": c.name}, "val": of(ty, way)},
                        "required": ["tag", "val"],
                        "additionalProperties": false,
                    }),
                    None => json!({
                        "type": "object",
                        "properties": {"tag": {"const": c.name}},
                        "required": ["tag"],
                        "additionalProperties": false,
                    }),
                })
                .collect();
            json!({"oneOf": cases})
        }
        Type::Enum(e) => json!({"type": "string", "enum": e.names().collect::<Vec<_>>()}),
        Type::Flags(f) => json!({
            "type": "array",
            "items": {"type": "string", "enum": f.names().collect::<Vec<_>>()},
            "uniqueItems": true,
        }),
        Type::Result(r) => {
            let side = |name: &str, ty: Option<Type>| {
                let inner = ty.map_or(json!({"type": "null"}), |t| of(&t, way));
                json!({
                    "type": "object",
                    "properties": {name: inner},
                    "required": [name],
                    "additionalProperties": false,
                })
            };
            json!({"oneOf": [side("ok", r.ok()), side("err", r.err())]})
        }
        // Refused by `unsupported` before any schema is asked for.
        Type::Own(_) | Type::Borrow(_) | Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
            json!({})
        }
    }
}

fn int(min: i128, max: i128) -> Value {
    // Through serde_json's number types, so that u64::MAX and i64::MIN stay exact.
    let num = |n: i128| -> Value {
        if n < 0 {
            Value::from(n as i64)
        } else {
            Value::from(n as u64)
        }
    };
    json!({"type": "integer", "minimum": num(min), "maximum": num(max)})
}

/// An object of named members (a record, or a function's parameters): every
/// member required but an `option`, nothing else allowed.
pub fn object(members: impl Iterator<Item = (String, Type)>, way: Way) -> Value {
    let mut properties = serde_json::Map::new();
    let mut required = Vec::new();
    for (name, ty) in members {
        if !is_optional(&ty) {
            required.push(Value::String(name.clone()));
        }
        properties.insert(name, of(&ty, way));
    }
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// The `outputSchema` of a function returning `ty` (the `ok` side of a
/// `result`): a record as itself, anything else under `result` (MCP's
/// structured content is an object).
pub fn output(ty: &Type) -> Value {
    match ty {
        Type::Record(_) => of(ty, Way::Out),
        _ => json!({
            "type": "object",
            "properties": {"result": of(ty, Way::Out)},
            "required": ["result"],
        }),
    }
}

/// A type as WIT spells it, for signatures: `list<option<u32>>`, or a named
/// type's kind (`record`, `variant`…) where the name is not known.
pub fn wit_name(ty: &Type) -> String {
    match ty {
        Type::Bool => "bool".into(),
        Type::S8 => "s8".into(),
        Type::U8 => "u8".into(),
        Type::S16 => "s16".into(),
        Type::U16 => "u16".into(),
        Type::S32 => "s32".into(),
        Type::U32 => "u32".into(),
        Type::S64 => "s64".into(),
        Type::U64 => "u64".into(),
        Type::Float32 => "f32".into(),
        Type::Float64 => "f64".into(),
        Type::Char => "char".into(),
        Type::String => "string".into(),
        Type::List(l) => format!("list<{}>", wit_name(&l.ty())),
        Type::FixedLengthList(l) => format!("list<{}, {}>", wit_name(&l.ty()), l.len()),
        Type::Map(m) => format!("map<{}, {}>", wit_name(&m.key()), wit_name(&m.value())),
        Type::Option(o) => format!("option<{}>", wit_name(&o.ty())),
        Type::Tuple(t) => {
            let parts: Vec<String> = t.types().map(|t| wit_name(&t)).collect();
            format!("tuple<{}>", parts.join(", "))
        }
        Type::Result(r) => match (r.ok(), r.err()) {
            (None, None) => "result".into(),
            (Some(ok), None) => format!("result<{}>", wit_name(&ok)),
            (None, Some(err)) => format!("result<_, {}>", wit_name(&err)),
            (Some(ok), Some(err)) => format!("result<{}, {}>", wit_name(&ok), wit_name(&err)),
        },
        Type::Record(r) => {
            let fields: Vec<String> = r
                .fields()
                .map(|f| format!("{}: {}", f.name, wit_name(&f.ty)))
                .collect();
            format!("record {{ {} }}", fields.join(", "))
        }
        Type::Variant(v) => {
            let cases: Vec<String> = v
                .cases()
                .map(|c| match &c.ty {
                    Some(t) => format!("{}({})", c.name, wit_name(t)),
                    None => c.name.to_string(),
                })
                .collect();
            format!("variant {{ {} }}", cases.join(", "))
        }
        Type::Enum(e) => format!("enum {{ {} }}", e.names().collect::<Vec<_>>().join(", ")),
        Type::Flags(f) => format!("flags {{ {} }}", f.names().collect::<Vec<_>>().join(", ")),
        Type::Own(_) => "own<resource>".into(),
        Type::Borrow(_) => "borrow<resource>".into(),
        Type::Future(_) => "future".into(),
        Type::Stream(_) => "stream".into(),
        Type::ErrorContext => "error-context".into(),
    }
}
