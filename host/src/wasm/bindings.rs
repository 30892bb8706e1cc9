//! Host-side bindings of the `hangar:plugin` worlds, generated from `wit/`.
//! The `host`, `config`, `kv` and `types` interfaces are generated once (in
//! `tool`) and shared by the other worlds.

pub mod tool {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "tool",
        exports: { default: async },
        // Fetching a token and the kv backends are network or disk I/O.
        imports: {
            "hangar:plugin/credentials.get": async,
            "hangar:plugin/kv": async,
        },
    });
}

pub mod auth {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "auth",
        exports: { default: async },
        with: {
            "hangar:plugin/types": super::tool::hangar::plugin::types,
            "hangar:plugin/host": super::tool::hangar::plugin::host,
            "hangar:plugin/config": super::tool::hangar::plugin::config,
        },
    });
}

pub mod mapper {
    wasmtime::component::bindgen!({
        path: "../wit",
        world: "mapper",
        exports: { default: async },
        with: {
            "hangar:plugin/types": super::tool::hangar::plugin::types,
            "hangar:plugin/host": super::tool::hangar::plugin::host,
            "hangar:plugin/config": super::tool::hangar::plugin::config,
        },
    });
}
