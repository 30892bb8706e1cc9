//! The canonical ABI between a call's JSON and a plain component's linear
//! memory, both ways, without wasmtime's dynamic `Val`s.
//!
//! wasmtime's dynamic API (`Func::call_async` with `Val`s) makes one `Val`
//! (32 bytes) per element of every list, a `list<u8>` included, and lifts a
//! whole result before the host can look at its size: a 3 MB byte list cost
//! ~460 MiB of host memory, and a result a component may build within its
//! own memory cap would have cost gigabytes (upstream:
//! bytecodealliance/wasmtime#13788). So a plain component's function is
//! called as a `TypedFunc<Args, Ret>` whose two types carry no static shape:
//! their `Lower`/`Lift` walk the function's real types (`InterfaceType`,
//! `ComponentTypes`) at run time:
//!
//! - [`Args`] lowers the call's (already validated) JSON straight into guest
//!   memory: base64 is decoded into the guest's own allocation, strings and
//!   byte lists are copied in bulk, and nothing but the JSON is held on the
//!   host.
//! - [`Ret`] lifts the result straight from guest memory into JSON, counting
//!   the JSON it is about to build against the call's `max_output_bytes`
//!   before building it: a byte list or a string is refused by its length,
//!   before a byte of it is copied, and no list makes more host values than
//!   the JSON it would become allows ([`OutputTooLarge`]).
//!
//! Both always take wasmtime's flat path (`Args` is 16 flat values, `Ret`
//! one), which is what lets them stand for any signature: parameters that
//! flatten to more than 16 values go to memory the guest allocates here
//! (one pointer in the first slot), and a result of more than one flat value
//! is the return pointer the core function hands back, read here. This uses
//! wasmtime's doc-hidden `ComponentType`/`Lower`/`Lift` traits and
//! `LowerContext`/`LiftContext` (`wasmtime::component::__internal`), pinned
//! to the wasmtime the host builds with; tests/test_typed_exports.py
//! round-trips every WIT type through real components (Rust, Python and
//! JavaScript builds, so every string encoding they use), and
//! tests/test_typed_values.py holds the memory bounds.
//!
//! The JSON shapes are `schema.rs`'s; arguments were checked by
//! `convert::check` first, so a refusal here is a bug or a guest's fault.

use std::fmt;
use std::mem::MaybeUninit;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Number, Value};
use wasmtime::component::__internal::wasmtime_environ::component::{
    MAX_FLAT_PARAMS, MAX_FLAT_RESULTS, StringEncoding,
};
use wasmtime::component::__internal::{
    CanonicalAbiInfo, ComponentTypes, InstanceType, InterfaceType, LiftContext, LowerContext,
};
use wasmtime::component::{ComponentNamedList, ComponentType, Lift, Lower};
use wasmtime::{Result, ValRaw, bail, format_err};

use super::convert;

tokio::task_local! {
    /// The JSON bytes a call's result may take (`max_output_bytes`): set
    /// around the call by [`with_output_limit`], read by [`Ret`]'s lift,
    /// which wasmtime gives no other way in (it runs on the call's fiber,
    /// inside a poll of the call's future, where the task-local is set).
    static OUTPUT_LIMIT: u64;
}

/// Runs `call` with `limit` as the bound of the JSON its result may become.
pub async fn with_output_limit<F: Future>(limit: u64, call: F) -> F::Output {
    OUTPUT_LIMIT.scope(limit, call).await
}

/// A result refused while it was read from the guest: its JSON would have
/// taken at least `at_least` bytes, over `limit`.
#[derive(Debug)]
pub struct OutputTooLarge {
    pub at_least: u64,
    pub limit: u64,
}

impl fmt::Display for OutputTooLarge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "output of at least {} bytes exceeds the limit of {} bytes",
            self.at_least, self.limit
        )
    }
}

impl std::error::Error for OutputTooLarge {}

/// A call's arguments: its JSON object and the function's parameter names,
/// in order.
pub struct Args<'a> {
    json: &'a Value,
    names: Vec<&'a str>,
}

impl<'a> Args<'a> {
    pub fn new(json: &'a Value, names: impl Iterator<Item = &'a str>) -> Args<'a> {
        Args {
            json,
            names: names.collect(),
        }
    }

    /// The JSON of parameter `i`; `None` when left out (an `option`).
    fn arg(&self, i: usize) -> Option<&'a Value> {
        let name = self.names.get(i)?;
        self.json.as_object()?.get(*name)
    }
}

