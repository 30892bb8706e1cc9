//! JSON ↔ component values, both ways, for the shapes `schema.rs` describes.
//! Arguments have already passed the derived schema (the validate stage), so
//! most refusals here are for what a schema cannot say (base64, a float that
//! JSON cannot carry); each names the path of the value it refuses.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Value};
use wasmtime::component::{Type, Val};

use crate::call::json_kind;

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

/// The value of type `ty` that `json` stands for (`None` for `option` means
/// absent or null).
pub fn to_val(json: &Value, ty: &Type, path: &Path) -> Result<Val, String> {
    let int = |min: i128, max: i128| -> Result<i128, String> {
        // JSON Schema counts `2.0` as an integer; so does this, while the
        // float is exact (a larger one, like -9223372036854775809 read as a
        // double, may stand for a neighbour).
        let whole = || {
            json.as_f64()
                .filter(|f| f.fract() == 0.0 && f.abs() <= 2f64.powi(53))
                .map(|f| f as i128)
        };
        let n = json
            .as_i64()
            .map(i128::from)
            .or_else(|| json.as_u64().map(i128::from))
            .or_else(whole)
            .ok_or_else(|| {
                bad(
                    path,
                    format!("expected an integer, got {}", json_kind(json)),
                )
            })?;
        if n < min || n > max {
            return Err(bad(path, format!("{n} is out of range {min}..={max}")));
        }
        Ok(n)
    };
    Ok(match ty {
        Type::Bool => Val::Bool(
            json.as_bool()
                .ok_or_else(|| bad(path, format!("expected a boolean, got {}", json_kind(json))))?,
        ),
        Type::S8 => Val::S8(int(i8::MIN.into(), i8::MAX.into())? as i8),
        Type::U8 => Val::U8(int(0, u8::MAX.into())? as u8),
        Type::S16 => Val::S16(int(i16::MIN.into(), i16::MAX.into())? as i16),
        Type::U16 => Val::U16(int(0, u16::MAX.into())? as u16),
        Type::S32 => Val::S32(int(i32::MIN.into(), i32::MAX.into())? as i32),
        Type::U32 => Val::U32(int(0, u32::MAX.into())? as u32),
        Type::S64 => Val::S64(int(i64::MIN.into(), i64::MAX.into())? as i64),
        Type::U64 => Val::U64(int(0, u64::MAX.into())? as u64),
        Type::Float32 => {
            let f = number(json, path)?;
            if f.abs() > f64::from(f32::MAX) {
                return Err(bad(path, format!("{f} is out of the range of f32")));
            }
            Val::Float32(f as f32)
        }
        Type::Float64 => Val::Float64(number(json, path)?),
        Type::Char => {
            let s = string(json, path)?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => Val::Char(c),
                _ => return Err(bad(path, "expected exactly one character")),
            }
        }
        Type::String => Val::String(string(json, path)?.to_string()),
        Type::List(l) if l.ty() == Type::U8 && json.is_string() => {
            let bytes = B64
                .decode(string(json, path)?)
                .map_err(|e| bad(path, format!("not base64: {e}")))?;
            Val::List(bytes.into_iter().map(Val::U8).collect())
        }
        Type::List(l) => Val::List(list(json, &l.ty(), path, None)?),
        Type::FixedLengthList(l) => {
            Val::FixedLengthList(list(json, &l.ty(), path, Some(l.len() as usize))?)
        }
        Type::Map(m) => {
            let obj = object(json, path)?;
            let value = m.value();
            let entries = obj
                .iter()
                .map(|(k, v)| Ok((Val::String(k.clone()), to_val(v, &value, &path.key(k))?)))
                .collect::<Result<_, String>>()?;
            Val::Map(entries)
        }
        Type::Option(o) => match json {
            Value::Null => Val::Option(None),
            v => Val::Option(Some(Box::new(to_val(v, &o.ty(), path)?))),
        },
        Type::Tuple(t) => {
            let items = array(json, path)?;
            if items.len() != t.types().len() {
                return Err(bad(
                    path,
                    format!("expected {} items, got {}", t.types().len(), items.len()),
                ));
            }
            let vals = t
                .types()
                .zip(items)
                .enumerate()
                .map(|(i, (ty, v))| to_val(v, &ty, &path.index(i)))
                .collect::<Result<_, String>>()?;
            Val::Tuple(vals)
        }
        Type::Record(r) => {
            let obj = object(json, path)?;
            let fields: Vec<_> = r.fields().map(|f| (f.name.to_string(), f.ty)).collect();
            Val::Record(members(obj, &fields, path)?)
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
            let payload = match (&case.ty, obj.get("val")) {
                (Some(ty), Some(val)) => Some(Box::new(to_val(val, ty, &path.key("val"))?)),
                (Some(_), None) => return Err(bad(path, format!("case {tag:?} needs a \"val\""))),
                (None, Some(_)) => return Err(bad(path, format!("case {tag:?} takes no \"val\""))),
                (None, None) => None,
            };
            Val::Variant(tag.to_string(), payload)
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
            Val::Enum(s.to_string())
        }
        Type::Flags(f) => {
            let mut set = Vec::new();
            for (i, item) in array(json, path)?.iter().enumerate() {
                let s = string(item, &path.index(i))?;
                if !f.names().any(|n| n == s) {
                    return Err(bad(&path.index(i), format!("unknown flag {s:?}")));
                }
                if !set.iter().any(|x| x == s) {
                    set.push(s.to_string());
                }
            }
            Val::Flags(set)
        }
        Type::Result(r) => {
            let obj = object(json, path)?;
            let side = |name: &str, ty: Option<Type>| -> Result<Option<Box<Val>>, String> {
                let v = &obj[name];
                match ty {
                    Some(ty) => Ok(Some(Box::new(to_val(v, &ty, &path.key(name))?))),
                    None => Ok(None),
                }
            };
            match (obj.contains_key("ok"), obj.contains_key("err"), obj.len()) {
                (true, false, 1) => Val::Result(Ok(side("ok", r.ok())?)),
                (false, true, 1) => Val::Result(Err(side("err", r.err())?)),
                _ => return Err(bad(path, "expected {\"ok\": …} or {\"err\": …}")),
            }
        }
        Type::Own(_) | Type::Borrow(_) | Type::Future(_) | Type::Stream(_) | Type::ErrorContext => {
            return Err(bad(path, "this type cannot come from JSON"));
        }
    })
}

