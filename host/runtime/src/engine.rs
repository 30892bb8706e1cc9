//! The process-wide wasmtime [`Engine`] and the epoch ticker that drives deadlines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::Thread;
use std::time::{Duration, Instant};

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances. Deadlines and cancellation are checked, and a
/// running guest yields to other tasks and takes its next lane turn, once per
/// tick: the tick is the longest a CPU-bound guest holds a core unchecked.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Per-component caps of the pooling allocator.
const MAX_CORE_INSTANCES_PER_COMPONENT: u32 = 64;
const MAX_MEMORIES_PER_COMPONENT: u32 = 4;
const MAX_TABLES_PER_COMPONENT: u32 = 64;

/// Sizes the engine is built for.
#[derive(Debug, Clone, Copy)]
pub struct EngineOptions {
    /// Guest instances live at once (slots in the pooling allocator).
    pub max_instances: u32,
    /// The largest memory cap any call can get.
    pub max_memory_bytes: usize,
}

/// Builds the one engine of the process: fuel and epoch interruption on, pooling allocator.
pub fn build(opts: EngineOptions) -> anyhow::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    // A component instance holds a few core instances (the module and its shims).
    pool.total_component_instances(opts.max_instances)
        .total_core_instances(opts.max_instances * 4)
        .total_memories(opts.max_instances * 2)
        .total_tables(opts.max_instances * 4)
        .total_stacks(opts.max_instances)
        // One component may not take a large share of the pool by itself
        // (a Python component has a few dozen core instances).
        .max_core_instances_per_component(MAX_CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MAX_MEMORIES_PER_COMPONENT)
        .max_tables_per_component(MAX_TABLES_PER_COMPONENT)
        .max_memory_size(opts.max_memory_bytes)
        // Keeping a little of each slot resident avoids page faults on the hot path.
        .linear_memory_keep_resident(1 << 20)
        .table_keep_resident(64 << 10)
        .async_stack_keep_resident(64 << 10)
        // Reset only the pages a call dirtied (Linux 6.7+; ignored elsewhere).
        // Measured here: echo over MCP went from ~11.7k to ~31.8k calls/s,
        // because memset of the kept-resident region and CoW faults with
        // TLB-shootdown IPIs dominated the profile.
        .pagemap_scan(wasmtime::Enabled::Auto);

    let mut config = Config::new();
    config
        .consume_fuel(true)
        .epoch_interruption(true)
        .wasm_component_model(true)
        .max_wasm_stack(1 << 20)
        .async_stack_size(2 << 20)
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
    Engine::new(&config).map_err(|e| anyhow::anyhow!("cannot build the wasm engine: {e:?}"))
}

/// How long the ticker runs on with no guest running before it parks.
/// Under load guests start far more often than this, so the first guest of
/// a busy spell rarely has to wake it.
pub const LINGER: Duration = Duration::from_millis(100);

/// Advances the engine's epoch every [`EPOCH_TICK`] while guests run, on a
/// thread of its own, until dropped. Once no guest has run for [`LINGER`]
/// the thread parks, so an idle server wakes nothing every millisecond
/// (an idle server spent 250 ms of CPU in 10 s on it). A guest is counted
/// as running for the whole of its run ([`Ticking::running`]), and the
/// one that starts while none runs wakes the ticker: no guest runs without
/// ticks, so none runs past its deadline unchecked.
pub struct EpochTicker {
    ticking: Ticking,
}

/// What guest runs hold on to so that the ticker ticks: a count of the
/// guests running and the ticker's thread, to wake it.
#[derive(Clone)]
pub struct Ticking {
    shared: Arc<Shared>,
    thread: Thread,
}

struct Shared {
    stop: AtomicBool,
    running: AtomicUsize,
    /// Epochs advanced so far (what the tests watch).
    ticks: AtomicU64,
    /// The thread is parked, or about to: no epoch advances until it is
    /// woken (what the tests watch).
    parked: AtomicBool,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> EpochTicker {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            running: AtomicUsize::new(0),
            ticks: AtomicU64::new(0),
            parked: AtomicBool::new(false),
        });
        let (engine, state) = (engine.clone(), shared.clone());
        let thread = std::thread::Builder::new()
            .name("hangar-epoch".into())
            .spawn(move || {
                raise_priority();
                tick(&engine, &state);
            })
            .expect("spawn epoch thread");
        EpochTicker {
            ticking: Ticking {
                shared,
                thread: thread.thread().clone(),
            },
        }
    }

    /// What guest runs hold on to; see [`Ticking::running`].
    pub fn ticking(&self) -> Ticking {
        self.ticking.clone()
    }
}