/// What flattening gives any export: wasmtime lowers `Args` into 16 flat
/// slots, which the core function reads as its own parameters (or, past 16,
/// as one pointer); see the module's doc.
const ARG_SLOTS: usize = MAX_FLAT_PARAMS;

// SAFETY: `Lower` is an array of `ValRaw`s; `linear_lower_to_flat` fills
// every slot, the core function's own parameters first, laid out as the
// canonical ABI flattens the function's real parameter types (which
// `typecheck` only requires to be a tuple: the lowering walks them). The ABI
// constants are never used for a type that is only lowered flat.
unsafe impl ComponentType for Args<'_> {
    type Lower = [ValRaw; ARG_SLOTS];

    const ABI: CanonicalAbiInfo = CanonicalAbiInfo {
        size32: 0,
        align32: 1,
        size64: 0,
        align64: 1,
        flat_count: Some(ARG_SLOTS as u8),
    };

    fn typecheck(ty: &InterfaceType, _types: &InstanceType<'_>) -> Result<()> {
        match ty {
            InterfaceType::Tuple(_) => Ok(()),
            _ => bail!("parameters are not a tuple"),
        }
    }
}

// SAFETY: the parameters of a function are a tuple (`typecheck`).
unsafe impl ComponentNamedList for Args<'_> {}

// SAFETY: see `ComponentType for Args`.
unsafe impl Lower for Args<'_> {
    fn linear_lower_to_flat<T>(
        &self,
        cx: &mut LowerContext<'_, T>,
        ty: InterfaceType,
        dst: &mut MaybeUninit<[ValRaw; ARG_SLOTS]>,
    ) -> Result<()> {
        let types = cx.types;
        let InterfaceType::Tuple(t) = ty else {
            bail!("parameters are not a tuple")
        };
        let params = &types[t];
        if params.types.len() != self.names.len() {
            bail!(
                "the function takes {} parameters, not {}",
                params.types.len(),
                self.names.len()
            );
        }
        let mut flat = Vec::with_capacity(ARG_SLOTS);
        match params.abi.flat_count(MAX_FLAT_PARAMS) {
            Some(_) => {
                for (i, ty) in params.types.iter().enumerate() {
                    lower_flat(cx, self.arg(i), *ty, &mut flat)?;
                }
            }
            None => {
                // Too many to pass flat: in memory the guest allocates, as
                // the fields of a record, and the core function takes its
                // address.
                let size = params.abi.size32 as usize;
                let ptr = cx.realloc(0, 0, params.abi.align32, size)?;
                let mut offset = 0;
                for (i, ty) in params.types.iter().enumerate() {
                    let at = types.canonical_abi(ty).next_field32_size(&mut offset);
                    store(cx, self.arg(i), *ty, ptr + at)?;
                }
                flat.push(ValRaw::i64(ptr as i64));
            }
        }
        if flat.len() > ARG_SLOTS {
            bail!("parameters flatten to more than {ARG_SLOTS} values");
        }
        flat.resize(ARG_SLOTS, ValRaw::u64(0));
        let slots: [ValRaw; ARG_SLOTS] = flat
            .try_into()
            .map_err(|_| format_err!("parameter slots"))?;
        dst.write(slots);
        Ok(())
    }

    fn linear_lower_to_memory<T>(
        &self,
        _cx: &mut LowerContext<'_, T>,
        _ty: InterfaceType,
        _offset: usize,
    ) -> Result<()> {
        // `Args` is 16 flat values, which wasmtime always passes flat.
        bail!("arguments are only lowered flat")
    }
}