/// A function's arguments, in parameter order, from the call's JSON object.
pub fn arguments(args: &Value, params: &[(String, Type)]) -> Result<Vec<Val>, String> {
    let empty = Map::new();
    let obj = match args {
        Value::Null => &empty,
        Value::Object(obj) => obj,
        other => return Err(format!("/: expected an object, got {}", json_kind(other))),
    };
    Ok(members(obj, params, &Path::root())?
        .into_iter()
        .map(|(_, v)| v)
        .collect())
}

/// The named members of a record or an argument list; an `option` member may
/// be left out, other members not, and no other key may be there.
fn members(
    obj: &Map<String, Value>,
    members: &[(String, Type)],
    path: &Path,
) -> Result<Vec<(String, Val)>, String> {
    if let Some(extra) = obj.keys().find(|k| !members.iter().any(|(n, _)| n == *k)) {
        return Err(bad(&path.key(extra), "no such field"));
    }
    members
        .iter()
        .map(|(name, ty)| {
            let at = path.key(name);
            let val = match (obj.get(name), ty) {
                (Some(v), ty) => to_val(v, ty, &at)?,
                (None, Type::Option(_)) => Val::Option(None),
                (None, _) => return Err(bad(&at, "missing")),
            };
            Ok((name.clone(), val))
        })
        .collect()
}

