//! Where the config comes from, read the same way at start-up and on every
//! reload, and which of its settings a reload cannot apply.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use crate::config::Config;

/// The config file and the command line's overrides of it.
#[derive(Debug, Clone)]
pub struct ConfigSource {
    pub path: PathBuf,
    /// `--plugins`, which wins over `server.plugins`.
    pub plugins: Option<PathBuf>,
}

/// The config file used when none is named; it may be absent.
const DEFAULT_PATH: &str = "hangar.toml";

impl ConfigSource {
    /// The config at `path`; the default path may be absent (defaults apply).
    pub fn read(&self) -> anyhow::Result<Config> {
        let mut config = if self.path == Path::new(DEFAULT_PATH) && !self.path.exists() {
            Config::default()
        } else {
            Config::load(&self.path)?
        };
        if let Some(dir) = &self.plugins {
            config.server.plugins = dir.clone();
        }
        Ok(config)
    }

    /// A hash of the config file's bytes and of each component's path,
    /// size and modification time: equal means nothing to reload.
    pub fn fingerprint(&self, plugins: &Path) -> u64 {
        let mut h = DefaultHasher::new();
        std::fs::read(&self.path).ok().hash(&mut h);
        for dir in [plugins.to_path_buf(), plugins.join("mappers")] {
            let Ok(entries) = std::fs::read_dir(&dir) else {
                continue;
            };
            let mut files: Vec<_> = entries
                .filter_map(|e| e.ok())
                .filter(|e| e.path().extension().is_some_and(|x| x == "wasm"))
                .filter_map(|e| Some((e.path(), e.metadata().ok()?)))
                .map(|(path, m)| (path, m.len(), m.modified().ok()))
                .collect();
            files.sort();
            files.hash(&mut h);
        }
        h.finish()
    }
}

/// `next` with the settings that need a restart kept as they run, and the
/// names of those that changed. A reload applies tools, plugins (their
/// config, grants, limits), resources, prompts, connectors, credentials,
/// auth, `[limits]`, toolsets' globs and auth, and of `[server]` only
/// `catalog` and `rate_limit`; `[kv]`, `[http]`, `[oauth]` and which
/// toolsets exist (with their resources) are kept.
pub fn keep_fixed(running: &Config, mut next: Config) -> (Config, Vec<String>) {
    let mut needs_restart = Vec::new();
    let mut server = running.server.clone();
    server.catalog = next.server.catalog;
    server.rate_limit = next.server.rate_limit;
    if format!("{server:?}") != format!("{:?}", next.server) {
        needs_restart.push("[server] (other than catalog and rate_limit)".to_string());
    }
    next.server = server;
    if format!("{:?}", running.kv) != format!("{:?}", next.kv) {
        needs_restart.push("[kv]".to_string());
        next.kv = running.kv.clone();
    }
    if format!("{:?}", running.http) != format!("{:?}", next.http) {
        needs_restart.push("[http]".to_string());
        next.http = running.http.clone();
    }
    if format!("{:?}", running.oauth) != format!("{:?}", next.oauth) {
        // The resource server (its keys, metadata, challenges) wraps the routes.
        needs_restart.push("[oauth]".to_string());
        next.oauth = running.oauth.clone();
    }
    if keep_toolset_routes(running, &mut next) {
        needs_restart.push("[toolsets] added, removed or given another resource".to_string());
    }
    if next.max_memory_bytes() > running.max_memory_bytes() {
        // The engine's memory pool was sized for the largest cap at start-up.
        needs_restart.push("a memory_mib above the largest at start-up".to_string());
    }
    (next, needs_restart)
}

/// A toolset's routes (`/mcp/NAME`, `/toolsets/NAME/…`, its OAuth door and
/// metadata) are made at start-up: `next` keeps the running toolsets'
/// names and resources (a new one is left out, a removed one stays as it
/// runs), and takes the globs and auth of those that stay. True when
/// something had to be kept.
fn keep_toolset_routes(running: &Config, next: &mut Config) -> bool {
    let mut kept = false;
    let mut toolsets = running.toolsets.clone();
    for (name, now) in toolsets.iter_mut() {
        match next.toolsets.get(name) {
            Some(edited) => {
                kept |= edited.resource != now.resource;
                let resource = now.resource.take();
                *now = crate::config::ToolsetConfig {
                    resource,
                    ..edited.clone()
                };
            }
            None => kept = true,
        }
    }
    kept |= next
        .toolsets
        .keys()
        .any(|n| !running.toolsets.contains_key(n));
    next.toolsets = toolsets;
    kept
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
        assert_eq!(applied.server.catalog, crate::config::CatalogMode::Both);
        assert_eq!(applied.tools.len(), 1);
        assert_eq!(needs, ["[server] (other than catalog and rate_limit)"]);
        let (_, needs) = keep_fixed(&running, running.clone());
        assert!(needs.is_empty());
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
