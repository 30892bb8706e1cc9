//! The check of a call's JSON arguments against a plain component's
//! parameter types, for the shapes `schema.rs` describes, before any guest
//! is entered: `abi/` then lowers them into the guest as they are.
//! Arguments have already passed the derived schema (the validate stage), so
//! most refusals here are for what a schema cannot say (base64, a float that
//! JSON cannot carry); each names the path of the value it refuses.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value};
use wasmtime::component::Type;

use hangar_core::call::json_kind;

/// Where in the arguments or the result a value sits: `/city`, `/items/2/tag`.
#[derive(Clone, Default)]
pub struct Path(String);

impl Path {
    fn key(&self, key: &str) -> Path {
        Path(format!("{}/{key}", self.0))
    }
    fn index(&self, i: usize) -> Path {
        Path(format!("{}/{i}", self.0))
    }
    pub fn root() -> Path {
        Path::default()
    }
    pub fn shown(&self) -> &str {
        if self.0.is_empty() { "/" } else { &self.0 }
    }
}

fn bad(path: &Path, what: impl std::fmt::Display) -> String {
    format!("{}: {what}", path.shown())
}

/// An integer as JSON Schema counts one: `2.0` is one, while the float is
/// exact (a larger one, like -9223372036854775809 read as a double, may
/// stand for a neighbour).
pub fn integer(json: &Value) -> Option<i128> {
    let whole = || {
        json.as_f64()
            .filter(|f| f.fract() == 0.0 && f.abs() <= 2f64.powi(53))
            .map(|f| f as i128)
    };
    json.as_i64()
        .map(i128::from)
        .or_else(|| json.as_u64().map(i128::from))
        .or_else(whole)
}

