//! Hangar's core: what the host's layers share beneath the backends — the
//! call vocabulary ([`call`]), the host-wide key-value store ([`kv`]), the
//! replicas' shared Redis ([`cluster`]), the store of uploaded files and
//! artifacts ([`files`]), users' own accounts at providers ([`accounts`])
//! and the host's own outbound HTTP policy ([`outbound`]).
//! Above `hangar-config`; the runtime (`hangar-runtime`) and the `hangar`
//! crate build on it.

pub mod accounts;
pub mod call;
pub mod cluster;
pub mod files;
pub mod kv;
pub mod outbound;
