//! `WarmPool`: the idle instances of a plugin whose operator opted into
//! `instances.reuse`. Tools, auth checks and mappers keep theirs the same
//! way: an instance is taken for one call at a time, given back only when
//! that call ended cleanly, and let go once it has served `max_calls`
//! calls, sat idle past `max_idle`, or finds the pool holding `pool_size`.
//! A kept instance keeps its slot in the instance pool.

use std::sync::Mutex;
use std::time::Instant;

use wasmtime::Store;

use super::guest_state::GuestState;
use hangar_config::InstancesConfig;

/// A live instance the pool can keep: what it needs is the instance's store.
pub(super) trait Pooled {
    fn store(&self) -> &Store<GuestState>;
}

/// Idle instances of type `T` (a tool's `Instance`, a stage's `Live`).
pub(super) struct WarmPool<T> {
    /// The plugin's reuse settings; `None` when it did not opt in.
    reuse: Option<InstancesConfig>,
    idle: Mutex<Vec<Idle<T>>>,
}

struct Idle<T> {
    instance: T,
    /// Calls served so far.
    calls: u32,
    since: Instant,
}

impl<T: Pooled> WarmPool<T> {
    pub(super) fn new(reuse: Option<InstancesConfig>) -> WarmPool<T> {
        WarmPool {
            reuse,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// An idle instance and the calls it has served, if reuse is on and one
    /// has not been idle too long. Those that have are dropped here, after
    /// the lock is let go: dropping a store resets its memory (thousands of
    /// instructions and a syscall), which other calls should not wait for.
    pub(super) fn take(&self) -> Option<(T, u32)> {
        let reuse = self.reuse.as_ref()?;
        let (expired, found) = {
            let mut idle = self.idle.lock().unwrap();
            // Kept in the order they were given back: the expired ones lead.
            let fresh = idle
                .iter()
                .position(|w| w.since.elapsed() < reuse.max_idle)
                .unwrap_or(idle.len());
            let expired: Vec<Idle<T>> = idle.drain(..fresh).collect();
            (expired, idle.pop())
        };
        drop(expired);
        found.map(|w| (w.instance, w.calls))
    }

    /// Keeps `instance`, whose call — its `calls`th — ended cleanly, unless
    /// reuse is off, it has served its calls or the pool is full; one not
    /// kept is torn down after the call's answer (see [`super::teardown`]).
    pub(super) fn give_back(&self, instance: T, calls: u32)
    where
        T: Send + 'static,
    {
        let Some(reuse) = &self.reuse else {
            return super::teardown::later(instance);
        };
        if calls >= reuse.max_calls {
            return super::teardown::later(instance);
        }
        // An idle instance must not hold up the long-running lane.
        instance.store().data().turn.release();
        let mut idle = self.idle.lock().unwrap();
        if idle.len() < reuse.pool_size {
            idle.push(Idle {
                instance,
                calls,
                since: Instant::now(),
            });
        } else {
            drop(idle);
            super::teardown::later(instance);
        }
    }
}
