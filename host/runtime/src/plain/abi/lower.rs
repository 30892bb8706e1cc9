//! Lowering: a call's (already checked) JSON written into guest memory, or
//! into the flat core values a function takes, by walking the parameter's
//! real type. Strings and byte lists go in bulk into allocations the guest
//! makes (base64 decoded straight into them), so nothing but the JSON is
//! held on the host. `Args` (in `mod.rs`) calls [`lower_flat`] for
//! parameters passed flat and [`store`] for those passed in memory.

use std::mem::MaybeUninit;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::Value;
use wasmtime::component::__internal::{
    CanonicalAbiInfo, ComponentTypes, InterfaceType, LowerContext,
};
use wasmtime::component::Lower;
use wasmtime::{Result, ValRaw, bail, format_err};

use super::super::convert;
use super::layout::{discriminant_size, payload_offset};

/// The value `json` stands for (`None`: an `option` left out), stored at
/// `offset` of guest memory as a `ty`.
pub(super) fn store<T>(
    cx: &mut LowerContext<'_, T>,
    json: Option<&Value>,
    ty: InterfaceType,
    offset: usize,
) -> Result<()> {
    let types = cx.types;
    let Some(json) = json.filter(|j| !j.is_null()) else {
        // Absent or null: only an option's `none`.
        return match ty {
            InterfaceType::Option(_) => put(cx, offset, &[0]),
            _ => bail!("a value is missing"),
        };
    };
    match ty {
        InterfaceType::String => {
            let s = json
                .as_str()
                .ok_or_else(|| format_err!("expected a string"))?;
            s.linear_lower_to_memory(cx, ty, offset)
        }
        InterfaceType::List(_) | InterfaceType::Map(_) => {
            let (ptr, len) = list_contents(cx, json, ty)?;
            put(cx, offset, &(ptr as u32).to_le_bytes())?;
            put(cx, offset + 4, &(len as u32).to_le_bytes())
        }
        InterfaceType::Record(r) => {
            let obj = json
                .as_object()
                .ok_or_else(|| format_err!("expected an object"))?;
            let mut at = offset;
            for field in types[r].fields.iter() {
                let field_at = types.canonical_abi(&field.ty).next_field32_size(&mut at);
                store(cx, obj.get(&field.name), field.ty, field_at)?;
            }
            Ok(())
        }
        InterfaceType::Tuple(t) => {
            let items = array(json)?;
            let mut at = offset;
            for (i, ty) in types[t].types.iter().enumerate() {
                let item_at = types.canonical_abi(ty).next_field32_size(&mut at);
                store(cx, items.get(i), *ty, item_at)?;
            }
            Ok(())
        }
        InterfaceType::FixedLengthList(l) => {
            let elem = types[l].element;
            let size = types.canonical_abi(&elem).size32 as usize;
            for (i, item) in array(json)?.iter().enumerate() {
                store(cx, Some(item), elem, offset + i * size)?;
            }
            Ok(())
        }
        InterfaceType::Variant(_)
        | InterfaceType::Enum(_)
        | InterfaceType::Option(_)
        | InterfaceType::Result(_) => {
            let (case, cases, payload) = case_of(types, json, ty)?;
            put(cx, offset, &case.to_le_bytes()[..discriminant_size(cases)])?;
            if let Some((val, pty)) = payload {
                let at = offset + payload_offset(types, ty) as usize;
                store(cx, val, pty, at)?;
            }
            Ok(())
        }
        InterfaceType::Flags(f) => {
            let names = &types[f].names;
            let words = flag_words(json, names.len(), |n| names.get_index_of(n))?;
            match types[f].names.len() {
                0..=8 => put(cx, offset, &[words[0] as u8]),
                9..=16 => put(cx, offset, &(words[0] as u16).to_le_bytes()),
                _ => {
                    for (i, w) in words.iter().enumerate() {
                        put(cx, offset + 4 * i, &w.to_le_bytes())?;
                    }
                    Ok(())
                }
            }
        }
        scalar => {
            let (bits, size) = scalar_bits(json, scalar)?;
            put(cx, offset, &bits.to_le_bytes()[..size])
        }
    }
}

