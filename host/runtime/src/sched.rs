//! Sharing the machine between guest calls: instance slots, concurrency
//! caps, and the long-running lane.
//!
//! - **Instance slots.** The pooling allocator has `max_instances` slots.
//!   Tool calls draw from one share, auth checks and mappers from a share of
//!   their own, so tool calls that fill the pool make the next call wait and
//!   then fail with `busy:` — never `Unauthorized`.
//! - **Concurrency caps** ([`Gate`]): `max_concurrent` per plugin or per tool.
//! - **The CPU lane.** Every guest yields at each epoch tick (1 ms). A call
//!   still running at a tick needs a CPU permit to run the next one; there
//!   are `long_running_slots` of them (cores − 1 by default), so guests past
//!   their first tick leave a core to short calls, which finish before their
//!   first tick or wait at most a tick. Calls whose guest code has run for
//!   `long_running_after` (counted in ticks it ran into, not in time since
//!   it started) also need a long-running permit first (as many), so at
//!   most that many of them queue for the CPU: a young call waits behind at
//!   most one slice of each, never behind every runaway.
//! - **Resting.** While other guest calls are starting (one did within the
//!   last [`REST_WINDOW_TICKS`]), a long-running call rests a tick after
//!   each tick it runs: it gives the CPU permit back (keeping the
//!   long-running one, so no other long call runs instead), sleeps a
//!   tick, then gives the long-running permit back too and asks for both
//!   again, behind the long calls waiting. The lane keeps a core free of long calls only in tokio's eyes;
//!   the kernel shares every core between the workers and whatever else
//!   runs, and a worker busy with a runaway's ticks held short calls (and
//!   the processes beside Hangar) off half the machine. Resting, a
//!   runaway takes at most half a core while others start (echo's p99
//!   beside 40 runaways: 2.1–3.0 ms before, 1.2–1.6 ms after, RELIABILITY.md),
//!   and all of one when nothing else does.
//! - **Arrival order.** Calls waiting for a slot or a cap are served in the
//!   order they asked (a tokio semaphore's, which hands out no free permit
//!   while any waits). CPU turns go by a [`TurnKey`] (a [`Lane`]): a call's
//!   first turn (its guest ran into one tick: mostly short calls, which a
//!   tick happened to cross) before any later turn, then the oldest call
//!   first; at each tick a call keeps its turn unless one that comes before
//!   it waits. So a short call waits a tick at most, and a saturated lane
//!   finishes calls in the order they came, each as soon as it can, rather
//!   than all of them late in a round robin of ticks. The age is the
//!   stage's: when its store was readied for the call. A long-running call
//!   waits with the age of the tick it asks at, so it gets one tick after
//!   the calls already waiting and never holds the lane from them; and a
//!   call only waiting its turns never becomes long-running by waiting.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::engine::{Running, Ticking};
use super::lane::{Lane, LanePermit, TurnKey};
use hangar_core::call::{CallError, CancelToken, ErrorKind, Stage};

/// How the scheduler is sized (from `[server]`).
#[derive(Debug, Clone, Copy)]
pub struct SchedOptions {
    pub max_instances: u32,
    /// Slots kept for auth checks and mappers.
    pub stage_instances: u32,
    pub long_running_slots: u32,
    pub long_running_after: Duration,
}

impl SchedOptions {
    /// Defaults for what `[server]` leaves unset: a quarter of the pool (at
    /// least 2) for auth and mappers; all cores but one (at least 1) for long calls.
    pub fn new(
        max_instances: u32,
        stage_instances: Option<u32>,
        long_running_slots: Option<u32>,
        long_running_after: Duration,
    ) -> SchedOptions {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
        let stage = stage_instances.unwrap_or((max_instances / 4).max(2));
        SchedOptions {
            max_instances,
            stage_instances: stage.min(max_instances.saturating_sub(1)),
            long_running_slots: long_running_slots.unwrap_or(cores.saturating_sub(1)).max(1),
            long_running_after,
        }
    }
}

/// Which share of the instance pool a guest instance comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pool {
    /// Tool calls and `list-tools`.
    Tools,
    /// Auth checks and mappers.
    Stages,
}

