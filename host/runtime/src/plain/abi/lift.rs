//! Lifting: a function's result read out of guest memory (or out of the one
//! flat value it returns) as JSON, by walking the result's real type, with
//! the output-limit accounting. [`Reader`] counts the JSON each value will
//! take against `max_output_bytes` before it builds it, so a string or a
//! byte list is refused by its length before a byte of it is copied, and no
//! list makes more host values than its JSON would allow
//! ([`OutputTooLarge`]). It also checks every pointer the guest hands back
//! (bounds, alignment) and every value (cases, chars, encodings), naming the
//! path of the one it refuses. `Ret` (in `mod.rs`) drives it.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Map, Number, Value};
use wasmtime::component::__internal::wasmtime_environ::component::StringEncoding;
use wasmtime::component::__internal::{CanonicalAbiInfo, ComponentTypes, InterfaceType};
use wasmtime::{Result, ValRaw, format_err};

use super::layout::{case_count, discriminant_size, payload_offset};

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

/// One step of the path to a value, for the messages that name it.
enum Step<'t> {
    Key(&'t str),
    Index(usize),
}

/// Reads a result out of guest memory as JSON, counting the JSON it builds
/// (`counted`) against `limit` before it builds it: every value costs at
/// least one byte of JSON, so no list, however long or however often its
/// elements point at the same memory, makes more values than the limit.
pub(super) struct Reader<'a> {
    mem: &'a [u8],
    types: &'a ComponentTypes,
    encoding: StringEncoding,
    counted: u64,
    limit: u64,
    path: Vec<Step<'a>>,
}

impl<'a> Reader<'a> {
    /// A reader of `mem`, whose result may take `limit` bytes of JSON.
    pub(super) fn new(
        mem: &'a [u8],
        types: &'a ComponentTypes,
        encoding: StringEncoding,
        limit: u64,
    ) -> Reader<'a> {
        Reader {
            mem,
            types,
            encoding,
            counted: 0,
            limit,
            path: Vec::new(),
        }
    }

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
    pub(super) fn bytes(&self, ptr: usize, len: usize) -> Result<&'a [u8]> {
        ptr.checked_add(len)
            .and_then(|end| self.mem.get(ptr..end))
            .ok_or_else(|| self.fail("the guest's value is out of bounds of its memory"))
    }

    pub(super) fn aligned(&self, ptr: usize, abi: &CanonicalAbiInfo) -> Result<()> {
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
    pub(super) fn load(&mut self, ty: InterfaceType, ptr: usize) -> Result<Value> {
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
    pub(super) fn lift_flat(
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