/// The value `json` stands for as core values, appended to `out`.
pub(super) fn lower_flat<T>(
    cx: &mut LowerContext<'_, T>,
    json: Option<&Value>,
    ty: InterfaceType,
    out: &mut Vec<ValRaw>,
) -> Result<()> {
    let types = cx.types;
    let json = json.filter(|j| !j.is_null());
    match (json, ty) {
        (None, InterfaceType::Option(_)) => {
            out.push(ValRaw::u32(0));
            pad(types, ty, out, 1);
            Ok(())
        }
        (None, _) => bail!("a value is missing"),
        (Some(json), InterfaceType::String) => {
            let s = json
                .as_str()
                .ok_or_else(|| format_err!("expected a string"))?;
            let mut pair = MaybeUninit::<[ValRaw; 2]>::uninit();
            s.linear_lower_to_flat(cx, ty, &mut pair)?;
            // SAFETY: `linear_lower_to_flat` initialises both values when it
            // returns `Ok`.
            out.extend(unsafe { pair.assume_init() });
            Ok(())
        }
        (Some(json), InterfaceType::List(_) | InterfaceType::Map(_)) => {
            let (ptr, len) = list_contents(cx, json, ty)?;
            out.push(ValRaw::u32(ptr as u32));
            out.push(ValRaw::u32(len as u32));
            Ok(())
        }
        (Some(json), InterfaceType::Record(r)) => {
            let obj = json
                .as_object()
                .ok_or_else(|| format_err!("expected an object"))?;
            for field in types[r].fields.iter() {
                lower_flat(cx, obj.get(&field.name), field.ty, out)?;
            }
            Ok(())
        }
        (Some(json), InterfaceType::Tuple(t)) => {
            let items = array(json)?;
            for (i, ty) in types[t].types.iter().enumerate() {
                lower_flat(cx, items.get(i), *ty, out)?;
            }
            Ok(())
        }
        (Some(json), InterfaceType::FixedLengthList(l)) => {
            let elem = types[l].element;
            for item in array(json)? {
                lower_flat(cx, Some(item), elem, out)?;
            }
            Ok(())
        }
        (
            Some(json),
            InterfaceType::Variant(_)
            | InterfaceType::Enum(_)
            | InterfaceType::Option(_)
            | InterfaceType::Result(_),
        ) => {
            let (case, _, payload) = case_of(types, json, ty)?;
            let start = out.len();
            out.push(ValRaw::u32(case));
            if let Some((val, pty)) = payload {
                // Each case's values go into the slots all cases share; a
                // `ValRaw` holds any of them zero-extended to 64 bits, which
                // is what the joined slot type reads (the canonical ABI's
                // `join`).
                lower_flat(cx, val, pty, out)?;
            }
            pad(types, ty, out, out.len() - start);
            Ok(())
        }
        (Some(json), InterfaceType::Flags(f)) => {
            let names = &types[f].names;
            let words = flag_words(json, names.len(), |n| names.get_index_of(n))?;
            out.extend(words.into_iter().map(ValRaw::u32));
            Ok(())
        }
        (Some(json), scalar) => {
            let (bits, _) = scalar_bits(json, scalar)?;
            out.push(match scalar {
                InterfaceType::S64 | InterfaceType::U64 => ValRaw::u64(bits),
                InterfaceType::Float32 => ValRaw::f32(bits as u32),
                InterfaceType::Float64 => ValRaw::f64(bits),
                InterfaceType::S8 | InterfaceType::S16 | InterfaceType::S32 => {
                    // Sign-extended to 32 bits, as the ABI passes them.
                    let v = match scalar {
                        InterfaceType::S8 => i32::from(bits as u8 as i8),
                        InterfaceType::S16 => i32::from(bits as u16 as i16),
                        _ => bits as u32 as i32,
                    };
                    ValRaw::i32(v)
                }
                _ => ValRaw::u32(bits as u32),
            });
            Ok(())
        }
    }
}

/// Zeroes the rest of a variant's flat slots after `used` of them.
fn pad(types: &ComponentTypes, ty: InterfaceType, out: &mut Vec<ValRaw>, used: usize) {
    let all = types
        .canonical_abi(&ty)
        .flat_count(usize::MAX)
        .unwrap_or(used);
    for _ in used..all {
        out.push(ValRaw::u64(0));
    }
}

