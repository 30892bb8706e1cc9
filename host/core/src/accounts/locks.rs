//! `KeyedLocks`: one async lock per key, made on first use and forgotten
//! when nobody else holds or waits for it — one refresh at a time per
//! connection, one token exchange at a time per subject token.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

type Lock = Arc<tokio::sync::Mutex<()>>;

#[derive(Default)]
pub struct KeyedLocks(Mutex<HashMap<String, Lock>>);

impl KeyedLocks {
    /// The lock of `key` (lock it, then hand it back to [`KeyedLocks::forget`]).
    pub fn get(&self, key: &str) -> Lock {
        let mut locks = self.0.lock().expect("not poisoned");
        locks.entry(key.to_string()).or_default().clone()
    }

    /// Gives `lock` back (unlocked): `key`'s entry goes when no other
    /// caller holds it.
    pub fn forget(&self, key: &str, lock: Lock) {
        drop(lock);
        let mut locks = self.0.lock().expect("not poisoned");
        if locks.get(key).is_some_and(|l| Arc::strong_count(l) == 1) {
            locks.remove(key);
        }
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().expect("not poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_lock_is_forgotten_once_its_last_user_gives_it_back() {
        let locks = KeyedLocks::default();
        let first = locks.get("row");
        let second = locks.get("row");
        assert!(Arc::ptr_eq(&first, &second));
        locks.forget("row", first);
        assert_eq!(locks.len(), 1, "another caller still holds it");
        locks.forget("row", second);
        assert_eq!(locks.len(), 0);
    }
}
