//! Where the config comes from, read the same way at start-up and on every
//! reload (which of its keys a reload applies: `hangar_config::reloadable`).

use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};

use hangar_config::Config;

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