fn list(json: &Value, ty: &Type, path: &Path, len: Option<usize>) -> Result<Vec<Val>, String> {
    let items = array(json, path)?;
    if let Some(n) = len
        && items.len() != n
    {
        return Err(bad(
            path,
            format!("expected {n} items, got {}", items.len()),
        ));
    }
    items
        .iter()
        .enumerate()
        .map(|(i, v)| to_val(v, ty, &path.index(i)))
        .collect()
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

/// The JSON of a value of type `ty` the guest returned. Fails only for what
/// JSON cannot carry: a float that is not finite, a handle.
pub fn to_json(val: &Val, ty: &Type, path: &Path) -> Result<Value, String> {
    let float = |f: f64| {
        serde_json::Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| bad(path, format!("{f} is not a number JSON can carry")))
    };
    let each = |items: &[Val], ty: &Type| -> Result<Value, String> {
        let items = items
            .iter()
            .enumerate()
            .map(|(i, v)| to_json(v, ty, &path.index(i)))
            .collect::<Result<_, _>>()?;
        Ok(Value::Array(items))
    };
    Ok(match (val, ty) {
        (Val::Bool(b), _) => Value::Bool(*b),
        (Val::S8(n), _) => (*n).into(),
        (Val::U8(n), _) => (*n).into(),
        (Val::S16(n), _) => (*n).into(),
        (Val::U16(n), _) => (*n).into(),
        (Val::S32(n), _) => (*n).into(),
        (Val::U32(n), _) => (*n).into(),
        (Val::S64(n), _) => (*n).into(),
        (Val::U64(n), _) => (*n).into(),
        (Val::Float32(f), _) => float(f64::from(*f))?,
        (Val::Float64(f), _) => float(*f)?,
        (Val::Char(c), _) => Value::String(c.to_string()),
        (Val::String(s), _) => Value::String(s.clone()),
        (Val::List(items), Type::List(l)) if l.ty() == Type::U8 => {
            let bytes: Vec<u8> = items
                .iter()
                .filter_map(|v| if let Val::U8(b) = v { Some(*b) } else { None })
                .collect();
            Value::String(B64.encode(bytes))
        }
        (Val::List(items), Type::List(l)) => each(items, &l.ty())?,
        (Val::FixedLengthList(items), Type::FixedLengthList(l)) => each(items, &l.ty())?,
        (Val::Tuple(items), Type::Tuple(t)) => Value::Array(
            items
                .iter()
                .zip(t.types())
                .enumerate()
                .map(|(i, (v, ty))| to_json(v, &ty, &path.index(i)))
                .collect::<Result<_, _>>()?,
        ),
        (Val::Map(entries), Type::Map(m)) => {
            let value_ty = m.value();
            let mut obj = Map::new();
            for (k, v) in entries {
                let Val::String(key) = k else {
                    return Err(bad(path, "a map key that is not a string"));
                };
                let value = to_json(v, &value_ty, &path.key(key))?;
                obj.insert(key.clone(), value);
            }
            Value::Object(obj)
        }
        (Val::Record(fields), Type::Record(r)) => {
            let mut obj = Map::new();
            for ((name, v), field) in fields.iter().zip(r.fields()) {
                obj.insert(name.clone(), to_json(v, &field.ty, &path.key(name))?);
            }
            Value::Object(obj)
        }
        (Val::Variant(tag, payload), Type::Variant(variant)) => {
            let mut obj = Map::new();
            obj.insert("tag".into(), Value::String(tag.clone()));
            let case_ty = variant.cases().find(|c| c.name == tag).and_then(|c| c.ty);
            if let (Some(v), Some(ty)) = (payload, case_ty) {
                obj.insert("val".into(), to_json(v, &ty, &path.key("val"))?);
            }
            Value::Object(obj)
        }
        (Val::Enum(name), _) => Value::String(name.clone()),
        (Val::Option(None), _) => Value::Null,
        (Val::Option(Some(v)), Type::Option(o)) => to_json(v, &o.ty(), path)?,
        (Val::Result(r), Type::Result(rt)) => {
            let (name, v, side) = match r {
                Ok(v) => ("ok", v, rt.ok()),
                Err(v) => ("err", v, rt.err()),
            };
            let inner = match (v, side) {
                (Some(v), Some(ty)) => to_json(v, &ty, &path.key(name))?,
                _ => Value::Null,
            };
            let mut obj = Map::new();
            obj.insert(name.into(), inner);
            Value::Object(obj)
        }
        (Val::Flags(names), _) => Value::Array(names.iter().cloned().map(Value::String).collect()),
        _ => return Err(bad(path, "a value JSON cannot carry")),
    })
}
