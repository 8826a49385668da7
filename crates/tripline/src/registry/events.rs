//! Registry-level subscriptions: one callback sees the events of every
//! breaker of the family, tagged with the key.
//!
//! Each breaker gets one forwarding subscriber when it is created; it holds
//! the key and a weak handle to the registry (no cycle), and hands the event
//! to the registry's subscribers. Events are transitions only — rare — so
//! the list is a mutex, cloned before the callbacks run so that a callback
//! may call back into the registry.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, Weak};

use crate::breaker::Event;

type Callback<K> = Arc<dyn Fn(Option<&K>, &Event) + Send + Sync>;

pub(crate) struct Subscribers<K> {
    next_id: AtomicU64,
    list: Mutex<Vec<(u64, Callback<K>)>>,
}

impl<K> Subscribers<K> {
    pub(crate) fn new() -> Self {
        Subscribers {
            next_id: AtomicU64::new(0),
            list: Mutex::new(Vec::new()),
        }
    }

    pub(crate) fn add(&self, f: Callback<K>) -> u64 {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.lock().push((id, f));
        id
    }

    pub(crate) fn remove(&self, id: u64) {
        self.lock().retain(|(i, _)| *i != id);
    }

    /// Delivers `event` of the breaker of `key` (`None`: the overflow
    /// breaker) to every subscriber; a panicking one does not stop the rest.
    pub(crate) fn dispatch(&self, key: Option<&K>, event: &Event) {
        let subscribers: Vec<Callback<K>> = self.lock().iter().map(|(_, f)| f.clone()).collect();
        for f in subscribers {
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(key, event)));
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Callback<K>)>> {
        // Every critical section leaves the list consistent.
        self.list.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What a [`RegistrySubscription`] needs from the registry, without its
/// key type.
pub(crate) trait Unsubscribe: Send + Sync {
    fn unsubscribe(&self, id: u64);
}

/// Keeps a registry-level subscription alive; dropping it unsubscribes.
#[must_use = "dropping a RegistrySubscription unsubscribes at once"]
pub struct RegistrySubscription {
    pub(crate) registry: Weak<dyn Unsubscribe>,
    pub(crate) id: u64,
}

impl RegistrySubscription {
    /// Keeps the callback subscribed for the registry's whole life.
    pub fn detach(mut self) {
        self.registry = Weak::<Detached>::new();
    }
}

struct Detached;

impl Unsubscribe for Detached {
    fn unsubscribe(&self, _: u64) {}
}

impl Drop for RegistrySubscription {
    fn drop(&mut self) {
        if let Some(registry) = self.registry.upgrade() {
            registry.unsubscribe(self.id);
        }
    }
}

impl fmt::Debug for RegistrySubscription {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrySubscription")
            .field("id", &self.id)
            .finish()
    }
}
