//! Which keys a reload applies, declared key by key beside the config types.
//!
//! A reload builds a new catalog from the file as it is now; what was built
//! once at start-up (the listener, the kv store, the replicas' Redis, the
//! file store, the OAuth door, the toolsets' routes, the engine's memory
//! pool) stays as it runs. [`keep_fixed`] names every key of [`Config`] and
//! of `[server]` in a struct pattern without `..`: a key added to either
//! type without a line here does not compile, so no new key is applied on
//! reload by omission. A key declared `restart` that changed is kept as it
//! runs and named in the reload's `needs_restart` (`/healthz`).

use super::{Config, ServerConfig, ToolsetConfig};

/// The keys that changed but apply only after a restart, as `needs_restart`
/// names them.
#[derive(Default)]
struct NeedsRestart(Vec<String>);

impl NeedsRestart {
    /// A key that applies after a restart: the running value, noting
    /// `name` when `next` differs from it.
    fn keep<T: PartialEq + Clone>(&mut self, name: &str, running: &T, next: T) -> T {
        if *running != next {
            self.0.push(name.to_string());
        }
        running.clone()
    }
}

/// `next` with every key declared to apply after a restart kept as it runs,
/// and the names of those that changed. Applied on reload: tools, plugins
/// (their config, grants, limits), resources, prompts, connectors,
/// credentials, auth, upstreams, `[limits]`, `[code]`, registries and
/// trust, toolsets' globs and auth, and of `[server]` `catalog` and
/// `rate_limit`.
pub fn keep_fixed(running: &Config, next: Config) -> (Config, Vec<String>) {
    let mut restart = NeedsRestart::default();
    // The pattern names every key (no `..`): one missing here does not
    // compile. `server` is declared key by key below; `toolsets` keep their
    // routes.
    macro_rules! config_keys {
        (live: $($live:ident),*; restart: $($key:ident),* $(,)?) => {{
            let Config { server, toolsets, $($live,)* $($key,)* } = next;
            let (toolsets, routes_kept) = keep_toolset_routes(running, toolsets);
            let next = Config {
                server: keep_fixed_server(&running.server, server, &mut restart),
                toolsets,
                $($live,)*
                $($key: restart.keep(
                    concat!("[", stringify!($key), "]"),
                    &running.$key,
                    $key,
                ),)*
            };
            (next, routes_kept)
        }};
    }
    let (next, routes_kept) = config_keys!(
        // Each catalog's own, built anew by every reload; and the file's
        // folder (`base_dir`): the same file, the same folder.
        live: limits, plugins, tools, resources, prompts, connectors, auth,
            credentials, upstreams, code, registries, trust, base_dir;
        // Made once at start-up: the guests' outbound client (`[http]`: its
        // roots, its resolver), the kv store, the resource server (`[oauth]`:
        // its keys, metadata and challenges wrap the routes), the file store
        // (uploads and artifacts), the replicas' Redis connection.
        restart: http, kv, oauth, uploads, artifacts, files, cluster,
    );
    let mut needs_restart = restart.0;
    if routes_kept {
        needs_restart.push("[toolsets] added, removed or given another resource".to_string());
    }
    if next.max_memory_bytes() > running.max_memory_bytes() {
        // The engine's memory pool was sized for the largest cap at start-up.
        needs_restart.push("a memory_mib above the largest at start-up".to_string());
    }
    (next, needs_restart)
}

/// `[server]`, key by key: `catalog` and `rate_limit` apply on reload (the
/// catalog reads them); every other key shapes the listener, the sessions
/// or the runtime made at start-up.
fn keep_fixed_server(
    running: &ServerConfig,
    next: ServerConfig,
    restart: &mut NeedsRestart,
) -> ServerConfig {
    // The pattern names every key (no `..`): one missing here does not compile.
    macro_rules! server_keys {
        (live: $($live:ident),*; restart: $($key:ident),* $(,)?) => {{
            let ServerConfig { $($live,)* $($key,)* } = next;
            ServerConfig {
                $($live,)*
                $($key: restart.keep(
                    concat!("[server] ", stringify!($key)),
                    &running.$key,
                    $key,
                ),)*
            }
        }};
    }
    server_keys!(
        live: catalog, rate_limit;
        restart:
        listen,
        public_url,
        hide_unconnected,
        plugins,
        cache_dir,
        max_body_bytes,
        allowed_origins,
        allowed_hosts,
        max_instances,
        stage_instances,
        long_running_slots,
        long_running_after,
        page_size,
        errors,
        allow_execute,
        ui,
        trace_ids,
        metrics,
        auth_failures,
        trusted_proxies,
        admin_listen,
        header_timeout,
        body_timeout,
        idle_timeout,
        write_timeout,
        max_connections,
        max_sessions,
        session_timeout,
        shutdown_grace,
        pinning,
        request_state_key,
        stdio_principal,
        max_streams_per_client,
        max_sessions_per_client,
        max_subscriptions_per_session,
        max_tasks_per_owner,
        output_validation,
        strip_undeclared,
        default_toolset,
    )
}