/// The process-wide slots and lane every guest call goes through.
pub struct Scheduler {
    tool_slots: Arc<Semaphore>,
    stage_slots: Arc<Semaphore>,
    /// Held by each code-mode run beside its tool slot (see [`RunSlot`]).
    runs: Arc<Semaphore>,
    /// One tick of guest code each, oldest call first.
    cpu: Arc<Lane>,
    /// Held by calls older than `long_after` while they queue for `cpu`.
    long: Arc<Semaphore>,
    /// `long_running_after`, in epoch ticks run.
    long_after_ticks: u32,
    /// Slot counts of the two pools, to tell how many are in use.
    tool_max: u32,
    stage_max: u32,
    /// Keeps the epoch ticker going while guests run.
    ticking: Ticking,
    /// The epoch tick at which a guest call last started (see [`Scheduler::starting`]).
    last_start: AtomicU64,
}

/// How recently (in epoch ticks) a guest call must have started for
/// long-running calls to rest between their ticks.
const REST_WINDOW_TICKS: u64 = 10;

impl Scheduler {
    pub fn new(opts: SchedOptions, ticking: Ticking) -> Arc<Scheduler> {
        let tools = opts.max_instances - opts.stage_instances;
        Arc::new(Scheduler {
            tool_slots: Arc::new(Semaphore::new(tools as usize)),
            stage_slots: Arc::new(Semaphore::new(opts.stage_instances as usize)),
            runs: Arc::new(Semaphore::new((tools / 2).max(1) as usize)),
            cpu: Lane::new(opts.long_running_slots as usize),
            long: Arc::new(Semaphore::new(opts.long_running_slots as usize)),
            long_after_ticks: ticks(opts.long_running_after),
            tool_max: tools,
            stage_max: opts.stage_instances,
            ticking,
            last_start: AtomicU64::new(0),
        })
    }

    /// Notes that a guest call starts (every call starts short). Written
    /// only when the tick moved on, so calls that start within one tick of
    /// each other only read the shared value.
    pub(super) fn starting(&self) {
        let now = self.ticking.ticks();
        if self.last_start.load(Ordering::Relaxed) != now {
            self.last_start.store(now, Ordering::Relaxed);
        }
    }

    /// Whether guest calls are starting (one did within the last
    /// [`REST_WINDOW_TICKS`]): then a long-running call rests a tick
    /// between its ticks, leaving the core it ran on to them.
    pub(super) fn calls_starting(&self) -> bool {
        let last = self.last_start.load(Ordering::Relaxed);
        self.ticking.ticks().saturating_sub(last) <= REST_WINDOW_TICKS
    }

    /// Counts a guest as running until the guard drops: the epoch ticker
    /// ticks meanwhile (see [`super::engine::EpochTicker`]).
    pub fn running(&self) -> Running<'_> {
        self.ticking.running()
    }

    /// Instance slots in use now: (tool pool, auth and mapper pool).
    pub fn in_use(&self) -> (u32, u32) {
        let used =
            |slots: &Semaphore, max: u32| max.saturating_sub(slots.available_permits() as u32);
        (
            used(&self.tool_slots, self.tool_max),
            used(&self.stage_slots, self.stage_max),
        )
    }

    /// An instance slot from `pool`, waiting until `until` at most.
    pub async fn slot(
        &self,
        pool: Pool,
        until: Instant,
        stage: Stage,
    ) -> Result<OwnedSemaphorePermit, CallError> {
        let (slots, what) = match pool {
            Pool::Tools => (&self.tool_slots, "tool calls"),
            Pool::Stages => (&self.stage_slots, "auth checks and mappers"),
        };
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        // Spent instances this worker has yet to tear down hold slots: a
        // call short of one drops them first rather than wait for them.
        if super::teardown::drop_spent()
            && let Ok(permit) = slots.clone().try_acquire_owned()
        {
            return Ok(permit);
        }
        tokio::time::timeout_at(until.into(), slots.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| busy(stage, format!("no free instance slot for {what}")))
    }

    /// A code-mode run's instance slot, waiting until `until` at most: a
    /// tool slot, taken only while runs hold fewer than half the tool share
    /// (see [`RunSlot`]).
    pub async fn run_slot(&self, until: Instant, stage: Stage) -> Result<RunSlot, CallError> {
        let run = match self.runs.clone().try_acquire_owned() {
            Ok(run) => run,
            Err(_) => tokio::time::timeout_at(until.into(), self.runs.clone().acquire_owned())
                .await
                .ok()
                .and_then(Result::ok)
                .ok_or_else(|| {
                    busy(
                        stage,
                        "no free slot for a program run (runs hold at most half the tool slots)"
                            .into(),
                    )
                })?,
        };
        let slot = self.slot(Pool::Tools, until, stage).await?;
        Ok(RunSlot {
            _run: run,
            _slot: slot,
        })
    }

    /// Whether a call whose guest code has run into `ran` epoch ticks
    /// counts as long-running.
    pub(super) fn is_long(&self, ran: u32) -> bool {
        ran >= self.long_after_ticks
    }
}