/// Checks that `json` stands for a value of type `ty` (`None` for `option`
/// means absent or null), naming the path of what it refuses.
pub fn check(json: &Value, ty: &Type, path: &Path) -> Result<(), String> {
    let int = |min: i128, max: i128| -> Result<(), String> {
        let n = integer(json).ok_or_else(|| {
            bad(
                path,
                format!("expected an integer, got {}", json_kind(json)),
            )
        })?;
        if n < min || n > max {
            return Err(bad(path, format!("{n} is out of range {min}..={max}")));
        }
        Ok(())
    };
    match ty {
        Type::Bool => {
            json.as_bool()
                .ok_or_else(|| bad(path, format!("expected a boolean, got {}", json_kind(json))))?;
        }
        Type::S8 => int(i8::MIN.into(), i8::MAX.into())?,
        Type::U8 => int(0, u8::MAX.into())?,
        Type::S16 => int(i16::MIN.into(), i16::MAX.into())?,
        Type::U16 => int(0, u16::MAX.into())?,
        Type::S32 => int(i32::MIN.into(), i32::MAX.into())?,
        Type::U32 => int(0, u32::MAX.into())?,
        Type::S64 => int(i64::MIN.into(), i64::MAX.into())?,
        Type::U64 => int(0, u64::MAX.into())?,
        Type::Float32 => {
            let f = number(json, path)?;
            if f.abs() > f64::from(f32::MAX) {
                return Err(bad(path, format!("{f} is out of the range of f32")));
            }
        }
        Type::Float64 => {
            number(json, path)?;
        }
        Type::Char => {
            let s = string(json, path)?;
            let mut chars = s.chars();
            if !matches!((chars.next(), chars.next()), (Some(_), None)) {
                return Err(bad(path, "expected exactly one character"));
            }
        }
        Type::String => {
            string(json, path)?;
        }
        Type::List(l) if l.ty() == Type::U8 && json.is_string() => {
            base64_ok(string(json, path)?).map_err(|e| bad(path, format!("not base64: {e}")))?;
        }
        Type::List(l) => list(json, &l.ty(), path, None)?,
        Type::FixedLengthList(l) => list(json, &l.ty(), path, Some(l.len() as usize))?,
        Type::Map(m) => {
            let obj = object(json, path)?;
            let value = m.value();
            for (k, v) in obj {
                check(v, &value, &path.key(k))?;
            }
        }
        Type::Option(o) => {
            if !json.is_null() {
                check(json, &o.ty(), path)?;
            }
        }
        Type::Tuple(t) => {
            let items = array(json, path)?;
            if items.len() != t.types().len() {
                return Err(bad(
                    path,
                    format!("expected {} items, got {}", t.types().len(), items.len()),
                ));
            }
            for (i, (ty, v)) in t.types().zip(items).enumerate() {
                check(v, &ty, &path.index(i))?;
            }
        }
        Type::Record(r) => {
            let obj = object(json, path)?;
            let fields: Vec<_> = r.fields().map(|f| (f.name.to_string(), f.ty)).collect();
            members(obj, &fields, path)?;
        }
        Type::Variant(v) => {
            let obj = object(json, path)?;
            let tag = obj
                .get("tag")
                .and_then(Value::as_str)
                .ok_or_else(|| bad(path, "expected an object with a string \"tag\""))?;
            let case = v.cases().find(|c| c.name == tag).ok_or_else(|| {
                let names: Vec<&str> = v.cases().map(|c| c.name).collect();
                bad(
                    path,
                    format!("unknown tag {tag:?} (one of {})", names.join(", ")),
                )
            })?;
            match (&case.ty, obj.get("val")) {
                (Some(ty), Some(val)) => check(val, ty, &path.key("val"))?,
                (Some(_), None) => return Err(bad(path, format!("case {tag:?} needs a \"val\""))),
                (None, Some(_)) => return Err(bad(path, format!("case {tag:?} takes no \"val\""))),
                (None, None) => {}
            }
        }
        Type::Enum(e) => {
            let s = string(json, path)?;
            if !e.names().any(|n| n == s) {
                let names: Vec<&str> = e.names().collect();
                return Err(bad(
                    path,
                    format!("{s:?} is not one of {}", names.join(", ")),
                ));
            }
        }
        Type::Flags(f) => {
            for (i, item) in array(json, path)?.iter().enumerate() {
                let s = string(item, &path.index(i))?;
                if !f.names().any(|n| n == s) {
                    return Err(bad(&path.index(i), format!("unknown flag {s:?}")));
                }
            }
        }
        Type::Result(r) => {
            let obj = object(json, path)?;
            let side = |name: &str, ty: Option<Type>| -> Result<(), String> {
                match ty {
                    Some(ty) => check(&obj[name], &ty, &path.key(name)),
                    None => Ok(()),
                }
            };
            match (obj.contains_key("ok"), obj.contains_key("err"), obj.len()) {
                (true, false, 1) => side("ok", r.ok())?,
                (false, true, 1) => side("err", r.err())?,
                _ => return Err(bad(path, "expected {\"ok\": …} or {\"err\": …}")),
            }
        }
        Type::Own(_) | Type::Borrow(_) | Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
            return Err(bad(path, "this type cannot come from JSON"));
        }
    }
    Ok(())
}

/// Whether `text` is base64 the lowering can decode, checked a slice at a
/// time so that no copy of the bytes is made. Padding may only end it.
fn base64_ok(text: &str) -> Result<(), base64::DecodeError> {
    const CHUNK: usize = 4096;
    let mut buf = [0u8; CHUNK / 4 * 3];
    let bytes = text.as_bytes();
    let chunks = bytes.len().div_ceil(CHUNK);
    for (i, chunk) in bytes.chunks(CHUNK).enumerate() {
        let last = i + 1 == chunks;
        let bad_padding = !last && chunk.contains(&b'=');
        match B64.decode_slice(chunk, &mut buf) {
            Ok(_) if !bad_padding => {}
            // The whole text again, for the decoder's own message with its
            // offset (a refusal only).
            _ => return B64.decode(bytes).map(drop),
        }
    }
    Ok(())
}

