//! Write Hangar tools in Rust.
//!
//! Implement [`Tool`] for a type — `list_tools` says what the component
//! offers, `call_tool` runs one call — and export it with [`export_tool!`].
//! Build with `cargo build --target wasm32-wasip2 --release` and drop the
//! `.wasm` into Hangar's `plugins/` directory. A component that needs no
//! WASI (no files, clocks, randomness or outbound HTTP) can be built
//! "slim" for `wasm32-unknown-unknown` instead, which makes every fresh
//! instance cheaper. See the crate README.

pub use serde_json::{self, Value, json};

#[cfg(target_os = "unknown")]
mod slim;

/// Raw bindings of the `hangar:plugin/tool` world, generated from `wit/`.
#[cfg(feature = "tool")]
#[allow(clippy::too_many_arguments)]
pub mod tool {
    wit_bindgen::generate!({
        world: "tool",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_tool_world",
        default_bindings_module: "hangar_sdk::tool",
    });
}

#[cfg(feature = "tool")]
mod tool_helpers;
#[cfg(feature = "tool")]
pub use tool::Guest as Tool;
#[cfg(feature = "tool")]
pub use tool::hangar::plugin::config::get as config;
/// Tokens of the credential providers the plugin is granted.
#[cfg(feature = "tool")]
pub use tool::hangar::plugin::credentials;
#[cfg(feature = "tool")]
pub use tool::hangar::plugin::host::{LogLevel, log, progress};
#[cfg(feature = "tool")]
pub use tool::hangar::plugin::types::{
    Annotations, CallContext, CallResult, ContentBlock, EmbeddedResource, Media, Principal,
    ResourceContents, ResourceLink, ToolDefinition, ToolError,
};
#[cfg(feature = "tool")]
pub use tool_helpers::parse_args;

/// Key-value state the host keeps between calls, in this plugin's own
/// namespace (`hangar:plugin/kv`). Values are bytes; `increment` works on a
/// value stored as decimal text and creates it from 0. Sizes and the number
/// of keys are bounded by the host's `[kv]` settings: past a bound a call
/// answers [`KvError::TooLarge`] or [`KvError::Quota`].
///
/// ```ignore
/// let n = hangar_sdk::kv::increment("visits", 1)?;
/// hangar_sdk::kv::set("last", b"hello", Some(60_000))?;
/// ```
#[cfg(feature = "tool")]
pub mod kv {
    pub use crate::tool::hangar::plugin::kv::{KvError, delete, get, increment, set};
}

/// Asks the MCP client in the middle of a call: [`client::elicit`] (user
/// input), [`client::sample`] (an LLM completion), [`client::list_roots`]
/// (the client's roots), and their `_as` forms that name the question
/// (the key a 2026-07-28 client sees in `inputRequests`);
/// [`client::resource_updated`] (tells subscribed clients a resource
/// changed) and [`client::announce_list_changed`] (the host lists this
/// component's tools, prompts and resources again and tells clients).
///
/// ```ignore
/// let answer = hangar_sdk::client::elicit("Your name?", &json!({
///     "type": "object", "properties": { "name": { "type": "string" } }, "required": ["name"]
/// }).to_string())?;
/// ```
#[cfg(feature = "tool")]
pub mod client {
    pub use crate::tool::hangar::plugin::client::{
        ClientError, ElicitAction, ElicitAnswer, OfferedList, Root, SamplingAnswer,
        SamplingMessage, SamplingRequest, announce_list_changed, elicit, elicit_as, list_roots,
        list_roots_as, resource_updated, sample, sample_as,
    };
    pub use crate::tool::hangar::plugin::types::Role;
}

/// Raw bindings of the `hangar:plugin/server` world (tools plus resources,
/// prompts and completions), sharing the `tool` world's types. Implement
/// [`Tool`], [`Resources`], [`Prompts`] and [`Completion`] (each has
/// defaults that offer nothing) and export with [`export_server!`].
///
/// With the `app` feature these are the `app` world's bindings instead:
/// the same plus the `meta` export, so implement [`Meta`] too (the `_meta`
/// of tools and resources: an MCP App's links) and export with
/// [`export_app!`].
#[cfg(all(feature = "server", not(feature = "app")))]
#[allow(clippy::too_many_arguments)]
pub mod server {
    wit_bindgen::generate!({
        world: "server",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_server_world",
        default_bindings_module: "hangar_sdk::server",
        with: {
            "hangar:plugin/types@0.1.0": crate::tool::hangar::plugin::types,
            "hangar:plugin/host@0.1.0": crate::tool::hangar::plugin::host,
            "hangar:plugin/config@0.1.0": crate::tool::hangar::plugin::config,
            "hangar:plugin/credentials@0.1.0": crate::tool::hangar::plugin::credentials,
            "hangar:plugin/kv@0.1.0": crate::tool::hangar::plugin::kv,
            "hangar:plugin/client@0.1.0": crate::tool::hangar::plugin::client,
        },
    });
}