/// What a code-mode run holds while its program runs: a tool slot, and
/// one of the permits that keep runs to half the tool share (at least
/// one). A run's program calls tools, and a wasm tool's call needs a tool
/// slot of its own: were runs free to take every slot, as many runs as
/// slots would each wait for a slot another run holds, and every call
/// their programs make would fail `busy` after its `queue_timeout`.
pub struct RunSlot {
    _run: OwnedSemaphorePermit,
    _slot: OwnedSemaphorePermit,
}

/// `after` in whole epoch ticks, at least one.
fn ticks(after: Duration) -> u32 {
    let tick = super::engine::EPOCH_TICK.as_nanos().max(1);
    u32::try_from(after.as_nanos().div_ceil(tick))
        .unwrap_or(u32::MAX)
        .max(1)
}

/// A `max_concurrent` cap shared by the calls it governs (a plugin's, or one tool's).
pub struct Gate {
    permits: Arc<Semaphore>,
    max: u32,
    /// What is capped, for the busy message (`plugin echo`, `tool spin`).
    what: String,
}

impl Gate {
    pub fn new(max: u32, what: String) -> Gate {
        Gate {
            permits: Arc::new(Semaphore::new(max as usize)),
            max,
            what,
        }
    }

    /// A permit to run, waiting until `until` at most.
    pub async fn enter(&self, until: Instant) -> Result<OwnedSemaphorePermit, CallError> {
        if let Ok(permit) = self.permits.clone().try_acquire_owned() {
            return Ok(permit);
        }
        tokio::time::timeout_at(until.into(), self.permits.clone().acquire_owned())
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| {
                busy(
                    Stage::Handler,
                    format!("{} is running its limit of {} calls", self.what, self.max),
                )
            })
    }
}

fn busy(stage: Stage, why: String) -> CallError {
    CallError::new(stage, ErrorKind::Busy, format!("busy: {why}"))
}

/// A store's turn on the CPU lane: the permits it holds while it runs one
/// tick, kept or given back at the next tick (and given back when the call
/// or the store ends).
#[derive(Clone, Default)]
pub struct LaneTurn(Arc<Mutex<Held>>);

#[derive(Default)]
struct Held {
    long: Option<OwnedSemaphorePermit>,
    cpu: Option<LanePermit>,
}

impl LaneTurn {
    /// Gives the permits back, if held.
    pub fn release(&self) {
        *self.0.lock().unwrap() = Held::default();
    }

    /// Gives the CPU permit back and keeps the long-running one: while
    /// this call rests no other long call runs, and short ones may.
    pub fn rest(&self) {
        self.0.lock().unwrap().cpu = None;
    }

    /// Rests ([`LaneTurn::rest`]): sleeps a tick, gives the long-running
    /// permit back, then [`LaneTurn::wait`]s for both permits, behind the
    /// long calls already waiting. Kept through the rest and the wait
    /// after it, the long permit made every other long call wait for as
    /// long as calls kept starting: until this one ended or met its deadline.
    pub fn rest_then_wait(
        &self,
        sched: &Scheduler,
        key: TurnKey,
        deadline: Instant,
        cancel: CancelToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        self.rest();
        let turn = self.clone();
        let wait = self.wait(sched, true, key, deadline, cancel);
        async move {
            tokio::time::sleep(super::engine::EPOCH_TICK).await;
            turn.0.lock().unwrap().long = None;
            wait.await
        }
    }

