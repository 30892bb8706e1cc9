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
//!
//! Split by concern: this file holds the two types wasmtime calls ([`Args`],
//! [`Ret`]: the flat path that stands for any signature) and the output
//! limit; `lower.rs` walks a type to write JSON into guest memory;
//! `lift.rs` walks it to read guest memory back as JSON, counting the JSON
//! against the limit as it goes; `layout.rs` holds the few facts of the
//! canonical ABI's memory layout that both walks share.

mod layout;
mod lift;
mod lower;

use std::mem::MaybeUninit;

use serde_json::Value;
use wasmtime::component::__internal::wasmtime_environ::component::{
    MAX_FLAT_PARAMS, MAX_FLAT_RESULTS,
};
use wasmtime::component::__internal::{
    CanonicalAbiInfo, ComponentTypes, InstanceType, InterfaceType, LiftContext, LowerContext,
};
use wasmtime::component::{ComponentNamedList, ComponentType, Lift, Lower};
use wasmtime::{Result, ValRaw, bail, format_err};

pub use lift::OutputTooLarge;
use lift::Reader;
use lower::{lower_flat, store};

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

/// A function's result as JSON, lifted by [`lift::Reader`].
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
        let mut reader = Reader::new(cx.memory(), types, cx.options().string_encoding, limit);
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
