//! The CPU lane's permits, handed out oldest call first.
//!
//! A tokio semaphore serves its waiters in the order they *asked*. For the
//! lane that order is wrong under saturation: a guest asks again at every
//! tick, so a first-come queue of turns is a round robin of one tick each
//! over every call in flight — each call finishes only when all of them
//! do, and dozens of instances stay live and cold in the cache. [`Lane`]
//! orders its waiters by a [`TurnKey`] instead (a call's first turn ahead
//! of every later one, then the call's arrival, see [`super::sched`]) and
//! lets a holder keep its permit at a tick while no waiter comes before it:
//! the oldest call runs to its end, then the next, and a short call that
//! ran into a tick waits for one tick at most, not behind every older call.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::sync::oneshot;

/// Where a turn stands in a [`Lane`]'s queue: lower first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct TurnKey {
    /// False for a call asking for its first turn (its guest ran into one
    /// tick: most calls that do are short, an echo that a tick happened to
    /// cross), which goes before every later turn of any call.
    pub later: bool,
    /// Then the older first.
    pub age: Instant,
}

/// A fixed number of permits and the turns waiting for one, oldest key
/// first. A permit is handed straight to a waiter when given back, so none
/// is free while any waits.
pub struct Lane {
    queue: Mutex<Queue>,
}

struct Queue {
    free: usize,
    waiting: BinaryHeap<Reverse<Waiter>>,
    /// Breaks ties between equal keys in the order they asked.
    asked: u64,
}

struct Waiter {
    key: TurnKey,
    asked: u64,
    /// Told when the permit is theirs; closed when they gave up waiting.
    wake: oneshot::Sender<()>,
}

impl PartialEq for Waiter {
    fn eq(&self, other: &Self) -> bool {
        (self.key, self.asked) == (other.key, other.asked)
    }
}
impl Eq for Waiter {}
impl PartialOrd for Waiter {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Waiter {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.key, self.asked).cmp(&(other.key, other.asked))
    }
}

impl Queue {
    /// Hands one permit to the oldest waiter still waiting; false when
    /// none is.
    fn hand_over(&mut self) -> bool {
        while let Some(Reverse(waiter)) = self.waiting.pop() {
            if waiter.wake.send(()).is_ok() {
                return true;
            }
        }
        false
    }

    /// The key of the oldest waiter still waiting (dropping those that
    /// gave up on the way).
    fn oldest(&mut self) -> Option<TurnKey> {
        while let Some(Reverse(waiter)) = self.waiting.peek() {
            if !waiter.wake.is_closed() {
                return Some(waiter.key);
            }
            self.waiting.pop();
        }
        None
    }
}

impl Lane {
    pub fn new(permits: usize) -> Arc<Lane> {
        Arc::new(Lane {
            queue: Mutex::new(Queue {
                free: permits,
                waiting: BinaryHeap::new(),
                asked: 0,
            }),
        })
    }

    /// A free permit, if there is one (there is none while any waits).
    pub fn try_take(self: &Arc<Lane>) -> Option<LanePermit> {
        let mut queue = self.queue.lock().unwrap();
        if queue.free == 0 {
            return None;
        }
        queue.free -= 1;
        Some(LanePermit(Some(self.clone())))
    }

    /// Waits for a permit, served lowest `key` first. Dropping the future
    /// gives back a permit it was handed meanwhile.
    pub fn take(
        self: &Arc<Lane>,
        key: TurnKey,
    ) -> impl Future<Output = LanePermit> + Send + 'static {
        let (wake, woken) = oneshot::channel();
        {
            let mut queue = self.queue.lock().unwrap();
            if queue.free > 0 {
                queue.free -= 1;
                let _ = wake.send(());
            } else {
                queue.asked += 1;
                let asked = queue.asked;
                queue.waiting.push(Reverse(Waiter { key, asked, wake }));
            }
        }
        let mut waiting = Waiting {
            lane: self.clone(),
            woken: Some(woken),
        };
        async move {
            let woken = waiting.woken.as_mut().expect("taken once");
            // The sender lives in the queue until it wakes us, and the
            // queue lives as long as the lane this future holds.
            woken.await.expect("a waiter is woken, not forgotten");
            waiting.woken = None;
            LanePermit(Some(waiting.lane.clone()))
        }
    }

    /// Gives a permit back: to the oldest waiter, or to the free ones.
    fn give_back(&self) {
        let mut queue = self.queue.lock().unwrap();
        if !queue.hand_over() {
            queue.free += 1;
        }
    }
}

/// One permit of a [`Lane`], given back when dropped.
pub struct LanePermit(Option<Arc<Lane>>);