    /// At a tick: whether the guest may run its next tick now. A long
    /// call gives its long-running permit back and asks again (behind the
    /// long calls waiting); a held CPU permit is kept unless a turn that
    /// comes before `key` waits for one, else a free one is taken. What it got is
    /// kept for [`LaneTurn::wait`].
    pub fn next_tick(&self, sched: &Scheduler, long: bool, key: TurnKey) -> bool {
        let mut held = self.0.lock().unwrap();
        held.long = None;
        if long {
            match sched.long.clone().try_acquire_owned() {
                Ok(permit) => held.long = Some(permit),
                Err(_) => {
                    held.cpu = None;
                    return false;
                }
            }
        }
        held.cpu = match held.cpu.take() {
            Some(permit) => permit.keep_unless_older(key),
            None => sched.cpu.try_take(),
        };
        held.cpu.is_some()
    }

    /// Waits for the permits `next_tick` did not get, and keeps them. Past
    /// `deadline` or on cancellation it never resumes the guest: the timer
    /// around the call (`limits::bounded`) ends it there, so a crowd of
    /// waiting runaways that reach their deadline together does not each
    /// run one more tick.
    pub fn wait(
        &self,
        sched: &Scheduler,
        long: bool,
        key: TurnKey,
        deadline: Instant,
        cancel: CancelToken,
    ) -> impl Future<Output = ()> + Send + 'static {
        let turn = self.clone();
        let (long_permits, cpu) = (sched.long.clone(), sched.cpu.clone());
        let acquire = async move {
            let needs_long = long && turn.0.lock().unwrap().long.is_none();
            if needs_long {
                let permit = long_permits.acquire_owned().await.ok();
                turn.0.lock().unwrap().long = permit;
            }
            let permit = cpu.take(key).await;
            turn.0.lock().unwrap().cpu = Some(permit);
        };
        async move {
            tokio::select! {
                biased;
                _ = cancel.cancelled() => {}
                _ = tokio::time::sleep_until(deadline.into()) => {}
                _ = acquire => return,
            }
            std::future::pending::<()>().await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EpochTicker;

    /// A scheduler of `max_instances` slots (2 kept for stages) and one CPU
    /// permit, with the ticker it needs kept alive beside it.
    fn scheduler(max_instances: u32) -> (EpochTicker, Arc<Scheduler>) {
        let ticker = EpochTicker::start(&wasmtime::Engine::default());
        let sched = Scheduler::new(
            SchedOptions::new(max_instances, Some(2), Some(1), Duration::from_millis(20)),
            ticker.ticking(),
        );
        (ticker, sched)
    }

    /// Long-running calls rest while calls are starting: for
    /// `REST_WINDOW_TICKS` epoch ticks after the last one started.
    #[test]
    fn calls_count_as_starting_for_the_rest_window() {
        let (ticker, sched) = scheduler(8);
        let _ticking = sched.running();
        let ticks = ticker.ticking();
        sched.starting();
        let started = ticks.ticks();
        assert!(sched.calls_starting(), "a call started this tick");
        let give_up = Instant::now() + Duration::from_secs(10);
        while ticks.ticks() <= started + REST_WINDOW_TICKS {
            assert!(
                sched.calls_starting() || ticks.ticks() > started + REST_WINDOW_TICKS,
                "still within the window at tick {}",
                ticks.ticks()
            );
            assert!(Instant::now() < give_up, "the ticker does not tick");
            std::thread::sleep(Duration::from_micros(200));
        }
        assert!(!sched.calls_starting(), "the window has passed");
        sched.starting();
        assert!(sched.calls_starting(), "and a new call opens it again");
    }

    #[test]
    fn long_running_after_counts_ticks_run() {
        assert_eq!(ticks(Duration::from_millis(20)), 20);
        assert_eq!(ticks(Duration::from_micros(1500)), 2);
        assert_eq!(ticks(Duration::ZERO), 1, "at least one tick");
    }

    /// Turns that wait for the one CPU permit get it oldest call first,
    /// whatever order they asked in, after any call's first turn; the holder
    /// keeps it at its ticks while it comes first, and a long-running call
    /// waits behind them all.
    #[tokio::test]
    async fn cpu_turns_go_to_the_oldest_call_first() {
        let (_ticker, sched) = scheduler(8);
        // Later turns of calls that came 10 ms ago and after.
        let t0 = Instant::now() - Duration::from_millis(10);
        let age = |ms: u64| TurnKey {
            later: true,
            age: t0 + Duration::from_millis(ms),
        };
        let holder = LaneTurn::default();
        assert!(
            holder.next_tick(&sched, false, age(0)),
            "the free permit is taken at once"
        );
        let later = Instant::now() + Duration::from_secs(30);
        let (served, mut order) = tokio::sync::mpsc::unbounded_channel();
        let wait_as = |name: &'static str, long: bool, at: TurnKey| {
            let turn = LaneTurn::default();
            assert!(
                !turn.next_tick(&sched, long, at),
                "no free permit while one is held"
            );
            let wait = turn.wait(&sched, long, at, later, CancelToken::default());
            let served = served.clone();
            tokio::spawn(async move {
                let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
                served.send(name).unwrap();
                // Holds its turn a moment, then gives it to the next.
                tokio::time::sleep(Duration::from_millis(2)).await;
                turn.release();
            });
        };
        // A long call asks first, with the age of its tick (now).
        let now = Instant::now();
        wait_as(
            "long",
            true,
            TurnKey {
                later: true,
                age: now,
            },
        );
        for (name, ms) in [("c", 3), ("a", 1), ("d", 4), ("b", 2)] {
            wait_as(name, false, age(ms));
        }
        tokio::task::yield_now().await;
        assert!(
            holder.next_tick(&sched, false, age(0)),
            "the holder is older than every waiter: it keeps its turn"
        );
        // The youngest call, asking for its first turn.
        wait_as(
            "first",
            false,
            TurnKey {
                later: false,
                age: now,
            },
        );
        tokio::task::yield_now().await;
        assert!(
            !holder.next_tick(&sched, false, age(0)),
            "a first turn waits: the holder gives its turn to it"
        );
        holder.release();
        let mut got = Vec::new();
        for _ in 0..6 {
            got.push(order.recv().await.unwrap());
        }
        assert_eq!(got, vec!["first", "a", "b", "c", "d", "long"]);
    }

