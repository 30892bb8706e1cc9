//! The process-wide wasmtime [`Engine`] and the epoch ticker that drives deadlines.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

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

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own,
/// until dropped.
pub struct EpochTicker {
    stop: Arc<AtomicBool>,
}

impl EpochTicker {
    pub fn start(engine: &Engine) -> EpochTicker {
        let stop = Arc::new(AtomicBool::new(false));
        let (engine, flag) = (engine.clone(), stop.clone());
        std::thread::Builder::new()
            .name("hangar-epoch".into())
            .spawn(move || {
                raise_priority();
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })
            .expect("spawn epoch thread");
        EpochTicker { stop }
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
        self.stop.store(true, Ordering::Relaxed);
    }
}
