//! Rate-limit counters shared by every replica: one GCRA state per limit
//! and caller (`<prefix>:rate:<scope>:<caller>`, the theoretical arrival
//! time in Unix milliseconds), updated by one Lua script so the check and
//! the update are one atomic step, and expiring when the caller is back at
//! a full allowance. The same algorithm as the in-process `governor`
//! limiter: a burst of `calls`, refilled evenly over the period.

use std::sync::LazyLock;
use std::time::Duration;

use super::{Cluster, Result};

/// `KEYS[1]` the state; `ARGV`: the emission interval (period / calls) and
/// the burst tolerance (interval × (calls − 1)), both in ms. Answers -1
/// (admitted) or the milliseconds until the call would fit.
const GCRA: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + tonumber(t[2]) / 1000
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then return math.ceil(allow_at - now) end
local new = tat + interval
redis.call('SET', KEYS[1], string.format('%.3f', new), 'PX', math.ceil(new - now) + 1)
return -1
"#;

/// The script, hashed once for `EVALSHA`.
static GCRA_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(GCRA));

impl Cluster {
    /// Counts one call of `caller` against `calls` per `period` on `scope`:
    /// `Ok(Ok(()))` admitted, `Ok(Err(wait))` over the limit.
    pub async fn rate_check(
        &self,
        scope: &str,
        caller: &str,
        calls: u32,
        period: Duration,
    ) -> Result<std::result::Result<(), Duration>> {
        let interval = period.as_secs_f64() * 1000.0 / f64::from(calls.max(1));
        let tolerance = interval * f64::from(calls.max(1) - 1);
        let mut invocation = GCRA_SCRIPT.key(self.key(&format!("rate:{scope}:{caller}")));
        invocation.arg(interval).arg(tolerance);
        let wait: i64 = self.script(invocation).await?;
        Ok(if wait < 0 {
            Ok(())
        } else {
            Err(Duration::from_millis(wait as u64))
        })
    }
}