impl LanePermit {
    /// At a tick: keeps the permit when no waiter comes before `key`,
    /// otherwise hands it to the first waiter and returns `None`.
    pub fn keep_unless_older(mut self, key: TurnKey) -> Option<LanePermit> {
        let lane = self.0.take().expect("a permit holds its lane");
        let mut queue = lane.queue.lock().unwrap();
        match queue.oldest() {
            Some(oldest) if oldest < key && queue.hand_over() => None,
            _ => {
                drop(queue);
                Some(LanePermit(Some(lane)))
            }
        }
    }
}

impl Drop for LanePermit {
    fn drop(&mut self) {
        if let Some(lane) = self.0.take() {
            lane.give_back();
        }
    }
}

/// A turn waiting in a [`Lane`]; when dropped before it took its permit,
/// stops waiting and gives back a permit handed to it meanwhile.
struct Waiting {
    lane: Arc<Lane>,
    woken: Option<oneshot::Receiver<()>>,
}

impl Drop for Waiting {
    fn drop(&mut self) {
        if let Some(mut woken) = self.woken.take() {
            woken.close();
            if woken.try_recv().is_ok() {
                self.lane.give_back();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn later(age: Instant) -> TurnKey {
        TurnKey { later: true, age }
    }

    #[tokio::test]
    async fn waiters_are_served_oldest_key_first_whatever_order_they_asked() {
        let lane = Lane::new(1);
        let held = lane.try_take().expect("one free permit");
        assert!(lane.try_take().is_none(), "none free while one is held");
        let t0 = Instant::now();
        let (served, mut order) = tokio::sync::mpsc::unbounded_channel();
        let mut tasks = Vec::new();
        // Asked youngest first: keys t0+4ms, t0+3ms, …, t0.
        for age in (0..5u64).rev() {
            let take = lane.take(later(t0 + Duration::from_millis(age)));
            let served = served.clone();
            tasks.push(tokio::spawn(async move {
                let permit = take.await;
                served.send(age).unwrap();
                tokio::time::sleep(Duration::from_millis(1)).await;
                drop(permit);
            }));
        }
        tokio::task::yield_now().await;
        drop(held);
        let mut got = Vec::new();
        for _ in 0..5 {
            got.push(order.recv().await.unwrap());
        }
        assert_eq!(got, vec![0, 1, 2, 3, 4], "oldest key first");
        for task in tasks {
            task.await.unwrap();
        }
        assert!(lane.try_take().is_some(), "the permit is free again");
    }

    #[tokio::test]
    async fn a_holder_keeps_its_permit_until_an_older_turn_waits() {
        let lane = Lane::new(1);
        let t0 = Instant::now();
        let held = lane.try_take().unwrap();
        let younger = lane.take(later(t0 + Duration::from_secs(1)));
        let held = held
            .keep_unless_older(later(t0))
            .expect("no waiter is older than the holder");
        let younger = tokio::spawn(younger);
        tokio::task::yield_now().await;
        assert!(!younger.is_finished(), "the younger turn still waits");
        // A holder younger than the waiter hands the permit over.
        assert!(
            held.keep_unless_older(later(t0 + Duration::from_secs(2)))
                .is_none()
        );
        let permit = tokio::time::timeout(Duration::from_secs(5), younger)
            .await
            .expect("the waiter got the permit")
            .unwrap();
        drop(permit);
        assert!(lane.try_take().is_some());
    }

    /// A call's first turn goes before every later turn, however old:
    /// a short call that ran into a tick does not wait behind the calls
    /// running on.
    #[tokio::test]
    async fn a_first_turn_goes_before_older_calls_later_turns() {
        let lane = Lane::new(1);
        let t0 = Instant::now();
        let old = later(t0);
        let held = lane.try_take().unwrap();
        let first = lane.take(TurnKey {
            later: false,
            age: t0 + Duration::from_secs(1),
        });
        let first = tokio::spawn(first);
        tokio::task::yield_now().await;
        assert!(
            held.keep_unless_older(old).is_none(),
            "the old call's later turn gives way to the young call's first"
        );
        let permit = tokio::time::timeout(Duration::from_secs(5), first)
            .await
            .expect("the first turn got the permit")
            .unwrap();
        drop(permit);
    }

    #[tokio::test]
    async fn a_turn_that_gives_up_waiting_loses_no_permit() {
        let lane = Lane::new(1);
        let held = lane.try_take().unwrap();
        let t0 = Instant::now();
        // One waiter gives up before the permit is back, one after it was
        // handed the permit but before it looked.
        drop(lane.take(later(t0)));
        let late = lane.take(later(t0 + Duration::from_millis(1)));
        drop(held);
        drop(late);
        let permit = lane.try_take().expect("the handed permit came back");
        assert!(lane.try_take().is_none(), "and there is still only one");
        drop(permit);
    }
}