/// Copies a list's (or a map's) elements into memory the guest allocates:
/// its address and length. A `list<u8>` is base64 decoded straight into it.
fn list_contents<T>(
    cx: &mut LowerContext<'_, T>,
    json: &Value,
    ty: InterfaceType,
) -> Result<(usize, usize)> {
    let types = cx.types;
    match ty {
        InterfaceType::List(l) if types[l].element == InterfaceType::U8 => {
            bytes_into_guest(cx, json)
        }
        InterfaceType::List(l) => {
            let elem = types[l].element;
            let items = array(json)?;
            let abi = types.canonical_abi(&elem);
            let ptr = allocate(cx, abi, items.len())?;
            for (i, item) in items.iter().enumerate() {
                store(cx, Some(item), elem, ptr + i * abi.size32 as usize)?;
            }
            Ok((ptr, items.len()))
        }
        InterfaceType::Map(m) => {
            // Keys are strings (the schema's `object`).
            let obj = json
                .as_object()
                .ok_or_else(|| format_err!("expected an object"))?;
            let map = &types[m];
            if map.key != InterfaceType::String {
                bail!("a map whose keys are not strings");
            }
            let ptr = allocate(cx, &map.entry_abi, obj.len())?;
            for (i, (key, value)) in obj.iter().enumerate() {
                let at = ptr + i * map.entry_abi.size32 as usize;
                key.as_str().linear_lower_to_memory(cx, map.key, at)?;
                store(cx, Some(value), map.value, at + map.value_offset32 as usize)?;
            }
            Ok((ptr, obj.len()))
        }
        _ => bail!("not a list"),
    }
}

/// A guest allocation for `len` elements of `abi`.
fn allocate<T>(cx: &mut LowerContext<'_, T>, abi: &CanonicalAbiInfo, len: usize) -> Result<usize> {
    let size = len
        .checked_mul(abi.size32 as usize)
        .ok_or_else(|| format_err!("list too large"))?;
    cx.realloc(0, 0, abi.align32, size)
}

/// A `list<u8>`'s bytes, from base64 or an array of numbers, written into a
/// guest allocation: no host copy of the bytes is made.
fn bytes_into_guest<T>(cx: &mut LowerContext<'_, T>, json: &Value) -> Result<(usize, usize)> {
    match json {
        Value::String(text) => {
            let room = base64::decoded_len_estimate(text.len());
            let ptr = cx.realloc(0, 0, 1, room)?;
            let dst = cx
                .as_slice_mut()
                .get_mut(ptr..ptr + room)
                .ok_or_else(|| format_err!("guest allocation out of bounds"))?;
            let len = B64
                .decode_slice(text, dst)
                .map_err(|e| format_err!("not base64: {e}"))?;
            let ptr = if len < room {
                cx.realloc(ptr, room, 1, len)?
            } else {
                ptr
            };
            Ok((ptr, len))
        }
        Value::Array(items) => {
            let ptr = cx.realloc(0, 0, 1, items.len())?;
            for (i, item) in items.iter().enumerate() {
                let (b, _) = scalar_bits(item, InterfaceType::U8)?;
                put(cx, ptr + i, &[b as u8])?;
            }
            Ok((ptr, items.len()))
        }
        _ => bail!("expected base64 or an array of bytes"),
    }
}

/// Writes `bytes` at `offset` of guest memory.
fn put<T>(cx: &mut LowerContext<'_, T>, offset: usize, bytes: &[u8]) -> Result<()> {
    cx.as_slice_mut()
        .get_mut(offset..offset + bytes.len())
        .ok_or_else(|| format_err!("guest memory out of bounds at {offset}"))?
        .copy_from_slice(bytes);
    Ok(())
}