/// Checks a call's JSON object against a function's parameters.
pub fn arguments(args: &Value, params: &[(String, Type)]) -> Result<(), String> {
    let empty = Map::new();
    let obj = match args {
        Value::Null => &empty,
        Value::Object(obj) => obj,
        other => return Err(format!("/: expected an object, got {}", json_kind(other))),
    };
    members(obj, params, &Path::root())
}

/// The named members of a record or an argument list; an `option` member may
/// be left out, other members not, and no other key may be there.
fn members(
    obj: &Map<String, Value>,
    members: &[(String, Type)],
    path: &Path,
) -> Result<(), String> {
    if let Some(extra) = obj.keys().find(|k| !members.iter().any(|(n, _)| n == *k)) {
        return Err(bad(&path.key(extra), "no such field"));
    }
    for (name, ty) in members {
        let at = path.key(name);
        match (obj.get(name), ty) {
            (Some(v), ty) => check(v, ty, &at)?,
            (None, Type::Option(_)) => {}
            (None, _) => return Err(bad(&at, "missing")),
        }
    }
    Ok(())
}

fn list(json: &Value, ty: &Type, path: &Path, len: Option<usize>) -> Result<(), String> {
    let items = array(json, path)?;
    if let Some(n) = len
        && items.len() != n
    {
        return Err(bad(
            path,
            format!("expected {n} items, got {}", items.len()),
        ));
    }
    for (i, v) in items.iter().enumerate() {
        check(v, ty, &path.index(i))?;
    }
    Ok(())
}

fn number(json: &Value, path: &Path) -> Result<f64, String> {
    json.as_f64()
        .ok_or_else(|| bad(path, format!("expected a number, got {}", json_kind(json))))
}

fn string<'a>(json: &'a Value, path: &Path) -> Result<&'a str, String> {
    json.as_str()
        .ok_or_else(|| bad(path, format!("expected a string, got {}", json_kind(json))))
}

fn array<'a>(json: &'a Value, path: &Path) -> Result<&'a Vec<Value>, String> {
    json.as_array()
        .ok_or_else(|| bad(path, format!("expected an array, got {}", json_kind(json))))
}

fn object<'a>(json: &'a Value, path: &Path) -> Result<&'a Map<String, Value>, String> {
    json.as_object()
        .ok_or_else(|| bad(path, format!("expected an object, got {}", json_kind(json))))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_checked_a_slice_at_a_time_as_the_whole_would_be() {
        // Past one 4096-character slice, valid: padded and not.
        let long = B64.encode(vec![7u8; 5000]);
        assert!(long.len() > 4096 && base64_ok(&long).is_ok());
        assert!(base64_ok(&B64.encode(vec![7u8; 5001])).is_ok());
        assert!(base64_ok("").is_ok());
        // A bad character in a later slice.
        let mut bad = long.clone();
        bad.replace_range(4500..4501, "!");
        assert!(base64_ok(&bad).is_err());
        // Padding that ends one slice and is followed by more: refused, as
        // the whole text is.
        let head = B64.encode(vec![1u8; 3070]);
        assert_eq!(head.len(), 4096);
        let glued = format!("{}{}", &head[..4092], "AA==") + &B64.encode([2u8; 3]);
        assert!(B64.decode(&glued).is_err());
        assert!(base64_ok(&glued).is_err());
        // Unpadded is refused, as before.
        assert!(base64_ok("AAE").is_err());
    }

    #[test]
    fn integers_as_json_schema_counts_them() {
        assert_eq!(integer(&serde_json::json!(2.0)), Some(2));
        assert_eq!(integer(&serde_json::json!(2.5)), None);
        assert_eq!(integer(&serde_json::json!(u64::MAX)), Some(u64::MAX.into()));
        assert_eq!(integer(&serde_json::json!(-3)), Some(-3));
    }
}
