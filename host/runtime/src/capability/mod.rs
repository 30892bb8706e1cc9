//! Guest capabilities: what a guest can reach past its own instance, each
//! one module behind the [`Capability`] trait.
//!
//! A capability has four moments, as Spin's factors do:
//! - **load** ([`Capability::load`]): once per load of the plugins, from the
//!   host-wide pieces ([`LoadSetup`]: the config, the outbound HTTP client,
//!   the kv store). Credentials build their providers here.
//! - **configure** ([`Capability::configure`]): once per plugin, from its
//!   `[plugins.NAME]` table (grants, config values). What it builds is kept
//!   in the plugin's `PluginMeta` as one field of
//!   [`PluginCaps`]; a bad grant is a load problem, not a failure.
//! - **per call** ([`Capability::per_call`]): the state one call's `Store`
//!   holds, one field of [`CallCaps`] inside `GuestState`; a reused instance
//!   is readied for its next call by [`Capability::next_call`].
//! - **link** ([`Capability::link`]): its host functions, added once to the
//!   linker every component is linked with.
//!
//! [`Capability::IMPORTS`] and [`Capability::check_lines`] are what
//! `hangar check` prints of it. The list at the bottom of this file is the
//! only place that names them all: adding a capability is one module here
//! plus one line there. `kv.rs` is the smallest complete example.

pub mod client;
pub mod config;
pub mod credentials;
pub mod files;
pub mod http;
pub mod kv;
pub mod log;
mod shape;

use wasmtime::component::Linker;

pub use shape::{CallSetup, Capability, GuestStore, LoadSetup, PluginSetup, Problems, find_import};

use hangar_config::PluginConfig;

/// Declares the list of capabilities: the structs holding one state of each
/// and the functions that run one step for all of them, in list order.
macro_rules! capabilities {
    ($( $(#[$doc:meta])* $field:ident : $cap:ty ),+ $(,)?) => {
        /// What one load built for each capability.
        pub struct Loads {
            $( $field: <$cap as Capability>::Load, )+
        }

        /// What one plugin keeps of each capability.
        #[derive(Clone, Default, Debug)]
        pub struct PluginCaps {
            $( $(#[$doc])* pub $field: <$cap as Capability>::Plugin, )+
        }

        /// What one call's store holds of each capability.
        pub struct CallCaps {
            $( $(#[$doc])* pub $field: <$cap as Capability>::Call, )+
        }

        impl Loads {
            pub fn new(setup: &LoadSetup<'_>, problems: &mut Problems) -> Loads {
                Loads { $( $field: <$cap as Capability>::load(setup, problems), )+ }
            }

            /// Every capability's part of one plugin.
            pub fn configure(&self, plugin: &PluginSetup<'_>, problems: &mut Problems) -> PluginCaps {
                PluginCaps {
                    $( $field: <$cap as Capability>::configure(&self.$field, plugin, problems), )+
                }
            }
        }

        impl CallCaps {
            pub fn new(plugin: &PluginCaps, call: &CallSetup<'_>) -> anyhow::Result<CallCaps> {
                Ok(CallCaps {
                    $( $field: <$cap as Capability>::per_call(&plugin.$field, call)?, )+
                })
            }

            pub fn next_call(&mut self, call: &CallSetup<'_>) {
                $( <$cap as Capability>::next_call(&mut self.$field, call); )+
            }
        }

        /// The store data that holds a [`CallCaps`].
        pub trait HasCaps {
            fn caps(&mut self) -> &mut CallCaps;
        }

        /// Adds every capability's host functions to `linker`.
        pub fn link<T: GuestStore + HasCaps>(linker: &mut Linker<T>) -> anyhow::Result<()> {
            $( <$cap as Capability>::link(linker, |s: &mut T| &mut s.caps().$field)?; )+
            Ok(())
        }

        /// Every interface `hangar check` lists, in list order.
        pub fn imports() -> impl Iterator<Item = &'static str> {
            [$( <$cap as Capability>::IMPORTS, )+].into_iter().flatten().copied()
        }

        /// What `hangar check` prints under a component, capability by capability.
        pub fn check_lines(imports: &[String], plugin: Option<&PluginConfig>) -> Vec<String> {
            let mut lines = Vec::new();
            $( lines.extend(<$cap as Capability>::check_lines(imports, plugin)); )+
            lines
        }
    };
}

capabilities! {
    /// WASI p2: clocks, random, stderr, and the call's mounted folders.
    files: files::Files,
    /// Outbound HTTP under `grants.http`.
    http: http::Http,
    /// `credentials.get` under `grants.credentials`.
    credentials: credentials::Credentials,
    /// The plugin's namespace of the host-wide kv store.
    kv: kv::Kv,
    /// `config.get`: the plugin's `[plugins.NAME] config` table.
    config: config::PluginConfigValues,
    /// `host.log` and `host.progress`.
    log: log::HostLog,
    /// Questions to the MCP client and change announcements.
    client: client::Client,
}