/// The value `json` stands for (`None`: an `option` left out), stored at
/// `offset` of guest memory as a `ty`.
fn store<T>(
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
fn lower_flat<T>(
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

/// How many bytes a variant with `cases` cases stores its case in.
fn discriminant_size(cases: usize) -> usize {
    match cases {
        0..=256 => 1,
        257..=65536 => 2,
        _ => 4,
    }
}

/// Where a variant-like type's payload starts, after its case.
fn payload_offset(types: &ComponentTypes, ty: InterfaceType) -> u32 {
    match ty {
        InterfaceType::Variant(v) => types[v].info.payload_offset32,
        InterfaceType::Option(o) => types[o].info.payload_offset32,
        InterfaceType::Result(r) => types[r].info.payload_offset32,
        InterfaceType::Enum(e) => types[e].info.payload_offset32,
        _ => 0,
    }
}

/// A function's result as JSON, lifted by [`Reader`].
pub struct Ret(pub Value);

// SAFETY: `Lower` is one `ValRaw`, the one core value a function with a
// result returns: the value itself when the result flattens to one value,
// else the address of the result in guest memory, which
// `linear_lift_from_flat` reads (bounds-checked) by the result's real type.
// A function without a result is called with `()` instead. The ABI
// constants are never used for a type that is only lifted flat.
unsafe impl ComponentType for Ret {
    type Lower = ValRaw;

    const ABI: CanonicalAbiInfo = CanonicalAbiInfo {
        size32: 0,
        align32: 1,
        size64: 0,
        align64: 1,
        flat_count: Some(1),
    };

    fn typecheck(ty: &InterfaceType, types: &InstanceType<'_>) -> Result<()> {
        match ty {
            InterfaceType::Tuple(t) if types.types[*t].types.len() == 1 => Ok(()),
            _ => bail!("expected exactly one result"),
        }
    }
}

// SAFETY: a function's results are a tuple, of one value (`typecheck`).
unsafe impl ComponentNamedList for Ret {}

// SAFETY: see `ComponentType for Ret`.
unsafe impl Lift for Ret {
    fn linear_lift_from_flat(
        cx: &mut LiftContext<'_>,
        ty: InterfaceType,
        src: &ValRaw,
    ) -> Result<Ret> {
        let types: &ComponentTypes = cx.types;
        let InterfaceType::Tuple(t) = ty else {
            bail!("results are not a tuple")
        };
        let [result] = &*types[t].types else {
            bail!("expected exactly one result")
        };
        let limit = OUTPUT_LIMIT.try_with(|l| *l).unwrap_or(0);
        let mut reader = Reader {
            mem: cx.memory(),
            types,
            encoding: cx.options().string_encoding,
            counted: 0,
            limit,
            path: Vec::new(),
        };
        let value = if types
            .canonical_abi(result)
            .flat_count(MAX_FLAT_RESULTS)
            .is_some()
        {
            reader.lift_flat(*result, &mut std::iter::once(*src))?
        } else {
            let ptr = src.get_u32() as usize;
            let abi = types.canonical_abi(result);
            reader.aligned(ptr, abi)?;
            // The whole value in bounds, so no field's offset wraps.
            reader.bytes(ptr, abi.size32 as usize)?;
            reader.load(*result, ptr)?
        };
        Ok(Ret(value))
    }

    fn linear_lift_from_memory(
        _cx: &mut LiftContext<'_>,
        _ty: InterfaceType,
        _bytes: &[u8],
    ) -> Result<Ret> {
        // `Ret` is one flat value, which wasmtime always lifts flat.
        bail!("a result is only lifted flat")
    }
}

/// One step of the path to a value, for the messages that name it.
enum Step<'t> {
    Key(&'t str),
    Index(usize),
}

/// Reads a result out of guest memory as JSON, counting the JSON it builds
/// (`counted`) against `limit` before it builds it: every value costs at
/// least one byte of JSON, so no list, however long or however often its
/// elements point at the same memory, makes more values than the limit.
struct Reader<'a> {
    mem: &'a [u8],
    types: &'a ComponentTypes,
    encoding: StringEncoding,
    counted: u64,
    limit: u64,
    path: Vec<Step<'a>>,
}

impl<'a> Reader<'a> {
    /// Counts `bytes` more of JSON; refuses once past the limit.
    fn charge(&mut self, bytes: u64) -> Result<()> {
        self.counted = self.counted.saturating_add(bytes);
        if self.counted > self.limit {
            return Err(wasmtime::Error::new(OutputTooLarge {
                at_least: self.counted,
                limit: self.limit,
            }));
        }
        Ok(())
    }

    /// The path of the value being read: `/items/2/tag`.
    fn path(&self) -> String {
        let mut out = String::new();
        for step in &self.path {
            match step {
                Step::Key(k) => out.push_str(&format!("/{k}")),
                Step::Index(i) => out.push_str(&format!("/{i}")),
            }
        }
        if out.is_empty() { "/".into() } else { out }
    }

    fn fail(&self, what: impl fmt::Display) -> wasmtime::Error {
        format_err!("{}: {what}", self.path())
    }

    /// `len` bytes of guest memory at `ptr`.
    fn bytes(&self, ptr: usize, len: usize) -> Result<&'a [u8]> {
        ptr.checked_add(len)
            .and_then(|end| self.mem.get(ptr..end))
            .ok_or_else(|| self.fail("the guest's value is out of bounds of its memory"))
    }

    fn aligned(&self, ptr: usize, abi: &CanonicalAbiInfo) -> Result<()> {
        if !ptr.is_multiple_of(abi.align32 as usize) {
            return Err(self.fail("the guest's pointer is not aligned"));
        }
        Ok(())
    }

    fn u32_at(&self, ptr: usize) -> Result<u32> {
        let b = self.bytes(ptr, 4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Little-endian bits of `size` bytes at `ptr`.
    fn bits_at(&self, ptr: usize, size: usize) -> Result<u64> {
        let mut buf = [0u8; 8];
        buf[..size].copy_from_slice(self.bytes(ptr, size)?);
        Ok(u64::from_le_bytes(buf))
    }

    /// The value of type `ty` stored at `ptr`.
    fn load(&mut self, ty: InterfaceType, ptr: usize) -> Result<Value> {
        let types = self.types;
        match ty {
            InterfaceType::String => {
                let (addr, len) = (self.u32_at(ptr)?, self.u32_at(ptr + 4)?);
                self.string(addr as usize, len as usize)
            }
            InterfaceType::List(l) => {
                let (addr, len) = (self.u32_at(ptr)? as usize, self.u32_at(ptr + 4)? as usize);
                let elem = types[l].element;
                if elem == InterfaceType::U8 {
                    return self.byte_list(addr, len);
                }
                let abi = types.canonical_abi(&elem);
                self.aligned(addr, abi)?;
                let size = abi.size32 as usize;
                self.bytes(addr, len.saturating_mul(size))?;
                self.charge(2)?;
                let mut items = Vec::with_capacity(self.room(len, elem));
                for i in 0..len {
                    if i > 0 {
                        self.charge(1)?;
                    }
                    self.path.push(Step::Index(i));
                    items.push(self.load(elem, addr + i * size)?);
                    self.path.pop();
                }
                Ok(Value::Array(items))
            }
            InterfaceType::Map(m) => {
                let (addr, len) = (self.u32_at(ptr)? as usize, self.u32_at(ptr + 4)? as usize);
                let map = &types[m];
                if map.key != InterfaceType::String {
                    return Err(self.fail("a map key that is not a string"));
                }
                let size = map.entry_abi.size32 as usize;
                self.aligned(addr, &map.entry_abi)?;
                self.bytes(addr, len.saturating_mul(size))?;
                self.charge(2)?;
                let mut obj = Map::new();
                for i in 0..len {
                    let at = addr + i * size;
                    let Value::String(key) = self.load(InterfaceType::String, at)? else {
                        return Err(self.fail("a map key that is not a string"));
                    };
                    self.charge(1 + u64::from(i > 0))?;
                    let value = self.load(map.value, at + map.value_offset32 as usize)?;
                    obj.insert(key, value);
                }
                Ok(Value::Object(obj))
            }
            InterfaceType::Record(r) => {
                self.charge(2)?;
                let mut obj = Map::new();
                let mut offset = ptr;
                for (i, field) in types[r].fields.iter().enumerate() {
                    let at = types
                        .canonical_abi(&field.ty)
                        .next_field32_size(&mut offset);
                    // `"name":` and a comma between fields.
                    self.charge(field.name.len() as u64 + 3 + u64::from(i > 0))?;
                    self.path.push(Step::Key(&field.name));
                    let value = self.load(field.ty, at)?;
                    self.path.pop();
                    obj.insert(field.name.clone(), value);
                }
                Ok(Value::Object(obj))
            }
            InterfaceType::Tuple(t) => {
                self.charge(2)?;
                let mut items = Vec::new();
                let mut offset = ptr;
                for (i, ty) in types[t].types.iter().enumerate() {
                    let at = types.canonical_abi(ty).next_field32_size(&mut offset);
                    self.charge(u64::from(i > 0))?;
                    self.path.push(Step::Index(i));
                    items.push(self.load(*ty, at)?);
                    self.path.pop();
                }
                Ok(Value::Array(items))
            }
            InterfaceType::FixedLengthList(l) => {
                let (elem, len) = (types[l].element, types[l].size as usize);
                let size = types.canonical_abi(&elem).size32 as usize;
                self.charge(2)?;
                let mut items = Vec::with_capacity(self.room(len, elem));
                for i in 0..len {
                    self.charge(u64::from(i > 0))?;
                    self.path.push(Step::Index(i));
                    items.push(self.load(elem, ptr + i * size)?);
                    self.path.pop();
                }
                Ok(Value::Array(items))
            }
            InterfaceType::Variant(_)
            | InterfaceType::Enum(_)
            | InterfaceType::Option(_)
            | InterfaceType::Result(_) => {
                let cases = case_count(types, ty);
                let case = self.bits_at(ptr, discriminant_size(cases))? as u32;
                let at = ptr + payload_offset(types, ty) as usize;
                self.case(ty, case, |r, pty| r.load(pty, at))
            }
            InterfaceType::Flags(f) => {
                let count = types[f].names.len();
                let words: Vec<u32> = match count {
                    0..=8 => vec![self.bits_at(ptr, 1)? as u32],
                    9..=16 => vec![self.bits_at(ptr, 2)? as u32],
                    _ => (0..count.div_ceil(32))
                        .map(|i| self.u32_at(ptr + 4 * i))
                        .collect::<Result<_>>()?,
                };
                self.flags(ty, &words)
            }
            scalar => {
                let size = types.canonical_abi(&scalar).size32 as usize;
                let bits = self.bits_at(ptr, size)?;
                if scalar == InterfaceType::Bool && bits > 1 {
                    return Err(self.fail("invalid boolean value"));
                }
                self.scalar(scalar, bits)
            }
        }
    }

    /// The value of type `ty` (one that flattens to at most one value, as a
    /// result passed flat does) from core values.
    fn lift_flat(
        &mut self,
        ty: InterfaceType,
        src: &mut dyn Iterator<Item = ValRaw>,
    ) -> Result<Value> {
        let types = self.types;
        fn next(src: &mut dyn Iterator<Item = ValRaw>) -> Result<ValRaw> {
            src.next()
                .ok_or_else(|| format_err!("a flat value is missing"))
        }
        match ty {
            InterfaceType::Record(r) => {
                self.charge(2)?;
                let mut obj = Map::new();
                for (i, field) in types[r].fields.iter().enumerate() {
                    self.charge(field.name.len() as u64 + 3 + u64::from(i > 0))?;
                    self.path.push(Step::Key(&field.name));
                    let value = self.lift_flat(field.ty, src)?;
                    self.path.pop();
                    obj.insert(field.name.clone(), value);
                }
                Ok(Value::Object(obj))
            }
            InterfaceType::Tuple(t) => {
                self.charge(2)?;
                let mut items = Vec::new();
                for (i, ty) in types[t].types.iter().enumerate() {
                    self.charge(u64::from(i > 0))?;
                    items.push(self.lift_flat(*ty, src)?);
                }
                Ok(Value::Array(items))
            }
            InterfaceType::FixedLengthList(l) => {
                self.charge(2)?;
                let mut items = Vec::new();
                for i in 0..types[l].size {
                    self.charge(u64::from(i > 0))?;
                    items.push(self.lift_flat(types[l].element, src)?);
                }
                Ok(Value::Array(items))
            }
            InterfaceType::Variant(_)
            | InterfaceType::Enum(_)
            | InterfaceType::Option(_)
            | InterfaceType::Result(_) => {
                // One flat value: the case alone, no case has a payload.
                let case = next(src)?.get_u32();
                self.case(ty, case, |r, _| {
                    Err(r.fail("a payload in a single flat value"))
                })
            }
            InterfaceType::Flags(_) => {
                let word = next(src)?.get_u32();
                self.flags(ty, &[word])
            }
            InterfaceType::Bool => {
                let v = next(src)?.get_u32();
                self.scalar(ty, u64::from(v != 0))
            }
            InterfaceType::S64 | InterfaceType::U64 => {
                let v = next(src)?.get_u64();
                self.scalar(ty, v)
            }
            InterfaceType::Float64 => {
                let v = next(src)?.get_f64();
                self.scalar(ty, v)
            }
            InterfaceType::Float32 => {
                let v = next(src)?.get_f32();
                self.scalar(ty, u64::from(v))
            }
            _ => {
                let v = next(src)?.get_u32();
                self.scalar(ty, u64::from(v))
            }
        }
    }

    /// Room to reserve for a list of `len` values of type `elem`: as many
    /// as the JSON the limit leaves can hold (each takes at least
    /// `least_json(elem)` bytes and a comma), so that a guest's length does
    /// not size an allocation, and the vector is not grown (and copied)
    /// while it fills. At most 4 Mi values up front; past that it grows.
    fn room(&self, len: usize, elem: InterfaceType) -> usize {
        let left = self.limit.saturating_sub(self.counted) / (least_json(elem) + 1);
        len.min(usize::try_from(left).unwrap_or(usize::MAX))
            .min(1 << 22)
    }

    /// A variant-like value of case `case`; `payload` reads the case's
    /// payload of the given type.
    fn case(
        &mut self,
        ty: InterfaceType,
        case: u32,
        payload: impl FnOnce(&mut Self, InterfaceType) -> Result<Value>,
    ) -> Result<Value> {
        let types = self.types;
        let bad_case = |r: &Self| r.fail(format!("invalid case {case}"));
        match ty {
            InterfaceType::Enum(e) => {
                let names = &types[e].names;
                let name = (case as usize) < names.len();
                let name = name
                    .then(|| &names[case as usize])
                    .ok_or_else(|| bad_case(self))?;
                self.charge(name.len() as u64 + 2)?;
                Ok(Value::String(name.clone()))
            }
            InterfaceType::Option(o) => match case {
                0 => {
                    self.charge(4)?;
                    Ok(Value::Null)
                }
                1 => payload(self, types[o].ty),
                _ => Err(bad_case(self)),
            },
            InterfaceType::Result(r) => {
                let (name, side) = match case {
                    0 => ("ok", types[r].ok),
                    1 => ("err", types[r].err),
                    _ => return Err(bad_case(self)),
                };
                // `{"ok":…}`
                self.charge(name.len() as u64 + 5)?;
                let inner = match side {
                    Some(pty) => {
                        self.path.push(Step::Key(name));
                        let v = payload(self, pty)?;
                        self.path.pop();
                        v
                    }
                    None => {
                        self.charge(4)?;
                        Value::Null
                    }
                };
                let mut obj = Map::new();
                obj.insert(name.into(), inner);
                Ok(Value::Object(obj))
            }
            InterfaceType::Variant(v) => {
                let (name, case_ty) = types[v]
                    .cases
                    .get_index(case as usize)
                    .ok_or_else(|| bad_case(self))?;
                // `{"tag":"name"}`, and `,"val":` with a payload.
                self.charge(name.len() as u64 + 10)?;
                let mut obj = Map::new();
                obj.insert("tag".into(), Value::String(name.clone()));
                if let Some(pty) = case_ty {
                    self.charge(7)?;
                    self.path.push(Step::Key("val"));
                    let val = payload(self, *pty)?;
                    self.path.pop();
                    obj.insert("val".into(), val);
                }
                Ok(Value::Object(obj))
            }
            _ => Err(self.fail("not a variant")),
        }
    }

    /// The names of the flags set in `words`, in declaration order.
    fn flags(&mut self, ty: InterfaceType, words: &[u32]) -> Result<Value> {
        let InterfaceType::Flags(f) = ty else {
            return Err(self.fail("not flags"));
        };
        self.charge(2)?;
        let types = self.types;
        let mut set = Vec::new();
        for (i, name) in types[f].names.iter().enumerate() {
            if words.get(i / 32).is_some_and(|w| w & (1 << (i % 32)) != 0) {
                self.charge(name.len() as u64 + 2 + u64::from(!set.is_empty()))?;
                set.push(Value::String(name.clone()));
            }
        }
        Ok(Value::Array(set))
    }

    /// A scalar from its little-endian bits.
    fn scalar(&mut self, ty: InterfaceType, bits: u64) -> Result<Value> {
        let value = match ty {
            InterfaceType::Bool => Value::Bool(bits != 0),
            InterfaceType::U8 => Value::from(bits as u8),
            InterfaceType::S8 => Value::from(bits as u8 as i8),
            InterfaceType::U16 => Value::from(bits as u16),
            InterfaceType::S16 => Value::from(bits as u16 as i16),
            InterfaceType::U32 => Value::from(bits as u32),
            InterfaceType::S32 => Value::from(bits as u32 as i32),
            InterfaceType::U64 => Value::from(bits),
            InterfaceType::S64 => Value::from(bits as i64),
            InterfaceType::Float32 => self.float(f64::from(f32::from_bits(bits as u32)))?,
            InterfaceType::Float64 => self.float(f64::from_bits(bits))?,
            InterfaceType::Char => {
                let c = char::from_u32(bits as u32)
                    .ok_or_else(|| self.fail(format!("invalid char {bits:#x}")))?;
                Value::String(c.to_string())
            }
            _ => return Err(self.fail("a value JSON cannot carry")),
        };
        self.charge(json_len(&value))?;
        Ok(value)
    }

    fn float(&self, f: f64) -> Result<Value> {
        Number::from_f64(f)
            .map(Value::Number)
            .ok_or_else(|| self.fail(format!("{f} is not a number JSON can carry")))
    }

    /// A string of `len` (in the component's encoding) at `ptr`: counted by
    /// its length before a byte of it is copied.
    fn string(&mut self, ptr: usize, len: usize) -> Result<Value> {
        const UTF16_TAG: usize = 1 << 31;
        let (utf16, units) = match self.encoding {
            StringEncoding::Utf8 => (false, len),
            StringEncoding::Utf16 => (true, len),
            StringEncoding::CompactUtf16 => (len & UTF16_TAG != 0, len & !UTF16_TAG),
        };
        // Each unit is at least one byte of UTF-8; and two quotes.
        self.charge(units as u64 + 2)?;
        let text = if utf16 {
            let raw = self.bytes(ptr, units.saturating_mul(2))?;
            if !ptr.is_multiple_of(2) {
                return Err(self.fail("the guest's string is not aligned"));
            }
            let units = raw
                .chunks_exact(2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]));
            char::decode_utf16(units)
                .collect::<Result<String, _>>()
                .map_err(|e| self.fail(format!("invalid UTF-16: {e}")))?
        } else if self.encoding == StringEncoding::Utf8 {
            let raw = self.bytes(ptr, units)?;
            std::str::from_utf8(raw)
                .map_err(|e| self.fail(format!("invalid UTF-8: {e}")))?
                .to_owned()
        } else {
            // Latin-1: each byte is the code point.
            let raw = self.bytes(ptr, units)?;
            if !ptr.is_multiple_of(2) {
                return Err(self.fail("the guest's string is not aligned"));
            }
            raw.iter().map(|&b| char::from(b)).collect()
        };
        // What the encoding took more than one byte a unit for.
        self.charge((text.len() as u64).saturating_sub(units as u64))?;
        Ok(Value::String(text))
    }

    /// A `list<u8>` as base64, counted by its length before it is encoded.
    fn byte_list(&mut self, ptr: usize, len: usize) -> Result<Value> {
        let raw = self.bytes(ptr, len)?;
        self.charge((len as u64).div_ceil(3) * 4 + 2)?;
        Ok(Value::String(B64.encode(raw)))
    }
}

