//! Host-side bindings of the `hangar:plugin` worlds, generated from `wit/`.
//! The `host`, `config`, `kv`, `client` and `types` interfaces are generated once (in
//! `tool`) and shared by the other worlds.

pub mod tool {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "tool",
        exports: { default: async },
        // Fetching a token and the kv backends are network or disk I/O.
        imports: {
            "hangar:plugin/credentials.get": async,
            "hangar:plugin/kv": async,
            "hangar:plugin/client.elicit": async,
            "hangar:plugin/client.sample": async,
            "hangar:plugin/client.list-roots": async,
            "hangar:plugin/client.elicit-as": async,
            "hangar:plugin/client.sample-as": async,
            "hangar:plugin/client.list-roots-as": async,
        },
    });
}

/// The `app` world: `server` (`tool` plus the exported `resources`,
/// `prompts` and `completion` interfaces) plus `meta`. Only their export
/// bindings are used (each looked up on its own, since a component may
/// export any of them).
pub mod app {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "app",
        exports: { default: async },
        with: {
            "hangar:plugin/types": crate::bindings::tool::hangar::plugin::types,
            "hangar:plugin/host": crate::bindings::tool::hangar::plugin::host,
            "hangar:plugin/config": crate::bindings::tool::hangar::plugin::config,
            "hangar:plugin/credentials": crate::bindings::tool::hangar::plugin::credentials,
            "hangar:plugin/kv": crate::bindings::tool::hangar::plugin::kv,
            "hangar:plugin/client": crate::bindings::tool::hangar::plugin::client,
        },
    });
}

pub mod auth {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "auth",
        exports: { default: async },
        with: {
            "hangar:plugin/types": crate::bindings::tool::hangar::plugin::types,
            "hangar:plugin/host": crate::bindings::tool::hangar::plugin::host,
            "hangar:plugin/config": crate::bindings::tool::hangar::plugin::config,
        },
    });
}

pub mod mapper {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "mapper",
        exports: { default: async },
        with: {
            "hangar:plugin/types": crate::bindings::tool::hangar::plugin::types,
            "hangar:plugin/host": crate::bindings::tool::hangar::plugin::host,
            "hangar:plugin/config": crate::bindings::tool::hangar::plugin::config,
        },
    });
}

/// The `code` world: the code sandbox's `run` export and the
/// `program-tools` import through which a program calls the caller's tools.
pub mod code {
    wasmtime::component::bindgen!({
        path: "../../wit",
        world: "code",
        exports: { default: async },
        // Waiting for a tool call is waiting for a whole pipeline call.
        imports: { "hangar:plugin/program-tools.finish": async },
    });
}