    /// A long call that rests gives its long-running permit back after the
    /// rest: a long call waiting for it runs first, and the rested one asks
    /// again behind it.
    #[tokio::test]
    async fn a_resting_long_call_hands_the_long_lane_to_one_waiting() {
        let (_ticker, sched) = scheduler(8);
        let later = Instant::now() + Duration::from_secs(30);
        let key = || TurnKey {
            later: true,
            age: Instant::now(),
        };
        let resting = LaneTurn::default();
        assert!(
            resting.next_tick(&sched, true, key()),
            "both permits are free"
        );
        // Another long call asks while the first runs its tick.
        let waiting = LaneTurn::default();
        assert!(
            !waiting.next_tick(&sched, true, key()),
            "the long lane is held"
        );
        let (served, mut order) = tokio::sync::mpsc::unbounded_channel();
        let wait = waiting.wait(&sched, true, key(), later, CancelToken::default());
        let waiter = waiting.clone();
        let tell = served.clone();
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), wait).await;
            tell.send("waiting").unwrap();
            // Runs its tick, then ends.
            tokio::time::sleep(Duration::from_millis(2)).await;
            waiter.release();
        });
        tokio::task::yield_now().await;
        // The first call rests (calls are starting), then asks again.
        let rest = resting.rest_then_wait(&sched, key(), later, CancelToken::default());
        tokio::spawn(async move {
            let _ = tokio::time::timeout(Duration::from_secs(10), rest).await;
            served.send("rested").unwrap();
        });
        let got = vec![order.recv().await.unwrap(), order.recv().await.unwrap()];
        assert_eq!(got, vec!["waiting", "rested"]);
    }

    #[tokio::test]
    async fn a_call_short_of_a_slot_takes_back_the_slot_of_this_workers_spent_instance() {
        let (_ticker, sched) = scheduler(3);
        let now = Instant::now;
        let held = sched
            .slot(Pool::Tools, now(), Stage::Handler)
            .await
            .unwrap();
        assert!(
            sched
                .slot(Pool::Tools, now(), Stage::Handler)
                .await
                .is_err(),
            "the pool's one tool slot is taken"
        );
        // This thread now gathers spent instances, as a runtime worker does.
        super::super::teardown::on_park();
        super::super::teardown::later(held);
        assert_eq!(sched.in_use().0, 1, "a spent instance keeps its slot");
        assert!(
            sched.slot(Pool::Tools, now(), Stage::Handler).await.is_ok(),
            "the spent instance is dropped rather than waited for"
        );
    }
}
