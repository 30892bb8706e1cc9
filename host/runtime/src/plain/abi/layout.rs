//! The facts of the canonical ABI's memory layout that lowering and lifting
//! both need and wasmtime's `CanonicalAbiInfo` does not hand over by type:
//! how many cases a variant-like type has, how wide its stored case is, and
//! where its payload starts.

use wasmtime::component::__internal::{ComponentTypes, InterfaceType};

/// How many cases a variant-like type has.
pub(super) fn case_count(types: &ComponentTypes, ty: InterfaceType) -> usize {
    match ty {
        InterfaceType::Variant(v) => types[v].cases.len(),
        InterfaceType::Enum(e) => types[e].names.len(),
        _ => 2,
    }
}

/// How many bytes a variant with `cases` cases stores its case in.
pub(super) fn discriminant_size(cases: usize) -> usize {
    match cases {
        0..=256 => 1,
        257..=65536 => 2,
        _ => 4,
    }
}

/// Where a variant-like type's payload starts, after its case.
pub(super) fn payload_offset(types: &ComponentTypes, ty: InterfaceType) -> u32 {
    match ty {
        InterfaceType::Variant(v) => types[v].info.payload_offset32,
        InterfaceType::Option(o) => types[o].info.payload_offset32,
        InterfaceType::Result(r) => types[r].info.payload_offset32,
        InterfaceType::Enum(e) => types[e].info.payload_offset32,
        _ => 0,
    }
}
