//! Host-side bindings of the `hangar:plugin` worlds, generated from `wit/`.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "tool",
    exports: { default: async },
});