/// The ticker thread's loop.
fn tick(engine: &Engine, shared: &Shared) {
    let mut idle_since: Option<Instant> = None;
    while !shared.stop.load(Ordering::Acquire) {
        if shared.running.load(Ordering::SeqCst) == 0 {
            let since = *idle_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= LINGER {
                // A guest that starts from here on unparks the thread (or,
                // if it does so before this parks, makes this return at
                // once): the count is looked at again before any guest
                // could run a tick unchecked.
                shared.parked.store(true, Ordering::SeqCst);
                std::thread::park();
                shared.parked.store(false, Ordering::SeqCst);
                idle_since = None;
                continue;
            }
        } else {
            idle_since = None;
        }
        std::thread::sleep(EPOCH_TICK);
        engine.increment_epoch();
        shared.ticks.fetch_add(1, Ordering::Relaxed);
    }
}

impl Ticking {
    /// Counts a guest as running until the guard drops: the ticker ticks
    /// meanwhile. The guest that starts while none runs wakes the ticker.
    pub fn running(&self) -> Running<'_> {
        if self.shared.running.fetch_add(1, Ordering::SeqCst) == 0 {
            self.thread.unpark();
        }
        Running {
            shared: &self.shared,
        }
    }

    /// Epochs advanced so far.
    pub fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }

    /// Whether the ticker is parked (or about to be): while it is, no epoch
    /// advances.
    pub fn parked(&self) -> bool {
        self.shared.parked.load(Ordering::SeqCst)
    }
}

/// A guest run the ticker ticks for; see [`Ticking::running`].
pub struct Running<'a> {
    shared: &'a Shared,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Gives the calling thread (the epoch ticker) a higher priority than the
/// workers. The tick is what ends a guest's slice: on a busy machine a
/// ticker that waits behind runnable threads for its next turn lets a
/// runaway slice run on, and a short call waits behind it. Needs
/// CAP_SYS_NICE; without it the ticker keeps the default priority.
fn raise_priority() {
    // SAFETY: plain syscalls on the calling thread, no pointers.
    let tid = unsafe { libc::gettid() };
    if unsafe { libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, -10) } != 0 {
        tracing::debug!(
            "epoch ticker keeps the default priority: {}",
            std::io::Error::last_os_error()
        );
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.ticking.shared.stop.store(true, Ordering::Release);
        self.ticking.thread.unpark();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a hang only: on any machine each wait below ends in
    /// milliseconds. No test here bounds how soon something happens.
    const HANG: Duration = Duration::from_secs(30);

    /// Waits until `done` holds; panics naming `what` after [`HANG`].
    fn wait_until(what: &str, done: impl Fn() -> bool) {
        let deadline = Instant::now() + HANG;
        while !done() {
            assert!(Instant::now() < deadline, "{what}: not within {HANG:?}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn the_ticker_ticks_while_a_guest_runs_and_parks_once_none_has_for_a_while() {
        let ticker = EpochTicker::start(&Engine::default());
        let ticking = ticker.ticking();
        // Nothing has run: it parks, and no epoch advances while it is parked.
        wait_until("parked at start", || ticking.parked());
        let at_rest = ticking.ticks();
        std::thread::sleep(Duration::from_millis(20));
        // (Still parked, unless a spurious wake-up of `park` came between.)
        assert!(
            !ticking.parked() || ticking.ticks() == at_rest,
            "ticked while parked"
        );

        // A guest that starts wakes it, and it ticks while the guest runs,
        // however long that is (well past LINGER).
        let running = ticking.running();
        let woke = ticking.ticks();
        wait_until("ten ticks for a running guest", || {
            ticking.ticks() >= woke + 10
        });
        std::thread::sleep(2 * LINGER);
        let later = ticking.ticks();
        wait_until("a long guest keeps it ticking", || {
            ticking.ticks() >= later + 5
        });
        assert!(!ticking.parked(), "parked under a running guest");
        drop(running);
        let ended = Instant::now();

        // It lingers at least LINGER after the last guest, then parks again.
        wait_until("parked again", || ticking.parked());
        assert!(ended.elapsed() >= LINGER, "parked before LINGER had passed");
    }

    #[test]
    fn guests_starting_and_ending_on_many_threads_never_leave_it_parked_under_one() {
        let ticker = EpochTicker::start(&Engine::default());
        let ticking = ticker.ticking();
        for round in 0..20 {
            // Let it park, then start guests from several threads at once.
            wait_until("parked between rounds", || ticking.parked());
            let barrier = std::sync::Barrier::new(4);
            std::thread::scope(|s| {
                for _ in 0..4 {
                    s.spawn(|| {
                        barrier.wait();
                        let _running = ticking.running();
                        let before = ticking.ticks();
                        wait_until(&format!("round {round}: two ticks while running"), || {
                            ticking.ticks() >= before + 2
                        });
                    });
                }
            });
        }
    }
}