/// A toolset's routes (`/mcp/NAME`, `/toolsets/NAME/…`, its OAuth door and
/// metadata) are made at start-up: the result keeps the running toolsets'
/// names and resources (a new one is left out, a removed one stays as it
/// runs), and takes the globs and auth of those that stay. True when
/// something had to be kept.
fn keep_toolset_routes(
    running: &Config,
    next: std::collections::BTreeMap<String, ToolsetConfig>,
) -> (std::collections::BTreeMap<String, ToolsetConfig>, bool) {
    let mut kept = false;
    let mut toolsets = running.toolsets.clone();
    for (name, now) in toolsets.iter_mut() {
        match next.get(name) {
            Some(edited) => {
                kept |= edited.resource != now.resource;
                let resource = now.resource.take();
                *now = ToolsetConfig {
                    resource,
                    ..edited.clone()
                };
            }
            None => kept = true,
        }
    }
    kept |= next.keys().any(|n| !running.toolsets.contains_key(n));
    (toolsets, kept)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_live_settings_change_on_reload() {
        let running = Config::parse("[server]\npage_size = 10\n").unwrap();
        let next = Config::parse(
            "[server]\npage_size = 20\ncatalog = \"both\"\n[[tools]]\nname = \"x\"\ndescription = \"d\"\n",
        )
        .unwrap();
        let (applied, needs) = keep_fixed(&running, next);
        assert_eq!(applied.server.page_size, 10);
        assert_eq!(applied.server.catalog, crate::CatalogMode::Both);
        assert_eq!(applied.tools.len(), 1);
        assert_eq!(needs, ["[server] page_size"]);
        let (_, needs) = keep_fixed(&running, running.clone());
        assert!(needs.is_empty());
    }

    #[test]
    fn what_is_made_once_at_start_up_is_kept_and_named() {
        let running = Config::parse("").unwrap();
        let next = Config::parse(
            "[uploads]\nmax_file_bytes = 10\n\
             [artifacts]\nmax_file_bytes = 10\n\
             [files]\nshared_dir = \"/tmp\"\n\
             [cluster]\nredis = \"redis://127.0.0.1:6379\"\n\
             [kv]\nmax_keys = 3\n\
             [http]\nresolve = { \"a.example\" = \"203.0.113.7\" }\n\
             [server]\nlisten = \"127.0.0.1:1\"\nmax_tasks_per_owner = 3\n",
        )
        .unwrap();
        let (applied, needs) = keep_fixed(&running, next);
        assert_eq!(
            needs,
            [
                "[server] listen",
                "[server] max_tasks_per_owner",
                "[http]",
                "[kv]",
                "[uploads]",
                "[artifacts]",
                "[files]",
                "[cluster]",
            ]
        );
        assert_eq!(
            applied.uploads.max_file_bytes,
            running.uploads.max_file_bytes
        );
        assert!(applied.cluster.is_none() && applied.files.shared_dir.is_none());
        assert_eq!(applied.server.listen, running.server.listen);
    }

    #[test]
    fn toolsets_keep_their_routes_and_take_new_globs() {
        let running =
            Config::parse("[toolsets.a]\ntools = [\"x.*\"]\n[toolsets.b]\ntools = [\"y\"]\n")
                .unwrap();
        let globs_only =
            Config::parse("[toolsets.a]\ntools = [\"z.*\"]\n[toolsets.b]\ntools = [\"y\"]\n")
                .unwrap();
        let (applied, needs) = keep_fixed(&running, globs_only);
        assert!(needs.is_empty());
        assert_eq!(applied.toolsets["a"].tools, ["z.*"]);

        let added_and_removed =
            Config::parse("[toolsets.a]\ntools = [\"z.*\"]\n[toolsets.c]\ntools = [\"w\"]\n")
                .unwrap();
        let (applied, needs) = keep_fixed(&running, added_and_removed);
        assert_eq!(
            needs,
            ["[toolsets] added, removed or given another resource"]
        );
        let names: Vec<&String> = applied.toolsets.keys().collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(applied.toolsets["a"].tools, ["z.*"]);
        assert_eq!(applied.toolsets["b"].tools, ["y"]);
    }
}