/// The `app` world's bindings (see the `server` world's above).
#[cfg(feature = "app")]
#[allow(clippy::too_many_arguments)]
pub mod server {
    wit_bindgen::generate!({
        world: "app",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_server_world",
        default_bindings_module: "hangar_sdk::server",
        with: {
            "hangar:plugin/types@0.1.0": crate::tool::hangar::plugin::types,
            "hangar:plugin/host@0.1.0": crate::tool::hangar::plugin::host,
            "hangar:plugin/config@0.1.0": crate::tool::hangar::plugin::config,
            "hangar:plugin/credentials@0.1.0": crate::tool::hangar::plugin::credentials,
            "hangar:plugin/kv@0.1.0": crate::tool::hangar::plugin::kv,
            "hangar:plugin/client@0.1.0": crate::tool::hangar::plugin::client,
        },
    });
}

#[cfg(feature = "server")]
mod server_helpers;
#[cfg(feature = "server")]
pub use server_helpers::{
    Completion, CompletionRequest, Completions, PromptArgument, PromptDefinition, PromptError,
    PromptMessage, PromptResult, Prompts, Reference, ResourceDefinition, ResourceError,
    ResourceItem, ResourceTemplate, Resources,
};

#[cfg(feature = "app")]
mod app_helpers;
#[cfg(feature = "app")]
pub use app_helpers::{APP_MIME_TYPE, Meta, app_tool_meta, app_view_meta};

/// Raw bindings of the `hangar:plugin/auth` world: implement
/// `auth::Guest::authenticate` and export with [`export_auth!`].
#[cfg(feature = "auth")]
#[allow(clippy::too_many_arguments)]
pub mod auth {
    wit_bindgen::generate!({
        world: "auth",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_auth_world",
        default_bindings_module: "hangar_sdk::auth",
    });
    pub use self::hangar::plugin::config::get as config;
    pub use self::hangar::plugin::host::{LogLevel, log};
    pub use self::hangar::plugin::types::Transport;
}

/// Raw bindings of the `hangar:plugin/mapper` world: implement
/// `mapper::Guest::map` and export with [`export_mapper!`].
#[cfg(feature = "mapper")]
#[allow(clippy::too_many_arguments)]
pub mod mapper {
    wit_bindgen::generate!({
        world: "mapper",
        path: "wit",
        pub_export_macro: true,
        export_macro_name: "__export_mapper_world",
        default_bindings_module: "hangar_sdk::mapper",
    });
    pub use self::hangar::plugin::config::get as config;
    pub use self::hangar::plugin::host::{LogLevel, log};
    pub use self::hangar::plugin::types::Principal;
}

/// Exports a type implementing `auth::Guest` as the component's `auth` world.
#[cfg(feature = "auth")]
#[macro_export]
macro_rules! export_auth {
    ($t:ident) => {
        $crate::auth::__export_auth_world!($t with_types_in $crate::auth);
    };
}

/// Exports a type implementing `mapper::Guest` as the component's `mapper` world.
#[cfg(feature = "mapper")]
#[macro_export]
macro_rules! export_mapper {
    ($t:ident) => {
        $crate::mapper::__export_mapper_world!($t with_types_in $crate::mapper);
    };
}

/// Exports a type implementing [`Tool`], [`Resources`], [`Prompts`] and
/// [`Completion`] as the component's `server` world.
#[cfg(feature = "server")]
#[macro_export]
macro_rules! export_server {
    ($t:ident) => {
        $crate::server::__export_server_world!($t with_types_in $crate::server);
    };
}

/// Exports a type implementing [`Tool`], [`Resources`], [`Prompts`],
/// [`Completion`] and [`Meta`] as the component's `app` world (the
/// `server` world plus `meta`).
#[cfg(feature = "app")]
#[macro_export]
macro_rules! export_app {
    ($t:ident) => {
        $crate::server::__export_server_world!($t with_types_in $crate::server);
    };
}

/// Exports a type implementing [`Tool`] as the component's `tool` world.
#[cfg(feature = "tool")]
#[macro_export]
macro_rules! export_tool {
    ($t:ident) => {
        $crate::tool::__export_tool_world!($t with_types_in $crate::tool);
    };
}