/// The fewest bytes of JSON a value of type `ty` takes: `1`, `true`, `""`,
/// `[]`, `{"ok":1}`.
fn least_json(ty: InterfaceType) -> u64 {
    match ty {
        InterfaceType::Bool => 4,
        InterfaceType::Char | InterfaceType::Enum(_) => 3,
        InterfaceType::Variant(_) => 11,
        InterfaceType::Result(_) => 6,
        InterfaceType::String
        | InterfaceType::List(_)
        | InterfaceType::Map(_)
        | InterfaceType::Record(_)
        | InterfaceType::Tuple(_)
        | InterfaceType::Flags(_)
        | InterfaceType::FixedLengthList(_) => 2,
        _ => 1,
    }
}

/// How many cases a variant-like type has.
fn case_count(types: &ComponentTypes, ty: InterfaceType) -> usize {
    match ty {
        InterfaceType::Variant(v) => types[v].cases.len(),
        InterfaceType::Enum(e) => types[e].names.len(),
        _ => 2,
    }
}

/// The bytes of a scalar's JSON.
fn json_len(value: &Value) -> u64 {
    struct Count(u64);
    impl fmt::Write for Count {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            self.0 += s.len() as u64;
            Ok(())
        }
    }
    let mut count = Count(0);
    match value {
        Value::String(s) => return s.len() as u64 + 2,
        other => {
            let _ = fmt::write(&mut count, format_args!("{other}"));
        }
    }
    count.0
}