/// A scalar as little-endian bits, and its size in memory.
fn scalar_bits(json: &Value, ty: InterfaceType) -> Result<(u64, usize)> {
    let int = |min: i128, max: i128| -> Result<u64> {
        match convert::integer(json) {
            Some(n) if n >= min && n <= max => Ok(n as u64),
            _ => bail!("expected an integer in {min}..={max}"),
        }
    };
    let float = || {
        json.as_f64()
            .ok_or_else(|| format_err!("expected a number"))
    };
    Ok(match ty {
        InterfaceType::Bool => (
            u64::from(
                json.as_bool()
                    .ok_or_else(|| format_err!("expected a boolean"))?,
            ),
            1,
        ),
        InterfaceType::U8 => (int(0, u8::MAX.into())?, 1),
        InterfaceType::S8 => (int(i8::MIN.into(), i8::MAX.into())?, 1),
        InterfaceType::U16 => (int(0, u16::MAX.into())?, 2),
        InterfaceType::S16 => (int(i16::MIN.into(), i16::MAX.into())?, 2),
        InterfaceType::U32 => (int(0, u32::MAX.into())?, 4),
        InterfaceType::S32 => (int(i32::MIN.into(), i32::MAX.into())?, 4),
        InterfaceType::U64 => (int(0, u64::MAX.into())?, 8),
        InterfaceType::S64 => (int(i64::MIN.into(), i64::MAX.into())?, 8),
        InterfaceType::Float32 => (u64::from((float()? as f32).to_bits()), 4),
        InterfaceType::Float64 => (float()?.to_bits(), 8),
        InterfaceType::Char => {
            let s = json
                .as_str()
                .ok_or_else(|| format_err!("expected a string"))?;
            let mut chars = s.chars();
            match (chars.next(), chars.next()) {
                (Some(c), None) => (u64::from(u32::from(c)), 4),
                _ => bail!("expected exactly one character"),
            }
        }
        _ => bail!("this type cannot come from JSON"),
    })
}

/// A case's payload: its JSON (`None`: an `option` left out) and its type.
type Payload<'v> = Option<(Option<&'v Value>, InterfaceType)>;

/// A variant-like value's case (its index), how many cases its type has,
/// and its payload with the payload's type, if the case has one.
fn case_of<'v>(
    types: &ComponentTypes,
    json: &'v Value,
    ty: InterfaceType,
) -> Result<(u32, usize, Payload<'v>)> {
    Ok(match ty {
        InterfaceType::Option(o) => (1, 2, Some((Some(json), types[o].ty))),
        InterfaceType::Enum(e) => {
            let name = json
                .as_str()
                .ok_or_else(|| format_err!("expected a string"))?;
            let names = &types[e].names;
            let i = names
                .get_index_of(name)
                .ok_or_else(|| format_err!("no case {name:?}"))?;
            (i as u32, names.len(), None)
        }
        InterfaceType::Variant(v) => {
            let obj = json
                .as_object()
                .ok_or_else(|| format_err!("expected an object"))?;
            let tag = obj
                .get("tag")
                .and_then(Value::as_str)
                .ok_or_else(|| format_err!("expected a \"tag\""))?;
            let cases = &types[v].cases;
            let (i, _, case_ty) = cases
                .get_full(tag)
                .ok_or_else(|| format_err!("no case {tag:?}"))?;
            let payload = case_ty.map(|pty| (obj.get("val"), pty));
            (i as u32, cases.len(), payload)
        }
        InterfaceType::Result(r) => {
            let obj = json
                .as_object()
                .ok_or_else(|| format_err!("expected an object"))?;
            let (i, side, side_ty) = match (obj.get("ok"), obj.get("err")) {
                (Some(v), None) => (0, v, types[r].ok),
                (None, Some(v)) => (1, v, types[r].err),
                _ => bail!("expected {{\"ok\": …}} or {{\"err\": …}}"),
            };
            (i, 2, side_ty.map(|pty| (Some(side), pty)))
        }
        _ => bail!("not a variant"),
    })
}

/// The flags named in `json` as 32-bit words (flag `i` at bit `i % 32` of
/// word `i / 32`), of a type with `count` flags that `index_of` finds by name.
fn flag_words(
    json: &Value,
    count: usize,
    index_of: impl Fn(&str) -> Option<usize>,
) -> Result<Vec<u32>> {
    let mut words = vec![0u32; count.div_ceil(32).max(1)];
    for item in array(json)? {
        let name = item
            .as_str()
            .ok_or_else(|| format_err!("expected a string"))?;
        let i = index_of(name).ok_or_else(|| format_err!("unknown flag {name:?}"))?;
        words[i / 32] |= 1 << (i % 32);
    }
    Ok(words)
}

fn array(json: &Value) -> Result<&Vec<Value>> {
    json.as_array()
        .ok_or_else(|| format_err!("expected an array"))
}
