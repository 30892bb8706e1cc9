//! The second tier of the DB result cache: bytes under
//! `<prefix>:cache:<hex of the key>`, expiring with the cache's TTL (Redis
//! expires them). A replica looks here after a miss in its own memory, and
//! writes here what it fetched, so one replica's query serves the others.

use std::time::Duration;

use super::{Cluster, Result};

impl Cluster {
    fn cache_key(&self, key: &[u8]) -> String {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        self.key(&format!("cache:{hex}"))
    }

    pub async fn cache_get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.query(redis::cmd("GET").arg(self.cache_key(key)).clone())
            .await
    }

    pub async fn cache_put(&self, key: &[u8], value: &[u8], ttl: Duration) -> Result<()> {
        let ms = (ttl.as_millis() as u64).max(1);
        self.query(
            redis::cmd("SET")
                .arg(self.cache_key(key))
                .arg(value)
                .arg("PX")
                .arg(ms)
                .clone(),
        )
        .await
    }
}
